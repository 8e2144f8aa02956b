# SPDX-License-Identifier: GPL-2.0
#
# Rust-for-Linux RDMA modules: rdma_server, rdma_client, nvmet_rdma_rs.
#
#   make              build the modules against KDIR (default: the pinned kernel,
#                     configured and built by scripts/build-kernel.sh on first use)
#   make KDIR=/path   build against any Rust-enabled 7.2 kernel build tree, with the
#                     compiler its .config names (scripts/kbuild.sh)
#   make modules_install   after make: installs the modules into INSTALL_MOD_PATH/lib/
#                     modules/<KDIR's release>/updates and runs depmod
#   make CLIPPY=1     build with clippy as the Rust compiler driver
#   make RRS_TEST_HOOKS=1  build with nvmet_rdma_rs's test hold points (test_hooks.rs; the suites do)
#   make demo         set up, build, boot the VM and show the modules at work
#   make check        the test suite (host checks, then VM tests); prints "N passed, N failed"
#   make check-kasan  builds the KASAN kernel (clang-19), the modules against it with
#                     make KDIR=, and runs the heaviest VM tests on it
#   make check-faults the fault-injection sweep (failslab, fail_page_alloc on the modules'
#                     allocations); prints "N passed, N failed"
#   make check-faults-kasan   the same sweep on the KASAN kernel (make check-kasan's)
#   make check-matrix the teardown test over rxe with use_srq=1 and over siw (make check
#                     runs it over rxe), 150 connects over siw under load, and the C
#                     controls of the lifecycle and teardown tests; prints "N passed, N failed"
#   make bench        C nvmet-rdma vs nvmet_rdma_rs, perftest and the demo's bench on a
#                     non-debug kernel, then instructions per I/O counted under -icount;
#                     ends with "transport cost Rust/C, worst row: X.XXX (±Y.YYY)"
#   make bench-counted   the counted figure and the memory per controller;  make bench-compare REV=HEAD~1: ours at
#                     REV against ours now, counted, in one VM
#   make bench-profile   perf profiles of both transports (4 KiB, depth 32), side by side
#   make setup        host packages and toolchain only;  make kernel: the pinned kernel only
#   make fuzz         fuzzes nvmet_rdma_rs/wire.rs for 10 minutes (FUZZ_SECONDS=...)
#   make hostile-random   the hostile host's seeded random cases in the VM
#                     (SEED=..., default the time; ITERATIONS=..., default 300)
#   make probes       builds the modules if they were not, then runs the compile-fail probes of
#                     tests/host/probes and the runner's self-test (make check runs them)
#   make fmt / fmt-check   rustfmt with the kernel's .rustfmt.toml
#   make clean

SHELL := /bin/bash
REPO := $(CURDIR)
SCRIPTS := $(REPO)/scripts
RUST_SOURCES = $(shell find $(REPO)/rdma $(REPO)/nvmet $(REPO)/rdma_server $(REPO)/rdma_client \
		 $(REPO)/nvmet_rdma_rs $(REPO)/tests/host/wire/src \
		 $(REPO)/tests/host/wire/fuzz/fuzz_targets $(REPO)/tests/host/probes -name '*.rs' ! -name '*_generated.rs')

# What scripts/kbuild.sh takes from make's variables (it picks the compilers itself).
KBUILD_ENV = KDIR="$(KDIR)" CLIPPY="$(CLIPPY)" INSTALL_MOD_PATH="$(INSTALL_MOD_PATH)" \
	     INSTALL_MOD_DIR="$(INSTALL_MOD_DIR)" RRS_TEST_HOOKS="$(RRS_TEST_HOOKS)"

.PHONY: all modules modules_install setup kernel demo check check-kasan check-faults check-faults-kasan check-matrix bench bench-profile bench-counted bench-compare fuzz hostile-random probes fmt fmt-check clean

all: modules

modules:
	@$(KBUILD_ENV) $(SCRIPTS)/kbuild.sh modules

modules_install:
	@$(KBUILD_ENV) $(SCRIPTS)/kbuild.sh modules_install

setup:
	$(SCRIPTS)/setup-host.sh

kernel: setup
	$(SCRIPTS)/build-kernel.sh

demo:
	$(SCRIPTS)/demo.sh

check:
	$(SCRIPTS)/check.sh

check-kasan:
	$(SCRIPTS)/check-kasan.sh

check-faults:
	$(SCRIPTS)/check-faults.sh

check-faults-kasan:
	$(SCRIPTS)/check-faults.sh --kasan

check-matrix:
	$(SCRIPTS)/check-matrix.sh

bench:
	$(SCRIPTS)/bench.sh

bench-profile:
	$(SCRIPTS)/bench.sh --profile

bench-counted:
	$(SCRIPTS)/bench.sh --counted

bench-compare:
	$(SCRIPTS)/bench.sh --compare $(or $(REV),HEAD~1)

FUZZ_SECONDS ?= 600
fuzz: setup
	$(SCRIPTS)/fuzz-wire.sh $(FUZZ_SECONDS)

hostile-random:
	$(SCRIPTS)/hostile-random.sh "$(SEED)" "$(ITERATIONS)"

# (the probes compile the sources as they are, with the flags of the last module build)
probes:
	@[ -f nvmet_rdma_rs/.nvmet_rdma.o.cmd ] || $(KBUILD_ENV) $(SCRIPTS)/kbuild.sh modules
	@source $(SCRIPTS)/lib.sh; python3 tests/host/probes/run.py --tree "$(REPO)" && \
	python3 tests/host/probes/run.py --self-test --tree "$(REPO)"

fmt:
	@source $(SCRIPTS)/lib.sh; src=$$($(SCRIPTS)/fetch-kernel.sh); \
	rustfmt --edition 2021 --config-path "$$src/.rustfmt.toml" $(RUST_SOURCES)

fmt-check:
	@source $(SCRIPTS)/lib.sh; src=$$($(SCRIPTS)/fetch-kernel.sh); \
	rustfmt --check --edition 2021 --config-path "$$src/.rustfmt.toml" $(RUST_SOURCES)

clean:
	@for d in rdma_server rdma_client nvmet_rdma_rs; do \
		rm -f $$d/*.o $$d/*.ko $$d/*.mod $$d/*.mod.c $$d/.*.cmd $$d/*.d $$d/*_generated.rs \
		      $$d/modules.order $$d/*.rmeta; \
	done; \
	rm -f Module.symvers modules.order .*.cmd
