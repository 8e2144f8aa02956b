# SPDX-License-Identifier: GPL-2.0
#
# Kbuild fragment that compiles the shared Rust RDMA layer (rdma/) into a module.
# A module's Kbuild sets, before including this file:
#   rdma-module      the module name (the composite object, e.g. rdma_server)
#   rdma-rust-objs   the module's Rust objects (their crates `#[path]`-include rdma/mod.rs)
#   rdma-header      optional: a bindgen header of its own that includes rdma/bindings_helper.h
# and gets:
#   $(obj)/rdma_bindings_generated.rs   bindgen output for the header, found by the layer
#                                       through the RDMA_RS_BINDINGS environment variable
#   $(obj)/rdma_helpers.o               rdma/helpers.c, the wrappers of `static inline` C
#                                       functions, linked into the module

rdma-dir := $(abspath $(src)/../rdma)
rdma-header ?= $(rdma-dir)/bindings_helper.h

$(rdma-module)-y += $(rdma-rust-objs) rdma_helpers.o
targets += rdma_bindings_generated.rs rdma_helpers.o

export RDMA_RS_BINDINGS := $(abspath $(obj))/rdma_bindings_generated.rs

# bindgen understands clang flags only: drop the gcc-only ones, as rust/Makefile does.
rdma-bindgen-skip-c-flags := -mno-fp-ret-in-387 -mpreferred-stack-boundary=% \
	-mskip-rax-setup -mgeneral-regs-only -msign-return-address=% \
	-mindirect-branch=thunk-extern -mindirect-branch-register \
	-mfunction-return=thunk-extern -mrecord-mcount -mabi=lp64 \
	-mindirect-branch-cs-prefix -mstack-protector-guard% -mtraceback=no \
	-mno-pointers-to-nested-functions -mno-string \
	-mno-strict-align -mstrict-align -mdirect-extern-access \
	-mexplicit-relocs -mno-check-zero-division \
	-fconserve-stack -falign-jumps=% -falign-loops=% \
	-femit-struct-debug-baseonly -fno-ipa-cp-clone -fno-ipa-sra \
	-fno-partial-inlining -fplugin-arg-arm_ssp_per_task_plugin-% \
	-fno-reorder-blocks -fno-allow-store-data-races -fasan-shadow-offset=% \
	-fzero-call-used-regs=% -fno-stack-clash-protection \
	-fno-inline-functions-called-once -fsanitize=bounds-strict \
	-fstrict-flex-arrays=% -fmin-function-alignment=% \
	-fzero-init-padding-bits=% -mno-fdpic \
	-fdiagnostics-show-context -fdiagnostics-show-context=% \
	--param=% --param asan-% -fno-isolate-erroneous-paths-dereference

rdma-bindgen-c-flags = $(filter-out $(rdma-bindgen-skip-c-flags),$(c_flags)) \
	-w --target=x86_64-linux-gnu -fno-builtin -D__BINDGEN__ -DMODULE \
	-I$(srctree)/drivers/nvme/target -I$(rdma-dir)

quiet_cmd_rdma_bindgen = BINDGEN $@
      cmd_rdma_bindgen = \
	$(BINDGEN) $< $(shell grep -Ev '^\#|^$$' $(rdma-dir)/bindgen_parameters) \
		--rust-target 1.85 --use-core --with-derive-default --ctypes-prefix ffi \
		--no-layout-tests --no-debug '.*' --enable-function-attribute-detection \
		-o $@ -- $(rdma-bindgen-c-flags)

$(obj)/rdma_bindings_generated.rs: $(rdma-header) $(rdma-dir)/bindgen_parameters FORCE
	$(call if_changed_dep,rdma_bindgen)

$(addprefix $(obj)/,$(rdma-rust-objs)): $(obj)/rdma_bindings_generated.rs

$(obj)/rdma_helpers.o: $(rdma-dir)/helpers.c FORCE
	$(call if_changed_rule,cc_o_c)
