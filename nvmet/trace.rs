// SPDX-License-Identifier: GPL-2.0

//! The transport's tracepoints (`rdma_rs_events.h`, defined by `rdma_rs_events.c`,
//! linked into the module), fired from safe Rust.
//!
//! Each event's static key is tested where it fires, as `kernel::declare_trace!` does:
//! with `CONFIG_JUMP_LABEL` a disabled event is a NOP the kernel patches into a jump
//! when someone enables it (tracefs `events/nvmet_rdma_rs/`, `trace-cmd`, `perf`,
//! bpftrace). `declare_trace!` itself names the kernel crate's bindings, which the
//! events of a module built outside the tree are not in: [`events!`] is the same with
//! this module's.

use crate::rdma::bindings;
use kernel::prelude::*;

/// Declares, for each event `nvmet_rdma_rs_<name>`, `fn <name>_on()`, whether it is
/// enabled (its static key), and `unsafe fn <name>(..)`, which fires it. Callers of the
/// latter promise that pointer arguments are valid for the call. The arguments of an
/// event are computed after its key's test (see [`req`]): the test is an `asm goto`
/// that the compiler cannot move loads across.
macro_rules! events {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        kernel::macros::paste! {
            /// Whether the event is enabled.
            #[inline(always)]
            fn [<$name _on>]() -> bool {
                #[cfg(all(CONFIG_TRACEPOINTS, CONFIG_JUMP_LABEL))]
                // SAFETY: the key is the `key` of a `struct tracepoint` of this module
                // (`rdma_rs_events.o`): the jump table entry names a real static key.
                return unsafe {
                    kernel::jump_label::arch_static_branch!(
                        bindings::[<__tracepoint_nvmet_rdma_rs_ $name>],
                        bindings::tracepoint,
                        key,
                        false
                    )
                };
                #[cfg(all(CONFIG_TRACEPOINTS, not(CONFIG_JUMP_LABEL)))]
                // SAFETY: as above: the key of one of this module's tracepoints, which
                // lives as long as the module.
                return unsafe {
                    kernel::bindings::static_key_count(
                        core::ptr::addr_of!(bindings::[<__tracepoint_nvmet_rdma_rs_ $name>].key)
                            .cast_mut()
                            .cast(),
                    )
                } > 0;
                #[cfg(not(CONFIG_TRACEPOINTS))]
                return false;
            }

            /// Fires the event.
            ///
            /// # Safety
            ///
            /// Pointer arguments point to nul-terminated strings valid for the call.
            #[inline(always)]
            #[allow(unused_variables)]
            unsafe fn $name($($arg: $ty),*) {
                #[cfg(CONFIG_TRACEPOINTS)]
                // SAFETY: the function fires this module's event; the caller promises the
                // pointer arguments are valid for the call.
                unsafe {
                    bindings::[<rust_do_trace_nvmet_rdma_rs_ $name>]($($arg),*)
                }
            }
        }
    )*};
}

events! {
    fn req_recv(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn req_read(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn req_submit(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn req_complete(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn req_written(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn req_sent(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn req_free(queue: u32, qid: u16, cid: u16, slot: u32, opcode: u8, status: u16);
    fn connect_request(port: u16, qid: u16, recv_depth: u32, send_depth: u32);
    fn reject(port: u16, reason: u8);
    fn queue_accept(queue: u32, port: u16, qid: u16, count: u64, why: *const kernel::ffi::c_char);
    fn queue_established(queue: u32, port: u16, qid: u16, count: u64, why: *const kernel::ffi::c_char);
    fn queue_close(queue: u32, port: u16, qid: u16, count: u64, why: *const kernel::ffi::c_char);
    fn queue_release(queue: u32, port: u16, qid: u16, count: u64, why: *const kernel::ffi::c_char);
    fn device_removal(device: *const kernel::ffi::c_char, queues: u32);
}

/// A step of a command through the transport: one event each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReqStep {
    /// Its capsule arrived; the core takes it.
    Recv,
    /// The RDMA READ of its data completed.
    Read,
    /// The core executes it.
    Submit,
    /// The core completed it.
    Complete,
    /// Its data is in the host's memory.
    Written,
    /// Its response's SEND completed.
    Sent,
    /// Its response slot is free.
    Free,
}

/// Who a command is, for its events.
#[derive(Clone, Copy, Default)]
pub(crate) struct ReqId {
    /// The queue's number (as in debugfs and the log).
    pub(crate) queue: u32,
    /// The NVMe queue id.
    pub(crate) qid: u16,
    /// The command id.
    pub(crate) cid: u16,
    /// The response slot.
    pub(crate) slot: u32,
    /// The opcode.
    pub(crate) opcode: u8,
}

/// Fires the event of a command's `step`, if it is enabled, with what `what` gives: who
/// the command is, and its status (0 before the core completed it). `what` runs only
/// when the event is enabled: a disabled event costs its static key's NOP.
#[inline(always)]
pub(crate) fn req(step: ReqStep, what: impl FnOnce() -> (ReqId, u16)) {
    macro_rules! fire {
        ($event:ident) => {
            kernel::macros::paste! {
                if [<$event _on>]() {
                    let (id, status) = what();
                    // SAFETY: the event takes plain values.
                    unsafe { $event(id.queue, id.qid, id.cid, id.slot, id.opcode, status) }
                }
            }
        };
    }
    match step {
        ReqStep::Recv => fire!(req_recv),
        ReqStep::Read => fire!(req_read),
        ReqStep::Submit => fire!(req_submit),
        ReqStep::Complete => fire!(req_complete),
        ReqStep::Written => fire!(req_written),
        ReqStep::Sent => fire!(req_sent),
        ReqStep::Free => fire!(req_free),
    }
}

/// Fires `nvmet_rdma_rs_connect_request`: a connect request for queue `qid` of the given
/// depths arrived on `port`, with valid private data.
#[inline(always)]
pub(crate) fn connect_request_event(port: u16, qid: u16, recv_depth: u32, send_depth: u32) {
    if connect_request_on() {
        // SAFETY: the event takes plain values.
        unsafe { connect_request(port, qid, recv_depth, send_depth) }
    }
}

/// Fires `nvmet_rdma_rs_reject`: a connect request on `port` was rejected with the
/// NVMe/RDMA CM status `reason`.
#[inline(always)]
pub(crate) fn reject_event(port: u16, reason: u8) {
    if reject_on() {
        // SAFETY: the event takes plain values.
        unsafe { reject(port, reason) }
    }
}

/// A queue's event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueStep {
    /// Accepted (`count`: its response slots).
    Accept,
    /// The connection is established.
    Established,
    /// Its teardown starts (`why`: the cause).
    Close,
    /// Released (`count`: the commands it served).
    Release,
}

/// Fires the event of queue `queue` (on `port`, NVMe queue `qid`).
#[inline(always)]
pub(crate) fn queue(step: QueueStep, queue: u32, port: u16, qid: u16, count: u64, why: &CStr) {
    let why = why.as_char_ptr();
    // SAFETY: `why` is a nul-terminated string borrowed for the call.
    unsafe {
        match step {
            QueueStep::Accept if queue_accept_on() => queue_accept(queue, port, qid, count, why),
            QueueStep::Established if queue_established_on() => {
                queue_established(queue, port, qid, count, why)
            }
            QueueStep::Close if queue_close_on() => queue_close(queue, port, qid, count, why),
            QueueStep::Release if queue_release_on() => queue_release(queue, port, qid, count, why),
            _ => {}
        }
    }
}

/// Fires `nvmet_rdma_rs_device_removal`: `device` went away, ending `queues` queues.
#[inline(always)]
pub(crate) fn device_removal_event(device: &CStr, queues: u32) {
    if device_removal_on() {
        // SAFETY: `device` is a nul-terminated string borrowed for the call.
        unsafe { device_removal(device.as_char_ptr(), queues) }
    }
}
