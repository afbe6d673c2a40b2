# cellab: make setup | demo | test | bench | lint | build | clean
# Every target sets itself up: a fresh Debian 12 machine needs nothing but this Makefile.
SHELL := /bin/bash
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
BUILD := $(ROOT)/build
BIN := $(BUILD)/bin
CC ?= gcc
CFLAGS_COMMON := -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE

# Python bytecode is cached under .venv, not beside the sources. With PYTHONDONTWRITEBYTECODE set (as on this
# machine) every Python process compiled some 500 modules from source: about 1 s of CPU for each agent, CLI and
# test subprocess start, and a lab's bring-up several times that.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(VENV)/pycache

# what ../shared/tools/open5gs's daemons load (its README's runtime line; a fresh machine lacks libtins and
# libmicrohttpd, and the UPF, HSS and PCRF then exit at start)
OPEN5GS_RUNTIME := libyaml-0-2 libtalloc2 libmongoc-1.0-0 libbson-1.0-0 libgnutls30 libssl3 libidn12 libnghttp2-14 \
	libmicrohttpd12 libcurl3-gnutls libtins4.0
# Debian packages the project needs (checked one by one; apt runs only when one is missing).
APT_PACKAGES := python3-venv clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libzmq3-dev libjansson-dev libpcap-dev \
	pkg-config iperf3 iputils-ping procps tshark tcpdump iproute2 ethtool gcc-aarch64-linux-gnu libc6-dev-arm64-cross \
	qemu-user-static adb chromium \
	libfftw3-single3 libmbedcrypto7 libboost-program-options1.74.0 libconfig++9v5 libsctp1 libzmq5 uhd-host \
	$(OPEN5GS_RUNTIME)

# Each C program's rules live in its room and add their outputs to BUILD_TARGETS; C sources the
# programs share (a JSON writer, the TCP option walk) are core, in cellab/csrc.
CSRC_DIR := cellab/csrc
BUILD_TARGETS :=
-include emulator/rules.mk
-include server-modules/rules.mk
-include ue-agents/probe/rules.mk
-include cellab/flowstat/rules.mk
-include core-config/rules.mk
-include ran-config/rules.mk

.PHONY: setup setup-agent apt venv build samples test demo demo-srsran bench lint clean

setup: apt venv build samples

# An agent host's lean install: the Debian packages, Python packages (no controller extras: no numpy, scipy,
# matplotlib, Dask) and C programs of its role only. ROLE: server, ue-virtual, ue-android, attenuator, enb, core.
AGENT_APT_base := python3-venv pkg-config libzmq5
AGENT_APT_server := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libjansson-dev libpcap-dev iperf3 tcpdump \
	iproute2 iputils-ping procps ethtool
AGENT_APT_ue-virtual := libpcap-dev iperf3 iproute2 iputils-ping
AGENT_APT_ue-android := adb gcc-aarch64-linux-gnu libc6-dev-arm64-cross
AGENT_APT_attenuator :=
AGENT_APT_enb := uhd-host iproute2
AGENT_APT_core := iproute2 $(OPEN5GS_RUNTIME)
AGENT_BIN_server := $(BIN)/cellab-modules $(BIN)/cellab-send $(BIN)/cellab-flowstat
AGENT_BIN_ue-virtual := $(BIN)/cellab-probe
AGENT_BIN_ue-android := $(BIN)/cellab-probe-aarch64
AGENT_ROLES := server ue-virtual ue-android attenuator enb core

setup-agent:
	@case " $(AGENT_ROLES) " in *" $(ROLE) "*) ;; *) echo "make setup-agent: ROLE must be one of: $(AGENT_ROLES)" >&2; exit 2;; esac
	$(MAKE) apt APT_PACKAGES="$(AGENT_APT_base) $(AGENT_APT_$(ROLE))"
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	$(if $(AGENT_BIN_$(ROLE)),$(MAKE) $(AGENT_BIN_$(ROLE)))

# the synthetic drive log and commercial trace the example campaigns use (cellab/campaign/traces.py)
samples: runs/data/sample-drive.csv

runs/data/sample-drive.csv: cellab/campaign/traces.py | venv
	$(VENV)/bin/cellab trace samples runs/data

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		if [ "$$(id -u)" != 0 ]; then echo "make setup: need root to apt-get install $$missing" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# uv installs the same packages as pip about three times faster (56 -> 18 s measured here); pip when uv is not
# to be had or fails (uv does not read pip's configuration: its find-links are passed on)
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	{ $(PY) -m pip install -q uv && $(VENV)/bin/uv pip install -q --native-tls --python $(PY) \
		$(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS)) -e '.[controller,dev]'; } || \
		{ $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[controller,dev]'; }
	touch $@

venv: $(VENV)/.installed

# the C programs two at a time (26 -> 14 s on 2 cores)
build:
	$(MAKE) --no-print-directory -j2 $(BUILD_TARGETS)

# The suite runs on three pytest-xdist workers (TEST_WORKERS=0: serial): unit tests three at a time, lab and
# srsRAN tests alone (conftest.py: two lab tests side by side stall each other's virtual cell on 2 cores), with
# background tests beside them. Three, not two, on 2 cores: a worker waiting for a lab test to end is idle, and
# the third keeps a core busy meanwhile (measured from a clean clone: pytest 17:11 with two, 16:20 with three).
# Workers take tests one at a time (--maxschedchunk 1) in conftest's order: the lab tests first with background
# tests between them, the shared ones last (16:28 -> 14:28; CELLAB_TEST_TIMELINE=FILE records each test's wait
# for the lock). The
# extended tests (marker `extended`: whole sweeps of the papers' claims, long real-stack scenarios) run in
# `make bench BENCH=extended`.
TEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -q -m 'not extended' $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --maxschedchunk 1)

# both campaigns run and write their reports even if the first has a failed run; the exit status says so; the last
# lines are what each campaign found (`cellab headline` of the newest folder of each: the lines its report opens with)
demo: setup
	@status=0; \
	$(VENV)/bin/cellab run runs/demo/sr-validation.yaml || status=1; \
	$(VENV)/bin/cellab run runs/demo/cc-shootout.yaml || status=1; \
	echo; echo "what the demo found:"; \
	$(VENV)/bin/cellab headline $$(ls -dt runs/out/demo-sr-validation-*/ | head -1) \
		$$(ls -dt runs/out/demo-cc-shootout-*/ | head -1) || status=1; \
	exit $$status

# the SR validation on the real srsRAN 4G stack over ZMQ (lab srsran-zmq): the bundle in ../shared/tools/srsran
# (or CELLAB_SRSRAN_BIN); it skips, saying why, when neither is there
# CORE=open5gs|srsepc: the lab's EPC (Open5GS 2.7 from ../shared/tools/open5gs or CELLAB_OPEN5GS_DIR; default:
# the lab's own, ran-config/README.md); each run's record names it and its version
SRSRAN_BIN ?= $(if $(CELLAB_SRSRAN_BIN),$(CELLAB_SRSRAN_BIN),$(abspath $(ROOT)/../shared/tools/srsran/bin))
CORE ?=
demo-srsran: setup
	@if [ ! -x "$(SRSRAN_BIN)/srsenb" ]; then \
		echo "demo-srsran: skipped: no srsRAN 4G in $(SRSRAN_BIN) (set CELLAB_SRSRAN_BIN to a folder with srsenb, srsue, srsepc)"; \
		exit 0; fi; \
	CELLAB_SRSRAN_BIN=$(SRSRAN_BIN) $(if $(CORE),CELLAB_ZMQ_CORE=$(CORE)) $(VENV)/bin/cellab run runs/demo-srsran/sr-validation.yaml; \
	rc=$$?; $(PY) -m cellab.ran.sr_bench "$$(ls -d runs/out/demo-srsran-sr-validation-* | tail -1)"; exit $$rc

bench: setup
	$(PY) -m cellab.bench $(BENCH)

lint: setup
	$(VENV)/bin/ruff check cellab ran-config core-config attenuator ue-agents server-modules emulator

clean:
	rm -rf $(BUILD)
