# server-modules: BPF struct_ops congestion controls, their loader (cellab-modules) and the sender (cellab-send).
# Included by the top Makefile; $(BUILD), $(BIN), $(CC) and $(CFLAGS_COMMON) come from there.
SM_DIR := server-modules
SM_BUILD := $(BUILD)/server-modules
SM_BPF_NAMES := c2tcp scubic exll cubic_qarr cubic_barr or_ingress burst_drop cubic_cap
SM_BPF_OBJS := $(patsubst %,$(SM_BUILD)/%.bpf.o,$(SM_BPF_NAMES))
SM_SKELS := $(patsubst %,$(SM_BUILD)/%.skel.h,$(SM_BPF_NAMES))
SM_VMLINUX := $(SM_BUILD)/vmlinux.h
SM_BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror -I$(SM_BUILD) -I$(SM_DIR)/bpf

# vmlinux.h comes from the running kernel's BTF (never committed): the struct_ops layout must match it.
$(SM_VMLINUX):
	@mkdir -p $(SM_BUILD)
	@test -r /sys/kernel/btf/vmlinux || { echo "no kernel BTF at /sys/kernel/btf/vmlinux: the BPF modules need CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(SM_BUILD)/%.bpf.o: $(SM_DIR)/bpf/%.bpf.c $(wildcard $(SM_DIR)/bpf/*.h) $(SM_VMLINUX)
	clang $(SM_BPF_CFLAGS) -c $< -o $@

$(SM_BUILD)/%.skel.h: $(SM_BUILD)/%.bpf.o
	bpftool gen skeleton $< name $(subst .bpf.o,,$(notdir $<))_bpf > $@.tmp && mv $@.tmp $@

$(BIN)/cellab-modules: $(wildcard $(SM_DIR)/loader/*.c $(SM_DIR)/loader/*.h) $(SM_SKELS)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -I$(SM_BUILD) -I$(SM_DIR)/loader $(filter %.c,$^) -o $@ -lbpf -lelf -lz

$(BIN)/cellab-send: $(wildcard $(SM_DIR)/sender/*.c $(SM_DIR)/sender/*.h)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -pthread $(filter %.c,$^) -o $@ -lm

BUILD_TARGETS += $(BIN)/cellab-modules $(BIN)/cellab-send
