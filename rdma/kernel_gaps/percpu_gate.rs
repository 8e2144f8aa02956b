// SPDX-License-Identifier: GPL-2.0

//! [`PercpuGate`]: a gate that the data path passes without a locked instruction (a
//! `percpu_ref`), and that its owner closes, waiting for those inside.
//!
//! A counter of users shared by every CPU costs two locked read-modify-writes per pass
//! (tens of cycles each on real hardware, and a cache line bounced between the CPUs that
//! post); a `percpu_ref` counts on the passing CPU, and pays once, at the close, with an
//! RCU grace period. The nvmet core guards its submission queues the same way.

use super::bindings;
use core::sync::atomic::{AtomicBool, Ordering::AcqRel};
use kernel::{prelude::*, sync::Completion, types::Opaque};

/// Users pass while the gate is open ([`PercpuGate::enter`]); [`PercpuGate::close`] lets
/// nobody in any more and waits until everyone inside left.
///
/// # Invariants
///
/// `raw` is a `percpu_ref` initialised with [`PercpuGate::released`] as its release, whose
/// initial reference is dropped exactly once, by the first [`PercpuGate::close`] (`closed`
/// says it was); `released` is completed once every reference was put after that. Pinned:
/// the ref's data points back to it.
#[pin_data(PinnedDrop)]
pub(crate) struct PercpuGate {
    #[pin]
    raw: Opaque<bindings::percpu_ref>,
    #[pin]
    released: Completion,
    closed: AtomicBool,
}

// SAFETY: a `percpu_ref` may be got and put on any CPU and killed from any task; the rest
// is atomic or a completion.
unsafe impl Send for PercpuGate {}
// SAFETY: as above.
unsafe impl Sync for PercpuGate {}

/// A user inside a [`PercpuGate`]: the gate's close waits until it is dropped.
///
/// # Invariants
///
/// Holds one reference on `gate`'s `percpu_ref`, put when dropped.
pub(crate) struct Pass<'a> {
    gate: &'a PercpuGate,
}

impl PercpuGate {
    /// An open gate (allocates the per-CPU counters: may fail).
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            raw <- Opaque::try_ffi_init(|raw: *mut bindings::percpu_ref| {
                // SAFETY: `raw` is valid for writing, and pinned: the gate is being
                // initialised in place; `released` only runs on a ref so initialised.
                kernel::error::to_result(unsafe {
                    bindings::percpu_ref_init(
                        raw,
                        Some(Self::released),
                        0,
                        kernel::bindings::GFP_KERNEL,
                    )
                })
            }),
            released <- Completion::new(),
            closed: AtomicBool::new(false),
        })
    }

    /// Enters the gate if it is open: the pass keeps [`PercpuGate::close`] waiting until it
    /// is dropped. `None` once the gate is closing or closed. Any context.
    #[inline]
    pub(crate) fn enter(&self) -> Option<Pass<'_>> {
        // SAFETY: `raw` is initialised (type invariant).
        let live = unsafe { bindings::rdma_rs_percpu_ref_tryget_live(self.raw.get()) };
        // INVARIANT: `tryget_live` took a reference.
        live.then_some(Pass { gate: self })
    }

    /// Closes the gate and waits until every pass taken before its return was dropped:
    /// from its return on, [`PercpuGate::enter`] fails (a user that enters while it runs
    /// may still get a pass, which it waits for too). A second call waits as the first
    /// does. Process context (it sleeps, for at least an RCU grace period). A pass that is
    /// leaked (`mem::forget`) keeps it waiting forever, as a leaked lock guard would.
    pub(crate) fn close(&self) {
        if !self.closed.swap(true, AcqRel) {
            // INVARIANT: the initial reference is dropped, once: the first close.
            // SAFETY: `raw` is initialised and its initial reference not dropped yet.
            unsafe { bindings::percpu_ref_kill_and_confirm(self.raw.get(), None) };
        }
        self.released.wait_for_completion();
    }

    /// The ref's release: every reference was put after the close.
    ///
    /// # Safety
    ///
    /// `raw` is the `raw` of a live [`PercpuGate`] (the `percpu_ref` calls its release only
    /// on the ref it was initialised for).
    unsafe extern "C" fn released(raw: *mut bindings::percpu_ref) {
        // SAFETY: `raw` is the `raw` field of a live gate (the function's safety section),
        // whose offset in it is fixed (`repr` of a pinned struct does not change).
        let gate = unsafe {
            &*raw
                .byte_sub(core::mem::offset_of!(Self, raw))
                .cast::<Self>()
        };
        gate.released.complete_all();
    }
}

#[pinned_drop]
impl PinnedDrop for PercpuGate {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `raw` is initialised; no pass exists (passes borrow the gate) and a close
        // returned only after the release ran, which ends the ref's use of its data; a gate
        // never closed had no switch under way. `percpu_ref_exit` may end a ref in either
        // state.
        unsafe { bindings::percpu_ref_exit(self.raw.get()) };
    }
}

impl Drop for Pass<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the pass holds a reference on the gate's ref (type invariant).
        unsafe { bindings::rdma_rs_percpu_ref_put(self.gate.raw.get()) };
    }
}
