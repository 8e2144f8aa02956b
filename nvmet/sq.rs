// SPDX-License-Identifier: GPL-2.0

//! The submission and completion queue pair (`struct nvmet_sq`, `struct nvmet_cq`) that
//! every transport queue embeds, and the step from the `nvmet_sq` the core passes back to
//! the queue that embeds it.

use super::{bindings, CtrlId, PortHold};
// The kept queue's address is a `core` atomic, as the slot's state is (see `rdma/kernel_gaps/slot.rs`):
// every command's start reads it.
use core::{
    any::TypeId,
    ptr,
    sync::atomic::{
        AtomicPtr,
        Ordering::{Acquire, Release},
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc, ArcBorrow, Mutex,
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
///
/// `kept_at` is null, or points to the `Arc` in the box `kept` holds: an `Arc<Q>` of the
/// queue that embeds this pair, `Q` being the type `queue_type` names, at the address
/// `kept_queue` holds (null with `kept_at`). Once set, it stays
/// until `destroy` takes the box, after `nvmet_sq_destroy` returned: so every request
/// started on the sq finds its queue alive until it ended. Nothing is kept once the sq
/// was destroyed. While a queue is kept, the queue and the pair hold each other: the
/// owner breaks that with `destroy` (the pair's own `Drop` cannot run before).
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
    /// The type of the queue that embeds the pair.
    queue_type: TypeId,
    /// The queue that embeds the pair, held (boxed: `kept_at` points into it) from its
    /// set-up until the pair is destroyed; see [`SqCq::keep`].
    #[pin]
    kept: Mutex<Option<KBox<dyn Send + Sync>>>,
    /// Where `kept`'s `Arc` is once set: null until then (see the invariants).
    kept_at: AtomicPtr<()>,
    /// The address of the queue `kept_at`'s `Arc` points to, set and cleared with it.
    kept_queue: AtomicPtr<()>,
}

/// The queue a pair kept, given back by [`SqCq::destroy`] to be dropped once the pair is
/// no longer borrowed (it may be the queue's last reference).
#[must_use = "drop it where the queue is not borrowed"]
pub(crate) struct KeptQueue {
    _queue: Option<KBox<dyn Send + Sync>>,
}

impl KeptQueue {
    /// Whether the pair kept no queue (no request was started on it).
    #[cfg(CONFIG_KUNIT)]
    pub(super) fn is_empty(&self) -> bool {
        self._queue.is_none()
    }
}

// SAFETY: the nvmet core synchronises its use of the queues internally (percpu refs,
// atomics); this type only passes pointers to them to the core. What it keeps is
// `Send + Sync`, behind a mutex, and its address an atomic.
unsafe impl Send for SqCq {}
// SAFETY: as above.
unsafe impl Sync for SqCq {}

impl SqCq {
    /// Initialises the pair (`nvmet_cq_init`, `nvmet_sq_init`) of a queue of type `Q` that
    /// came in through the port `port` holds; the pair keeps the hold until it is
    /// destroyed.
    pub(crate) fn new<Q: HasSqCq + Send + Sync + 'static>(
        port: PortHold,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            port,
            destroying <- new_mutex!(()),
            queue_type: TypeId::of::<Q>(),
            kept <- new_mutex!(None),
            kept_at: AtomicPtr::new(ptr::null_mut()),
            kept_queue: AtomicPtr::new(ptr::null_mut()),
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
    /// Requests start only with such a guard ([`super::Request::init`]), on a queue the
    /// pair keeps ([`SqCq::keep`]) until [`SqCq::destroy`] waited for the requests.
    pub(crate) fn enter<'a, Q: HasSqCq>(queue: &'a ArcBorrow<'_, Q>) -> Option<SqEntered<'a>> {
        queue.sq_cq().try_get()
    }

    /// A reference on the live sq (see [`SqCq::enter`]); `None` once it was killed.
    fn try_get(&self) -> Option<SqEntered<'_>> {
        // SAFETY: the sq was initialised (type invariant); a killed or exited reference has
        // `__PERCPU_REF_DEAD` set, so the try then fails without using its counters.
        let live =
            unsafe { bindings::rdma_rs_percpu_ref_tryget_live(&raw mut (*self.sq.get()).ref_) };
        // INVARIANT: a guard exists only for a reference taken here. (Built only then:
        // `then_some` would build it, and drop it, which puts a reference, even when the
        // try failed.)
        live.then(|| SqEntered(self))
    }

    /// Keeps `queue`, the queue (of type `Q`) that embeds the pair, until
    /// [`SqCq::destroy`] waited for every request started on the sq: the requests reach
    /// their queue through the `Arc` the pair keeps, and take no reference of their own.
    /// Call it once the queue is set up, before it starts a request
    /// ([`super::Request::init`] refuses one on a pair that keeps no queue). The queue and
    /// the pair then hold each other: its owner must call [`SqCq::destroy`] (a queue left
    /// kept is never freed, and holds its port's removal up).
    ///
    /// `Ok` if kept (by this call or an earlier one); `EINVAL` if `queue` is not the queue
    /// that embeds the pair, or not of the type it was made for; `ENODEV` once the pair
    /// was destroyed. Sleeps (an allocation): process context.
    pub(crate) fn keep<Q: HasSqCq + Send + Sync + 'static>(
        &self,
        queue: ArcBorrow<'_, Q>,
    ) -> Result {
        if self.queue_type != TypeId::of::<Q>() || !ptr::eq(self, queue.sq_cq()) {
            return Err(EINVAL);
        }
        let held: KBox<dyn Send + Sync> = KBox::new(Arc::<Q>::from(queue), GFP_KERNEL)?;
        let mut kept = self.kept.lock();
        // (`destroy` marks the sq dead before it takes what is kept, under this lock)
        if !self.sq_live.load(Relaxed) {
            return Err(ENODEV);
        }
        if kept.is_none() {
            let at = ptr::from_ref(&*held).cast::<()>().cast_mut();
            *kept = Some(held);
            // INVARIANT: points to the `Arc<Q>` (`Q` as `queue_type` says) of the queue
            // that embeds the pair, in the box `kept` holds now, until `destroy`; that
            // queue is at `kept_queue`.
            self.kept_queue
                .store(ptr::from_ref(&*queue).cast::<()>().cast_mut(), Release);
            self.kept_at.store(at, Release);
        }
        Ok(())
    }

    /// Where the pair keeps `queue` (see [`SqCq::keep`]): the address of its `Arc<Q>`,
    /// valid while `entered` holds the sq and then until `destroy` waited for every
    /// request. `None` if the pair keeps no queue, or another one.
    pub(super) fn kept<Q: HasSqCq + Send + Sync + 'static>(
        &self,
        queue: ArcBorrow<'_, Q>,
        entered: &SqEntered<'_>,
    ) -> Option<*const Arc<Q>> {
        let at = self.kept_at.load(Acquire);
        // (The queue that embeds the pair is the one kept: checked rather than assumed.
        // `kept_queue` was stored before `kept_at`, which the load above acquired.)
        (entered.is_of(self) && self.keeps(at, &*queue)).then_some(at.cast_const().cast())
    }

    /// Whether the pair keeps `queue` at `at`: whether a request that names `at` as its
    /// queue ([`super::Request::init`]) was started on this pair's sq, and `queue` is the
    /// queue it keeps (the same object, not only one whose [`HasSqCq`] leads here). False
    /// for null. (Only compared: the pointers are not followed.)
    pub(super) fn keeps<Q: HasSqCq + 'static>(&self, at: *mut (), queue: &Q) -> bool {
        !at.is_null()
            && self.queue_type == TypeId::of::<Q>()
            && self.kept_at.load(Acquire) == at
            && self.kept_queue.load(Acquire) == ptr::from_ref(queue).cast::<()>().cast_mut()
    }

    /// The submission queue, for the core's calls.
    pub(super) fn sq(&self) -> *mut bindings::nvmet_sq {
        self.sq.get()
    }

    /// The controller the queue belongs to, once the host's Connect installed it (an
    /// identity: it may be gone by the time it is compared).
    pub(crate) fn ctrl(&self) -> Option<CtrlId> {
        let ctrl = self.ctrl_ptr();
        (!ctrl.is_null()).then(|| CtrlId::from_raw(ctrl))
    }

    /// `sq->ctrl`, read once. The core writes it while the queue lives: the host's Connect
    /// sets it (`nvmet_install_queue`, with a `cmpxchg`), and `nvmet_sq_destroy` clears
    /// it; so it is read with a volatile (`READ_ONCE`-style) read, and only followed while
    /// the sq is held (see [`SqCq::fatal_error`]).
    fn ctrl_ptr(&self) -> *mut bindings::nvmet_ctrl {
        // SAFETY: the sq is initialised (type invariant), and the field is a pointer that
        // the core writes whole.
        unsafe { ptr::read_volatile(&raw const (*self.sq.get()).ctrl) }
    }

    /// Ends the controller after a fatal transport error, if the queue has one; returns
    /// whether it did. False too once the sq is being destroyed (the controller is then
    /// released from the queue, and the caller ends the queue itself).
    pub(crate) fn fatal_error(&self) -> bool {
        // Holds the sq through the call: `nvmet_sq_destroy` waits for every reference on
        // it before it puts the controller the sq references and clears `sq->ctrl`.
        let Some(_entered) = self.try_get() else {
            return false;
        };
        let ctrl = self.ctrl_ptr();
        if ctrl.is_null() {
            return false;
        }
        // SAFETY: `ctrl` has a reference for as long as the sq is held. The sq's own is
        // taken by the Connect that set `sq->ctrl` (`nvmet_install_queue`, right after its
        // `cmpxchg`; until then the Connect holds one of its own, which it puts only after
        // that call returned) and put only by `nvmet_sq_destroy`, once every reference on
        // the sq is gone (`_entered` is one). The only other write of `sq->ctrl`, the
        // clear on `nvmet_install_queue`'s error path, puts no reference. So the
        // controller is not freed during the call; its `fatal_err_work`, which the call
        // may queue, is cancelled by the controller's free before the memory goes.
        unsafe { bindings::nvmet_ctrl_fatal_error(ctrl) };
        true
    }

    /// Waits until every request of the queue completed and releases the queue from its
    /// controller (`nvmet_sq_destroy`, then `nvmet_cq_put`, which may drop the controller's
    /// last reference: so this runs in the release work, never where the last `Arc` of the
    /// queue happens to go). Sleeps: process context only. Once it returned, the core has
    /// given every request of the queue back (their slots are the transport's again), and
    /// the pair gave up its hold on the port and gives back the queue it kept.
    pub(crate) fn destroy(&self) -> KeptQueue {
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
        // INVARIANT: cleared before the box goes, once no request can use it.
        let mut kept = self.kept.lock();
        self.kept_at.store(ptr::null_mut(), Release);
        self.kept_queue.store(ptr::null_mut(), Release);
        KeptQueue {
            _queue: kept.take(),
        }
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
        // (Nothing is kept here: a kept queue holds the pair, which then never drops.)
        drop(self.destroy());
    }
}

/// A transport queue that embeds an [`SqCq`]; implemented with [`impl_has_sq_cq!`].
///
/// (A safe trait: the [`SqCq`] it returns is borrowed from the queue, so it lives as long
/// as the queue, which the sq keeps while requests are started on it.)
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
