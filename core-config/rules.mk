# core room (core-config/): FerretDB for labs without MongoDB, and Debian's NextEPC daemons.

# FerretDB v1.24 (MongoDB wire protocol on SQLite) from the Go module proxy, through a small main on its
# embeddable package (core-config/ferretdb/main.go says why).
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
FERRETDB_BIN := $(BIN)/cellab-ferretdb
BUILD_TARGETS += $(FERRETDB_BIN)

$(FERRETDB_BIN): core-config/ferretdb/main.go core-config/ferretdb/go.mod core-config/ferretdb/go.sum
	@mkdir -p $(BIN)
	cd core-config/ferretdb && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false $(GO) build -trimpath -o $@ .

# NextEPC 0.3.10 (HSS, SGW, PGW, PCRF, MME): installed with service starts refused and the units disabled,
# so a host with systemd does not get daemons restarting without a database (core-config/install-nextepc.sh).
NEXTEPC_PACKAGES := nextepc-hss nextepc-sgw nextepc-pgw nextepc-pcrf nextepc-mme
NEXTEPC_STAMP := $(BUILD)/.nextepc-installed
BUILD_TARGETS += $(NEXTEPC_STAMP)

$(NEXTEPC_STAMP): core-config/install-nextepc.sh
	bash core-config/install-nextepc.sh $(NEXTEPC_PACKAGES)
	@mkdir -p $(BUILD) && touch $@

# An LD_PRELOAD library that carries one-to-one SCTP servers (NextEPC's MME) over the srsRAN bundle
# shim's AF_UNIX datagrams, on kernels without SCTP (core-config/sctpshim/cellab_sctp_stream.c).
APT_PACKAGES += libsctp-dev
SCTP_STREAM_SHIM := $(BUILD)/lib/cellab_sctp_stream.so
BUILD_TARGETS += $(SCTP_STREAM_SHIM)

$(SCTP_STREAM_SHIM): core-config/sctpshim/cellab_sctp_stream.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -shared -fPIC -o $@ $< -ldl -lpthread
