// SPDX-License-Identifier: GPL-2.0
/*
 * Defines the tracepoints of rdma_rs_events.h, and the functions Rust calls to fire
 * them (rust_do_trace_*; the static keys are tested in Rust: nvmet/trace.rs).
 * Compiled into nvmet_rdma_rs only.
 */
#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include "rdma_rs_events.h"
