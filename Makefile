# SPDX-License-Identifier: GPL-2.0-or-later
# memtide: one Makefile for the whole tree.
#
# Layout of what it builds (all out of tree, under $(BUILD)):
#   $(BUILD)/obj/...          objects, mirroring the source tree
#   $(BUILD)/lib/libX.a       one static library per component (vmm, proto, agent, mtd, sim)
#   $(BUILD)/bin/             programs: memtided, memtidectl, memtide-agent, memtide-sim,
#                             memtide-trace, vmm-bench, ...
#   $(BUILD)/tests/           unit test programs
#   $(BUILD)/fuzz/            libFuzzer targets; $(BUILD)/fuzz-obj/ their clang objects
#
# Each component is a folder; every .c in it goes into the component's library, except the
# files named in its *_MAIN variable, which hold main() for a program.  Adding a source file
# needs no edit here.  Unit tests are tests/unit/test_*.c, one program each, linked against
# every library (the linker takes only what a test uses).
#
# Targets: all (default), check, check-kvm, soak, bench, lint, sanitize, demo, install
# (install-agent, install-lab), uninstall, deb, check-packaging, clean, fuzz, fuzz-build.

BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= gcc
SAN      ?=

PKGS     := json-c liburcu liburcu-cds libvirt libvirt-qemu inih libmicrohttpd libzstd libxml-2.0 \
            libsystemd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
CFLAGS   ?= -O2 -g
ifeq ($(SAN),1)
CFLAGS   := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
# host/'s includes name their folder (#include "act/qmp.h"): host/ is the root, and
# scripts/layers.py checks that they run one way (host/README.md).
INCLUDES   := -Ivmm/include -Iproto -Iguest-agent -Ihost -Isim
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) $(CPPFLAGS) -D_GNU_SOURCE -MMD -MP $(INCLUDES) $(PKG_CFLAGS)

# ---- components --------------------------------------------------------------------------
# libvmm: pure, no I/O; links with nothing but libc and libm.
VMM_SRC    := $(wildcard vmm/*.c)
# proto: shared codec (json-c).
PROTO_SRC  := $(wildcard proto/*.c)
# guest agent: everything but main.c is a library, so tests can drive it.
AGENT_MAIN := guest-agent/main.c
AGENT_SRC  := $(filter-out $(AGENT_MAIN),$(wildcard guest-agent/*.c))
# host: memtided.c and front/memtidectl.c hold main(); the rest is libmtd, one folder per
# stage of the data path (host/README.md): base, access, decide, act, vsock, daemon, front.
# host/access/qemu_plugin/ is not in it: QEMU loads the plugin (EPT_PLUGIN below).
MTD_MAIN   := host/memtided.c host/front/memtidectl.c
MTD_DIRS   := base access decide act vsock daemon front
MTD_SRC    := $(filter-out $(MTD_MAIN),$(wildcard host/*.c $(MTD_DIRS:%=host/%/*.c)))
# policy lab: memtide-sim and memtide-trace.
SIM_MAIN   := sim/memtide-sim.c sim/memtide-trace.c
SIM_SRC    := $(filter-out $(SIM_MAIN),$(wildcard sim/*.c))
# benchmarks: each bench/*.c with main() is a program of its own.
BENCH_SRC  := $(wildcard bench/*.c)
# unit tests
TEST_SRC   := $(wildcard tests/unit/test_*.c)
# workload programs that run inside the e2e guest (static)
WORKLOAD_SRC := $(wildcard tests/e2e/workloads/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBVMM   := $(BUILD)/lib/libvmm.a
LIBPROTO := $(BUILD)/lib/libproto.a
LIBAGENT := $(BUILD)/lib/libagent.a
LIBMTD   := $(BUILD)/lib/libmtd.a
LIBSIM   := $(BUILD)/lib/libsim.a
# libsim comes first: the lab runs memtided's balloon policy (sim/actuators.c calls libmtd).
ALL_LIBS := $(LIBSIM) $(LIBMTD) $(LIBAGENT) $(LIBPROTO) $(LIBVMM)

BIN      := $(BUILD)/bin
PROGRAMS := $(if $(wildcard host/memtided.c),$(BIN)/memtided) \
            $(if $(wildcard host/front/memtidectl.c),$(BIN)/memtidectl) \
            $(if $(wildcard $(AGENT_MAIN)),$(BIN)/memtide-agent) \
            $(if $(wildcard sim/memtide-sim.c),$(BIN)/memtide-sim) \
            $(if $(wildcard sim/memtide-trace.c),$(BIN)/memtide-trace) \
            $(patsubst bench/%.c,$(BIN)/%,$(BENCH_SRC)) \
            $(patsubst tests/e2e/workloads/%.c,$(BUILD)/guest/bin/%,$(WORKLOAD_SRC))
TESTS    := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(TEST_SRC))
# host-side helpers of the e2e harness (tests/e2e/*.c), linked like the unit tests
E2E_HOST := $(patsubst tests/e2e/%.c,$(BUILD)/tests/e2e/%,$(wildcard tests/e2e/*.c))
# The QEMU TCG plugin behind the ept access source: a shared object QEMU loads (-plugin).
EPT_PLUGIN := $(BUILD)/lib/memtide/memtide-ept.so

.PHONY: all check check-kvm check-unit bench lint sanitize demo install install-agent install-lab uninstall \
	programs deb check-packaging clean deps fuzz fuzz-build soak
all: $(PROGRAMS) $(TESTS) $(E2E_HOST) $(EPT_PLUGIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

define archive
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^
endef

$(LIBVMM):   $(call obj,$(VMM_SRC));   $(archive)
$(LIBPROTO): $(call obj,$(PROTO_SRC)); $(archive)
$(LIBAGENT): $(call obj,$(AGENT_SRC)); $(archive)
$(LIBMTD):   $(call obj,$(MTD_SRC));   $(archive)
$(LIBSIM):   $(call obj,$(SIM_SRC));   $(archive)

LINK_ALL = $(ALL_LIBS) $(PKG_LIBS) -lm -lpthread

$(BIN)/memtided: $(call obj,host/memtided.c) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL)
$(BIN)/memtidectl: $(call obj,host/front/memtidectl.c) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL)
$(BIN)/memtide-sim: $(call obj,sim/memtide-sim.c) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL)
$(BIN)/memtide-trace: $(call obj,sim/memtide-trace.c) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL)
$(BIN)/%: $(BUILD)/obj/bench/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL)

# The guest agent runs in any Linux guest with no other files: link it statically (json-c
# ships libjson-c.a).  Under SAN=1 it is linked dynamically, as ASan cannot be static.
AGENT_STATIC := $(if $(filter 1,$(SAN)),,-static)
$(BIN)/memtide-agent: $(call obj,$(AGENT_MAIN)) $(LIBAGENT) $(LIBPROTO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(AGENT_STATIC) -o $@ $^ $(shell pkg-config --libs --static json-c inih) -lm

# No sanitizers in the plugin: it runs inside QEMU, which is not built with them.
$(EPT_PLUGIN): host/access/qemu_plugin/memtide_ept.c host/access/ept_table.h host/base/clock.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -O2 -g $(CPPFLAGS) -fPIC -shared -fvisibility=hidden -D_GNU_SOURCE \
		-Ihost $(if $(filter 1,$(SAN)),,$(LDFLAGS)) -o $@ $<

# Guest workloads: small static programs copied into the e2e guest's initramfs.
$(BUILD)/guest/bin/%: tests/e2e/workloads/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -O2 -static -D_GNU_SOURCE -o $@ $<

$(BUILD)/tests/e2e/%: $(BUILD)/obj/tests/e2e/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL)
$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_ALL) $(CMOCKA_LIBS) $(TEST_LIBS)
# The access sources' test serves stand-in kernel files over FUSE (tests/unit/kernel_fs.h).
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
$(BUILD)/obj/tests/unit/test_access_sources.o: ALL_CFLAGS += $(FUSE_CFLAGS)
$(BUILD)/tests/unit/test_access_sources: TEST_LIBS = $(shell pkg-config --libs fuse3 2>/dev/null)

# ---- fuzz targets (clang + libFuzzer) ----------------------------------------------------
# Each tests/fuzz/fuzz_NAME.c is one libFuzzer target (docs in its opening comment), with
# seeds in tests/fuzz/corpus/NAME/ and, when present, a dictionary tests/fuzz/NAME.dict.
# Targets link the component libraries rebuilt by clang with coverage instrumentation
# (-fsanitize=fuzzer-no-link) and ASan+UBSan into their own tree, $(FUZZ_OBJ): gcc's
# objects under $(BUILD)/obj carry no coverage and are never mixed in.  The linker takes
# from each library only what a target calls.
#   make fuzz-build                   build every target
#   make fuzz [FUZZ_SECONDS=N]        build, then run each for N seconds (default 3), as
#                                     `make check`'s fuzz suite does; longer N for campaigns
FUZZ_CC     ?= clang-14
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined
# (-Wno-unknown-warning-option: a GCC-only pragma such as -Wformat-truncation is not clang's)
FUZZ_CFLAGS := -std=gnu11 $(WARN) -Wno-unknown-warning-option -g -O1 -fno-omit-frame-pointer -D_GNU_SOURCE -MMD -MP \
	$(FUZZ_SAN) -fsanitize=fuzzer-no-link $(INCLUDES) $(PKG_CFLAGS)
FUZZ_OBJ    := $(BUILD)/fuzz-obj
FUZZ_SRC    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN    := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
fobj = $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(1))
FUZZ_LIBS   := $(FUZZ_OBJ)/lib/libmtd.a $(FUZZ_OBJ)/lib/libagent.a \
	$(FUZZ_OBJ)/lib/libproto.a $(FUZZ_OBJ)/lib/libvmm.a

$(FUZZ_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_OBJ)/lib/libvmm.a:   $(call fobj,$(VMM_SRC));   $(archive)
$(FUZZ_OBJ)/lib/libproto.a: $(call fobj,$(PROTO_SRC)); $(archive)
$(FUZZ_OBJ)/lib/libagent.a: $(call fobj,$(AGENT_SRC)); $(archive)
$(FUZZ_OBJ)/lib/libmtd.a:   $(call fobj,$(MTD_SRC));   $(archive)
$(BUILD)/fuzz/%: $(FUZZ_OBJ)/tests/fuzz/%.o $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIBS) $(PKG_LIBS) -lm -lpthread
.PRECIOUS: $(FUZZ_OBJ)/%.o
fuzz-build: $(FUZZ_BIN)
fuzz: fuzz-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run.sh fuzz

# ---- test, bench, lint --------------------------------------------------------------------
deps:
	@scripts/deps.sh

# `make check` runs every test (unit, integration, fuzz, end to end) and ends with one line
# "N passed, N failed".  TESTS_ONLY=unit (or integration, fuzz, e2e) narrows it.
check: deps
	@$(MAKE) --no-print-directory all fuzz-build
	@BUILD=$(BUILD) tests/run.sh $(TESTS_ONLY)

# `make check-kvm` runs the KVM host stand's self-test and the e2e scenarios that run in it
# with KVM guests (tests/kvm/scenarios.txt; docs/e2e.md, "The KVM host stand"); CI runs it
# after `make check`, which leaves the stand out to keep within its 30 minutes.
check-kvm: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tests/run.sh kvm

check-unit: all
	@BUILD=$(BUILD) tests/run.sh unit

# `make soak` runs the long scenarios (10 minutes or more each: e.g. scenario 12's 12-minute
# creep run) that `make check` runs in short; they write the same build/e2e/*.json files.
soak: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tests/run.sh soak

bench: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) scripts/bench.sh

sanitize:
	@$(MAKE) --no-print-directory BUILD=build/san SAN=1 all
	@BUILD=build/san tests/run.sh unit integration

demo: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) DEMO_JSON=$(DEMO_JSON) DEMO_AGENT=$(DEMO_AGENT) scripts/demo.sh

LINT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
# scripts/layers.py reads the includes, and the calls from the objects (hence the objects
# first): every arrow in host/ runs down its folders, no circle between files (host/README.md).
lint: $(call obj,$(MTD_SRC) $(MTD_MAIN) $(AGENT_SRC) $(AGENT_MAIN))
	scripts/layers.py --build $(BUILD)
	clang-format --dry-run --Werror $(LINT_FILES)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr --suppress=missingIncludeSystem -D__GNUC__ -D_GNU_SOURCE \
		$(INCLUDES) $(filter %.c,$(LINT_FILES))
	clang-tidy --quiet $(filter %.c,$(LINT_FILES)) -- -std=gnu11 -D_GNU_SOURCE \
		$(INCLUDES) $(PKG_CFLAGS) \
		$(shell pkg-config --cflags cmocka fuse3)

# install: what a host needs (memtided, memtidectl, QEMU's memtide-ept plugin, unit, hook,
# config, man pages, bash completion, docs), binaries stripped.  The guest agent and the lab tools are not put on a
# host's PATH: install-agent (into a guest image, DESTDIR=...) and install-lab for those.
# STRIP= installs unstripped (debian/rules does: dh_strip makes the -dbgsym packages).
HOST_PROGRAMS := $(BIN)/memtided $(BIN)/memtidectl
STRIP ?= -s
INSTALL_ENV = DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) BIN=$(abspath $(BIN)) STRIP=$(STRIP) \
	EPT_PLUGIN=$(abspath $(EPT_PLUGIN))
programs: $(HOST_PROGRAMS) $(EPT_PLUGIN) $(BIN)/memtide-agent $(BIN)/memtide-sim $(BIN)/memtide-trace
install: $(HOST_PROGRAMS) $(EPT_PLUGIN)
	$(INSTALL_ENV) sh contrib/install.sh install host
install-agent: $(BIN)/memtide-agent
	$(INSTALL_ENV) sh contrib/install.sh install agent
install-lab: $(BIN)/memtide-sim $(BIN)/memtide-trace
	$(INSTALL_ENV) sh contrib/install.sh install lab
uninstall:
	$(INSTALL_ENV) sh contrib/install.sh uninstall

# Debian packages (memtide, memtide-agent, memtide-lab) from this tree, into $(BUILD)/deb/.
# dpkg-buildpackage builds a copy of the tree (git ls-files, plus what is not yet committed),
# so the work tree's build/ is not touched.  Lintian runs on the result.
deb:
	@BUILD=$(BUILD) scripts/deb.sh

# What CI runs beside make check: the packages with their contents and lintian, the unit's
# sandbox, memtided under its packaged unit in a guest whose PID 1 is systemd, and the
# Prometheus rules and dashboard (promtool comes with Debian's prometheus
# package, ~100 MB, so it is installed for this target only: scripts/deps.sh packaging).
check-packaging:
	@scripts/deps.sh packaging
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) PACKAGING=1 tests/run.sh packaging

clean:
	rm -rf $(BUILD) build/san

-include $(shell find $(BUILD)/obj $(FUZZ_OBJ) -name '*.d' 2>/dev/null)
