# emulator/: the virtual LTE cell, cellab-cell (included by the top Makefile). One concern per unit: see README.md.
CELL_UNITS := cell tti args io pktq channel dlq harq dl_sched ul rrc ttilog logcap control stack_clock rng util
CELL_SRCS := $(patsubst %,emulator/%.c,$(CELL_UNITS)) emulator/radio.c emulator/trace.c emulator/lte_tables.c
CELL_HDRS := emulator/cell.h emulator/radio.h emulator/trace.h emulator/lte_tables.h emulator/ttilog.h

$(BIN)/cellab-cell: $(CELL_SRCS) $(CELL_HDRS) emulator/rules.mk
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -o $@ $(CELL_SRCS) $$(pkg-config --cflags --libs libzmq jansson) -lm

BUILD_TARGETS += $(BIN)/cellab-cell
