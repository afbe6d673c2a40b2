# cellab/flowstat: cellab-flowstat, per-TCP-flow metrics from a pcap in one pass (libpcap).
FLOWSTAT_DIR := cellab/flowstat
FLOWSTAT_SRCS := $(addprefix $(FLOWSTAT_DIR)/,main.c decode.c flow.c flowtab.c report.c vec.c) $(CSRC_DIR)/jsonw.c
FLOWSTAT_HDRS := $(wildcard $(FLOWSTAT_DIR)/*.h $(CSRC_DIR)/*.h)

$(BIN)/cellab-flowstat: $(FLOWSTAT_SRCS) $(FLOWSTAT_HDRS) $(FLOWSTAT_DIR)/rules.mk
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -I$(CSRC_DIR) -o $@ $(FLOWSTAT_SRCS) -lpcap -lm

BUILD_TARGETS += $(BIN)/cellab-flowstat
