# ue-agents/probe: cellab-probe for x86_64 (with libpcap) and static aarch64 for Android (no libpcap:
# Debian has no arm64 libpcap without multiarch, so `analyze --pcap` is compiled out there and says so;
# `analyze --events` and everything else work).
PROBE_DIR := ue-agents/probe
PROBE_SRCS := $(addprefix $(PROBE_DIR)/,main.c fetch.c fetch_args.c fetch_flow.c fetch_loop.c fetch_summary.c analyze.c selftest.c pipeline.c exll.c dfcsd.c srest.c srjson.c \
	rttmatch.c pktparse.c capture.c srprobe.c flowproto.c util.c) $(CSRC_DIR)/jsonw.c
PROBE_HDRS := $(wildcard $(PROBE_DIR)/*.h $(CSRC_DIR)/*.h)
PROBE_AARCH64_CC ?= aarch64-linux-gnu-gcc

$(BIN)/cellab-probe: $(PROBE_SRCS) $(PROBE_HDRS) $(PROBE_DIR)/rules.mk
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -I$(CSRC_DIR) -DHAVE_PCAP -o $@ $(PROBE_SRCS) -lpcap -lm

$(BIN)/cellab-probe-aarch64: $(PROBE_SRCS) $(PROBE_HDRS) $(PROBE_DIR)/rules.mk
	@mkdir -p $(BIN)
	$(PROBE_AARCH64_CC) $(CFLAGS_COMMON) -I$(CSRC_DIR) -static -o $@ $(PROBE_SRCS) -lm

BUILD_TARGETS += $(BIN)/cellab-probe $(BIN)/cellab-probe-aarch64
