// SPDX-License-Identifier: GPL-2.0

//! The submission and completion queue pair (`struct nvmet_sq`, `struct nvmet_cq`) that
//! every transport queue embeds, and the step from the `nvmet_sq` the core passes back to
//! the queue that embeds it.

use super::{bindings, CtrlId, PortHold};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        ArcBorrow, Mutex,
    },
    types::Opaque,
};

/// The nvmet submission and completion queue a transport queue embeds.
///
/// # Invariants
///
/// `cq` was initialised by `nvmet_cq_init` and its initial reference is held while
/// `cq_live` is true; `sq` was initialised by `nvmet_sq_init` (with `cq`) and is not yet
/// destroyed while `sq_live` is true. Both stay pinned. `port` is held until the sq is
/// destroyed: it outlives every request started on the sq, which name it.
#[pin_data(PinnedDrop)]
pub(crate) struct SqCq {
    #[pin]
    sq: Opaque<bindings::nvmet_sq>,
    #[pin]
    cq: Opaque<bindings::nvmet_cq>,
    /// Whether `nvmet_sq_destroy` is still owed.
    sq_live: Atomic<bool>,
    /// Whether `nvmet_cq_put` is still owed.
    cq_live: Atomic<bool>,
    /// The port the queue came in through, which its requests name.
    port: PortHold,
    /// Held through `destroy`: a second caller waits until the first is done.
    #[pin]
    destroying: Mutex<()>,
}

// SAFETY: the nvmet core synchronises its use of the queues internally (percpu refs,
// atomics); this type only passes pointers to them to the core.
unsafe impl Send for SqCq {}
// SAFETY: as above.
unsafe impl Sync for SqCq {}

impl SqCq {
    /// Initialises the pair (`nvmet_cq_init`, `nvmet_sq_init`) of a queue that came in
    /// through the port `port` holds; the pair keeps the hold until it is destroyed.
    pub(crate) fn new(port: PortHold) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            port,
            destroying <- new_mutex!(()),
            sq: Opaque::zeroed(),
            cq <- Opaque::ffi_init(|cq: *mut bindings::nvmet_cq| {
                // SAFETY: `cq` is pinned memory of this value, uninitialised: zero it (the
                // core expects no controller, no queue id) before `nvmet_cq_init`.
                unsafe {
                    cq.write_bytes(0, 1);
                    bindings::nvmet_cq_init(cq)
                }
            }),
            // INVARIANT: `nvmet_cq_init` took the initial reference.
            cq_live: Atomic::new(true),
            // INVARIANT: true only if `nvmet_sq_init` succeeded.
            sq_live: Atomic::new({
                // SAFETY: `this` points to the value being initialised: `sq` is zeroed and
                // `cq` initialised above; both are pinned.
                let ret = unsafe {
                    let this = this.as_ptr();
                    bindings::nvmet_sq_init(Opaque::cast_into(&raw const (*this).sq),
                        Opaque::cast_into(&raw const (*this).cq))
                };
                ret == 0
            }),
        })
        .pin_chain(|this| {
            if this.sq_live.load(Relaxed) {
                Ok(())
            } else {
                Err(ENOMEM)
            }
        })
    }

    /// Holds the sq of `queue` (which lives in an `Arc`) until the guard drops:
    /// `nvmet_sq_destroy` waits for that reference before it clears `sq->ctrl` and puts
    /// the controller. `None` once the sq was killed.
    ///
    /// Requests start only with such a guard ([`super::Request::init`]), and hold the
    /// queue's `Arc` until they end. The queue's owner calls [`SqCq::destroy`], which
    /// waits for those requests, while it still holds an `Arc` of its own (the queue's
    /// release does), not only in `Drop`: so a request's end never drops the queue.
    pub(crate) fn enter<'a, Q: HasSqCq>(queue: &'a ArcBorrow<'_, Q>) -> Option<SqEntered<'a>> {
        let this = queue.sq_cq();
        // SAFETY: the sq was initialised (type invariant); a killed or exited reference has
        // `__PERCPU_REF_DEAD` set, so the try then fails without using its counters.
        let live =
            unsafe { bindings::rdma_rs_percpu_ref_tryget_live(&raw mut (*this.sq.get()).ref_) };
        // INVARIANT: a guard exists only for a reference taken here. (Built only then:
        // `then_some` would build it, and drop it, which puts a reference, even when the
        // try failed.)
        live.then(|| SqEntered(this))
    }

    /// The submission queue, for the core's calls.
    pub(super) fn sq(&self) -> *mut bindings::nvmet_sq {
        self.sq.get()
    }

    /// The controller the queue belongs to, once the host's Connect installed it.
    pub(crate) fn ctrl(&self) -> Option<CtrlId> {
        // SAFETY: the sq is initialised (type invariant); `ctrl` is set once by the core's
        // Connect handler.
        let ctrl = unsafe { (*self.sq.get()).ctrl };
        (!ctrl.is_null()).then(|| CtrlId::from_raw(ctrl))
    }

    /// Ends the controller after a fatal transport error, if the queue has one; returns
    /// whether it did.
    pub(crate) fn fatal_error(&self) -> bool {
        // SAFETY: as for `ctrl`; the core keeps the controller while its queues exist.
        unsafe {
            let ctrl = (*self.sq.get()).ctrl;
            if ctrl.is_null() {
                return false;
            }
            bindings::nvmet_ctrl_fatal_error(ctrl);
        }
        true
    }

    /// Waits until every request of the queue completed and releases the queue from its
    /// controller (`nvmet_sq_destroy`, then `nvmet_cq_put`, which may drop the controller's
    /// last reference: so this runs in the release work, never where the last `Arc` of the
    /// queue happens to go). Sleeps: process context only. Once it returned, the core has
    /// given every request of the queue back (their slots are the transport's again), and
    /// the pair gave up its hold on the port.
    pub(crate) fn destroy(&self) {
        // (Serialised: a second caller must not put the cq, or give the port up, while the
        // first still waits in `nvmet_sq_destroy`.)
        let _destroying = self.destroying.lock();
        // INVARIANT: each flag goes false as its release is done, once.
        if self.sq_live.xchg(false, Full) {
            // SAFETY: the sq was initialised and is destroyed once (type invariant).
            unsafe { bindings::nvmet_sq_destroy(self.sq.get()) };
        }
        if self.cq_live.xchg(false, Full) {
            // SAFETY: initialised by `nvmet_cq_init`; its reference is put once (type
            // invariant), after the sq, its other user, is destroyed.
            unsafe { bindings::nvmet_cq_put(self.cq.get()) };
        }
        // INVARIANT: the sq is destroyed: no request started on it names the port any
        // more. (The controller keeps `ctrl->port` too, and `nvmet_sq_destroy` put this
        // queue's reference on it; its other queues' sqs hold it further, and the core
        // frees it at the last put. A controller whose queues came in through several
        // ports is the core's to keep apart: see Documentation/nvmet-binding.md.)
        self.port.release();
    }
}

/// A reference on a live sq, from [`SqCq::enter`].
///
/// # Invariants
///
/// The guard holds one reference on the sq's `ref`, taken by [`SqCq::enter`]; dropping it
/// puts that reference.
pub(crate) struct SqEntered<'a>(&'a SqCq);

impl SqEntered<'_> {
    /// The submission queue, for `nvmet_req_init`.
    pub(super) fn sq(&self) -> *mut bindings::nvmet_sq {
        self.0.sq()
    }

    /// The port the queue came in through: held while the sq is entered, and then by the
    /// sq until every request started on it ended.
    pub(super) fn port(&self) -> *mut bindings::nvmet_port {
        self.0.port.as_raw()
    }

    /// Whether this holds the sq of `sq_cq`.
    pub(super) fn is_of(&self, sq_cq: &SqCq) -> bool {
        core::ptr::eq(self.0, sq_cq)
    }
}

impl Drop for SqEntered<'_> {
    fn drop(&mut self) {
        // SAFETY: `enter` took this reference; the sq's reference is not exited while
        // one is held (`nvmet_sq_destroy` waits for them all first).
        unsafe { bindings::rdma_rs_percpu_ref_put(&raw mut (*self.0.sq.get()).ref_) };
    }
}

#[pinned_drop]
impl PinnedDrop for SqCq {
    fn drop(self: Pin<&mut Self>) {
        self.destroy();
    }
}

/// A transport queue that embeds an [`SqCq`]; implemented with [`impl_has_sq_cq!`].
///
/// (A safe trait: the [`SqCq`] it returns is borrowed from the queue, so it lives as long
/// as the queue, which a started request holds.)
pub(crate) trait HasSqCq {
    /// The embedded [`SqCq`].
    fn sq_cq(&self) -> &SqCq;
}

/// Declares that a transport queue embeds an [`SqCq`] in the named field.
///
/// ```ignore
/// impl_has_sq_cq!(Queue, nvmet);
/// ```
macro_rules! impl_has_sq_cq {
    ($queue:ty, $field:ident) => {
        impl $crate::nvmet::HasSqCq for $queue {
            fn sq_cq(&self) -> &$crate::nvmet::SqCq {
                &self.$field
            }
        }
    };
}
pub(crate) use impl_has_sq_cq;
