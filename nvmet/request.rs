// SPDX-License-Identifier: GPL-2.0

//! Requests (`struct nvmet_req`): the typed [`Request`] a transport embeds for each command
//! in flight, the step from the request the core completes back to the transport's object
//! that embeds it ([`HasRequest`]), and the ownership of a request's data buffers
//! ([`DataSgls`]).
//!
//! A request passes between the transport and the core: the transport owns it from the
//! command's arrival until it hands it over ([`Request::execute`], [`Request::complete`])
//! and again once the core gave it back (`Transport::queue_response`), and uses it through
//! `&mut` while it does. The request itself remembers whether it is started and not handed
//! over yet, and where it was started, so that a hand-over happens once per start, from
//! the place the core maps back from.

use super::{
    abi::{COMMAND_SIZE, COMPLETION_SIZE},
    bindings,
    sq::SqEntered,
    HasSqCq, OpsRef, Transport,
};
use crate::rdma::{
    cqe::{placed_slot, HasSlot},
    kernel_gaps::slot::{Owner, Slot, CORE_TAG},
    sgl::PageSgl,
    DmaBuf,
};
// The request's queue pointer is a `core` atomic, as the slot's state is (see
// `rdma/kernel_gaps/slot.rs`): the kernel crate's go through out-of-line helpers on this kernel, on
// every command. `queue_response` swaps it out; `uninit` clears it.
use core::{
    ptr,
    sync::atomic::{
        AtomicPtr,
        Ordering::{Acquire, Relaxed, Release},
    },
};
use kernel::{
    prelude::*,
    sync::{Arc, ArcBorrow},
    types::Opaque,
};

mod data;

pub(crate) use data::DataSgls;

/// The nvmet core's request for one command: embedded in the transport's object for a
/// command in flight (named with [`impl_has_request!`]), which never moves while the
/// request is in use.
///
/// # Invariants
///
/// `started_at` is the request's own address exactly while `nvmet_req_init` accepted the
/// request at that address and it was not handed back to the core yet (executed,
/// completed or uninitialised): only then may it be handed over ([`Request::is_started`];
/// a request moved since it started is not started where it lands). Such a request is at
/// `HasRequest::OFFSET` from the transport's object that [`Request::init`] started it in,
/// inside the state of that object's slot. `queue` is null, or, from [`Request::init`]
/// until the request ended (its `queue_response` took it, or [`Request::uninit`]), the
/// address of the `Arc<T::Queue>` (of the transport `T` that started it) that the queue's
/// [`super::SqCq`] keeps ([`super::SqCq::keep`]) until its destroy waited for the request.
#[repr(C)]
pub(crate) struct Request {
    req: Opaque<bindings::nvmet_req>,
    /// Where the request was started (see the invariants); 0 if it is not.
    started_at: usize,
    /// The queue of the started request (see the invariants).
    queue: AtomicPtr<()>,
    /// The list the request's in-capsule data is described by ([`Request::use_in_capsule`]).
    in_capsule: PageSgl<IN_CAPSULE_PAGES>,
    /// The buffer the request's completion is written to ([`Request::set_response`]),
    /// held as long as the request points into it (with its device, which a PCI
    /// peer-to-peer client names).
    response: Option<DmaBuf>,
}

/// Pages of in-capsule data a request takes at most (16 KiB).
pub(crate) const IN_CAPSULE_PAGES: usize = 4;

impl Request {
    /// A request not started.
    pub(crate) fn new() -> Self {
        // INVARIANT: not started.
        Self {
            req: Opaque::zeroed(),
            started_at: 0,
            queue: AtomicPtr::new(ptr::null_mut()),
            in_capsule: PageSgl::new(),
            response: None,
        }
    }

    fn raw(&self) -> *mut bindings::nvmet_req {
        self.req.get()
    }

    /// Whether the request is started, where it is, and not handed over yet.
    pub(super) fn is_started(&self) -> bool {
        self.started_at == ptr::from_ref(self).addr()
    }

    /// Marks the request started where it is, as `init` does once the core accepted it
    /// (for the KUnit suites, which start none with the core).
    ///
    /// # Safety
    ///
    /// The request is not handed over to the core (nor uninitialised) as started.
    #[cfg(CONFIG_KUNIT)]
    pub(super) unsafe fn start_for_test(&mut self) {
        // INVARIANT: not handed over (the caller's promise): only `is_started` sees it.
        self.started_at = ptr::from_ref(self).addr();
    }

    /// The C request's fields, as its owner reads them.
    fn fields(&self) -> &bindings::nvmet_req {
        // SAFETY: a `Request` is reached only through its slot's `Owner` (or, never
        // started, through its own owner), and an owner exists only while the core does
        // not hold the request: from an accepted `init` to the hand-over (`execute`,
        // `complete`, `uninit`), and from the `queue_response` trampoline's resume on,
        // after which `__nvmet_req_complete` reads nothing of the request (7.2
        // `drivers/nvme/target/core.c`: it read `ns`, `pc_ref` and `sq` before). So the
        // core does not write the request while this borrow lives.
        unsafe { &*self.raw() }
    }

    /// The C request's fields, as its owner writes them.
    fn fields_mut(&mut self) -> &mut bindings::nvmet_req {
        // SAFETY: as in `fields`; `&mut self`: the owner's only reference.
        unsafe { &mut *self.raw() }
    }

    /// Points the request at where the core writes its completion: the 16 bytes at
    /// `offset` of `responses`, which the request holds from now on; and, with `p2p`, lets
    /// the core place data in a namespace's PCI peer-to-peer memory for the buffer's RDMA
    /// device, if that device can reach such memory. `EINVAL` past the end of the buffer,
    /// `EBUSY` while the request is started.
    pub(crate) fn set_response(&mut self, responses: &DmaBuf, offset: usize, p2p: bool) -> Result {
        if self.is_started() {
            return Err(EBUSY);
        }
        if offset.checked_add(COMPLETION_SIZE).ok_or(EINVAL)? > responses.len() {
            return Err(EINVAL);
        }
        let cqe = responses.cpu_ptr(offset)?;
        let p2p_client = if p2p {
            responses.device().p2p_dma_client()
        } else {
            None
        };
        // (The core reads these fields only once the request is started: both stay valid
        // while the request holds the buffer, whose mapping holds the device.)
        let fields = self.fields_mut();
        fields.cqe = cqe.cast();
        fields.p2p_client = p2p_client.unwrap_or(core::ptr::null_mut());
        self.response = Some(responses.clone());
        Ok(())
    }

    /// Starts the request of the slot `owner` holds, which `place` finds, with the buffer
    /// the command arrived in, in `queue` (of transport `T`), for the command at `offset`
    /// of that buffer; `sq` is the queue's entered sq (it is not being destroyed while the
    /// core parses the command). The request names the port the sq holds, which outlives
    /// it (the sq is destroyed only once its requests ended). While the core parses the
    /// command the slot is handed off to the core, whose `queue_response` resumes it
    /// (`Transport::queue_response` gets the owner). Until the request ended, the queue's
    /// sq keeps the queue (and so the slot and the buffers, which live in it):
    /// [`super::SqCq::keep`].
    ///
    /// `Ok(Some(owner))` once the core accepted the command; `Ok(None)` if it refused it:
    /// it completed the request already (its `queue_response` ran, from inside this call,
    /// and took the slot), and the request is not started. `Err(owner)` if `place` finds
    /// no object, or one whose slot or request is not `owner`'s ([`Request::placed`]), if
    /// `sq` is not the queue's, if the command is not inside the buffer, the request is
    /// started already or the sq does not keep the queue ([`super::SqCq::keep`]; nothing
    /// ran).
    pub(crate) fn init<'a, T: Transport>(
        owner: SlotOwner<'a, T>,
        queue: ArcBorrow<'_, T::Queue>,
        place: impl for<'x> FnOnce(&'x T::Queue) -> Option<(&'x T::Request, &'x DmaBuf)>,
        offset: usize,
        sq: &SqEntered<'_>,
        ops: OpsRef<T>,
    ) -> Started<'a, T> {
        let Some((object, capsules)) = place(&queue) else {
            return Err(owner);
        };
        if !sq.is_of(queue.sq_cq()) {
            pr_warn!("start of a request outside its queue; ignored\n");
            return Err(owner);
        }
        if offset
            .checked_add(COMMAND_SIZE)
            .is_none_or(|end| end > capsules.len())
        {
            return Err(owner);
        }
        let Ok(cmd) = capsules.cpu_ptr(offset) else {
            return Err(owner);
        };
        let Some(kept) = queue.sq_cq().kept(queue, sq) else {
            pr_warn!("start of a request on a queue its sq does not keep; ignored\n");
            return Err(owner);
        };
        let mut owner = owner;
        let Some(request) = Self::placed(object, &mut owner) else {
            pr_warn!("start of a request outside its object's slot; ignored\n");
            return Err(owner);
        };
        if request.is_started() || !request.queue.load(Acquire).is_null() {
            pr_warn!("start of a request that is started already; ignored\n");
            return Err(owner);
        }
        let fields = request.fields_mut();
        fields.cmd = cmd.cast();
        fields.port = sq.port();
        // INVARIANT: the queue's sq keeps its `Arc<T::Queue>` there until the request ended.
        request.queue.store(kept.cast_mut().cast(), Release);
        let req = request.raw();
        let slot = owner.slot();
        // SAFETY: the core's tag, which its `queue_response` (`Ops::queue_response`)
        // resumes the slot with, or the resume below once the core accepted the command.
        unsafe { owner.hand_off_to_event(CORE_TAG) };
        // SAFETY: the core has the request now (the slot is handed off until it answers).
        // The request, the command and the response (`set_response`) live in the queue or
        // in buffers the request holds, and the queue's sq keeps the queue until the
        // request ended; `sq` is the queue's, entered; `ops` is `T`'s table, whose
        // `queue_response` borrows the `Arc<T::Queue>` the sq keeps and finds the
        // `T::Request` at `OFFSET` before the request, `object` (`placed`), whose slot is
        // this one; the port is held by the sq (`SqCq`), which `sq` keeps from being
        // destroyed while the core parses the command, and the core's own reference for
        // the request (taken in `nvmet_req_init`) until the request completes.
        let accepted = unsafe { bindings::nvmet_req_init(req, sq.sq(), ops.as_raw()) };
        if !accepted {
            return Ok(None);
        }
        // An accepted command is not completed before it is executed: the slot comes back.
        // (An exchange, not a load and a store: `Slot::take_after`, which safe code may
        // call on any slot, briefly holds a handed-off slot while it checks it.)
        // SAFETY: the core's answer to the hand-off above: it accepted the command, and
        // holds nothing of the state until the request is executed or completed.
        let Some(mut owner) = (unsafe { slot.resume(CORE_TAG) }) else {
            pr_err!("a request the core accepted was given back meanwhile\n");
            return Ok(None);
        };
        let request = owner.request();
        if !ptr::eq(request.raw(), req) {
            // (A state whose `request` names another request than the last call did.)
            pr_err!("a request the core accepted is not the slot's request any more\n");
            return Ok(Some(owner));
        }
        // INVARIANT: started, here: at `OFFSET` from `object`, in the state of its slot
        // (`placed`).
        request.started_at = ptr::from_ref(request).addr();
        Ok(Some(owner))
    }

    /// The request of the slot `owner` holds, if that slot and request are `object`'s:
    /// its slot ([`HasSlot::slot`], at `R::SLOT_OFFSET` from it: [`placed_slot`]), and the
    /// request the state gives ([`RequestState::request`]) at `R::OFFSET` from `object`,
    /// which is inside the state (the offsets say so: checked at compile time). `None`
    /// otherwise. Only such a request is started ([`Request::init`]): the core's answer
    /// finds `object` and its slot by the offsets, the request lives as long as `object`,
    /// and only the slot's owner reaches it.
    pub(crate) fn placed<'o, R: HasRequest>(
        object: &R,
        owner: &'o mut Owner<'_, R::State>,
    ) -> Option<&'o mut Request> {
        const {
            assert!(
                request_in_state::<R>(),
                "the request is not inside the slot's state"
            )
        };
        if !ptr::eq(placed_slot(object)?, owner.slot()) {
            return None;
        }
        let request = owner.request();
        let at = ptr::from_ref(object).addr().checked_add(R::OFFSET);
        (Some(ptr::from_ref(request).addr()) == at).then_some(request)
    }

    /// The queue of a request the core has: as its `queue_response` runs (`take`: the
    /// request ends, and a second call finds nothing), or while it is executed. `None` if
    /// the request ended already.
    ///
    /// # Safety
    ///
    /// `req` is the request of a live [`Request`] started by [`Request::init`] for
    /// transport `T`, which the core is completing or executing, while a reference on the
    /// queue's sq is held for `'a`: the request's own (`nvmet_req_complete` puts it after
    /// `queue_response` returned), or, when `nvmet_req_init` refuses the command and
    /// completes it at once, the starter's (`SqEntered`). With `take`, the caller holds
    /// the owner of the request's slot, resumed from the core: every other writer of the
    /// request's `queue` holds it too, so nothing writes it meanwhile.
    pub(super) unsafe fn queue_of<'a, T: Transport>(
        req: *mut bindings::nvmet_req,
        take: bool,
    ) -> Option<ArcBorrow<'a, T::Queue>> {
        // SAFETY: `Request` is `repr(C)` with the C request first: `req` is the start of a
        // live `Request` (the function's safety section). A non-null `queue` is the
        // address of the `Arc<T::Queue>` the queue's sq keeps until its destroy waited for
        // the request's sq reference (type invariant; `T` by the caller's promise), held
        // for `'a`. A take clears it, as its only writer (the caller's promise): a load and
        // a store, not an exchange.
        let kept = unsafe {
            let queue = &(*req.cast::<Self>()).queue;
            let kept = if take {
                let kept = queue.load(Acquire);
                queue.store(ptr::null_mut(), Relaxed);
                kept
            } else {
                queue.load(Acquire)
            };
            kept.cast_const().cast::<Arc<T::Queue>>().as_ref()
        };
        kept.map(Arc::as_arc_borrow)
    }

    /// Hands a started request back to the core: `None` if it is not started (or handed
    /// over already, or moved since it started), with one log line, since that is a
    /// transport bug.
    fn hand_over(&mut self, what: &str) -> Option<*mut bindings::nvmet_req> {
        if self.started_at != 0 && !self.is_started() {
            pr_err!(
                "{} of a started request that moved out of its slot; ended without running\n",
                what
            );
            // INVARIANT: ended here.
            self.started_at = 0;
            self.queue.store(ptr::null_mut(), Release);
            // SAFETY: the core accepted the request (at its old address) and it was not
            // handed back: its `sq`, `ns` and `pc_ref`, moved with it, hold the references
            // this puts (so the sq's destroy does not wait for it forever), and nothing else
            // of it is read.
            unsafe { bindings::nvmet_req_uninit(self.raw()) };
            return None;
        }
        if !self.is_started() {
            pr_warn!("{} of a request that is not started; ignored\n", what);
            return None;
        }
        // INVARIANT: handed over by the caller, right after this.
        self.started_at = 0;
        Some(self.raw())
    }

    /// Runs the command of the slot `owner` holds (`req->execute`), handing the slot off to
    /// the core: the core completes the request later, or at once, through
    /// `queue_response`, which resumes the slot. (A request that is not started is logged
    /// and its slot freed.)
    pub(crate) fn execute<S: RequestState>(mut owner: Owner<'_, S>) {
        let Some(req) = owner.request().hand_over("execution") else {
            return;
        };
        // SAFETY: the core's tag, which its `queue_response` resumes the slot with.
        unsafe { owner.hand_off_to_event(CORE_TAG) };
        // SAFETY: the request was started where it is (`hand_over`), in the state of this
        // slot (only its owner reaches it: `placed`), which is handed off to the core and
        // in place while the request is in the core (`init`); `execute` was set by
        // `nvmet_req_init`'s parsing (never left unset for an accepted command; if it were,
        // the request is completed as failed rather than left hanging).
        unsafe {
            match (*req).execute {
                Some(execute) => execute(req),
                None => bindings::nvmet_req_complete(req, bindings::NVME_SC_INTERNAL as u16),
            }
        }
    }

    /// Completes the request of the slot `owner` holds with NVMe `status`
    /// (`nvmet_req_complete`), handing the slot off to the core: `queue_response` runs
    /// with it and resumes the slot.
    pub(crate) fn complete<S: RequestState>(mut owner: Owner<'_, S>, status: u16) {
        let Some(req) = owner.request().hand_over("completion") else {
            return;
        };
        // SAFETY: the core's tag, which its `queue_response` resumes the slot with.
        unsafe { owner.hand_off_to_event(CORE_TAG) };
        // SAFETY: the request was started and its slot is handed off to the core.
        unsafe { bindings::nvmet_req_complete(req, status) };
    }

    /// Completes the request of the slot `owner` holds with an error `status` at byte
    /// `error_loc` of the command (see [`Request::complete`]).
    pub(crate) fn fail<S: RequestState>(mut owner: Owner<'_, S>, status: u16, error_loc: u16) {
        let request = owner.request();
        if request.is_started() {
            request.fields_mut().error_loc = error_loc;
        }
        Self::complete(owner, status);
    }

    /// Ends a started request that will not be completed (`nvmet_req_uninit`): its
    /// `queue_response` does not run. It puts the request's sq reference: the last one
    /// lets a waiting `nvmet_sq_destroy` return.
    pub(crate) fn uninit(&mut self) {
        let Some(req) = self.hand_over("uninit") else {
            return;
        };
        // INVARIANT: ended.
        self.queue.store(ptr::null_mut(), Release);
        // SAFETY: the request was started and is the caller's.
        unsafe { bindings::nvmet_req_uninit(req) };
    }

    /// Bytes of data the command moves (with T10-PI generated by the HCA, its PI too).
    pub(crate) fn transfer_len(&self) -> usize {
        self.fields().transfer_len
    }

    /// Sets the bytes of data the command moves.
    pub(crate) fn set_transfer_len(&mut self, len: usize) {
        self.fields_mut().transfer_len = len;
    }

    /// Bytes of protection information the command moves (0: none).
    pub(crate) fn metadata_len(&self) -> usize {
        self.fields().metadata_len
    }

    /// The status the completion carries (0: success); nonzero also while no response
    /// buffer is set.
    pub(crate) fn status(&self) -> u16 {
        // SAFETY: `cqe` is null or the response buffer set by `set_response`, which the
        // request holds (`response`); read volatile: other holders of the buffer copy into
        // it only through `DmaBuf`'s volatile accesses.
        unsafe {
            let cqe = (*self.raw()).cqe;
            if cqe.is_null() {
                return u16::MAX;
            }
            u16::from_le(ptr::read_volatile(&raw const (*cqe).status)) >> 1
        }
    }

    /// Replaces the status of the completion the core wrote (a T10-PI error found after
    /// the core completed the request, before its response goes out).
    pub(crate) fn set_status(&mut self, status: u16) {
        // SAFETY: as in `status`; the owner writes its response before it sends it.
        unsafe {
            let cqe = (*self.raw()).cqe;
            if !cqe.is_null() {
                ptr::write_volatile(&raw mut (*cqe).status, (status << 1).to_le());
            }
        }
    }

    /// Sets the `control` field of a read or write command (the PRINFO bits the T10-PI
    /// offload chose), for the backend.
    pub(crate) fn set_rw_control(&mut self, control: u16) {
        if !self.is_started() {
            return;
        }
        // SAFETY: the command lies in the capsule buffer `init` checked, which the queue
        // the request's sq keeps holds until the request ended; written volatile: other
        // holders of the buffer read it only through `DmaBuf`'s volatile accesses.
        unsafe {
            let cmd = (*self.raw()).cmd;
            if !cmd.is_null() {
                ptr::write_volatile(&raw mut (*cmd).__bindgen_anon_1.rw.control, control.to_le());
            }
        }
    }

    /// The PI type of the request's namespace and the log2 of its block device's
    /// integrity interval; `None` without a block device namespace or integrity profile,
    /// or unless the request is started (once it ended, the core has put the namespace).
    pub(crate) fn ns_integrity(&self) -> Option<(u8, u8)> {
        if !self.is_started() {
            return None;
        }
        // SAFETY: a started request holds a reference on its namespace (if any), and the
        // namespace on its block device; the profile lives as long as that device.
        unsafe {
            let ns = (*self.raw()).ns;
            if ns.is_null() || (*ns).bdev.is_null() {
                return None;
            }
            let pi_type = u8::try_from((*ns).pi_type).ok()?;
            let integrity = bindings::rdma_rs_bdev_get_integrity((*ns).bdev);
            Some((pi_type, integrity.as_ref()?.interval_exp))
        }
    }
}

// SAFETY: the request is plain memory that the core and its owner use from any CPU, one
// at a time (the hand-over protocol above).
unsafe impl Send for Request {}

/// The state of a transport's slot ([`crate::rdma::kernel_gaps::slot::Slot`]) that embeds the request
/// of the slot's command: the request's hand-overs take the slot's owner, since the core
/// may give the request back (`queue_response`) before they return. Implemented by
/// [`impl_has_request!`].
///
/// (A safe trait: the layer starts only the request [`Request::placed`] finds where the
/// object's [`HasRequest::OFFSET`] says, and hands over only a request started where it
/// is: a state that gives another request has it refused.)
pub(crate) trait RequestState {
    /// The slot's request.
    fn request(&mut self) -> &mut Request;
}

/// The owner of the slot of a request of transport `T`.
type SlotOwner<'a, T> = Owner<'a, <<T as Transport>::Request as HasSlot>::State>;

/// What [`Request::init`] gives back: the slot's owner once the core accepted the command
/// (`None` if it completed it at once), or the owner when nothing ran.
pub(crate) type Started<'a, T> = Result<Option<SlotOwner<'a, T>>, SlotOwner<'a, T>>;

/// A transport object that embeds a [`Request`] in the state of its [`Slot`] ([`HasSlot`]);
/// implemented with [`impl_has_request!`].
///
/// (A safe trait: [`Request::init`] starts only a request at `OFFSET` from its object,
/// inside the state of the slot at `SLOT_OFFSET` ([`Request::placed`]), which is where the
/// core's answer finds the object and its slot again.)
pub(crate) trait HasRequest: HasSlot<State: RequestState> {
    /// Where the request is, from the start of the object: inside the value of its slot.
    const OFFSET: usize;
}

/// Whether `R`'s offsets put its request inside the value of its slot.
const fn request_in_state<R: HasRequest>() -> bool {
    let Some(state) = R::SLOT_OFFSET.checked_add(Slot::<R::State>::value_offset()) else {
        return false;
    };
    let Some(end) = R::OFFSET.checked_add(size_of::<Request>()) else {
        return false;
    };
    R::OFFSET >= state && end - state <= size_of::<R::State>()
}

/// The object whose request is `req`.
///
/// # Safety
///
/// `req` is the request of a [`Request`] started by [`Request::init`] in an `R` (at
/// `R::OFFSET` from it: [`Request::placed`]), which stays alive for `'a`.
pub(super) unsafe fn object_of<'a, R: HasRequest>(req: *mut bindings::nvmet_req) -> &'a R {
    // SAFETY: `req` is at `OFFSET` from the start of a live `R` (the function's safety
    // section): `Request` is `repr(C)` with the `Opaque` (transparent) first. (Wrapping:
    // only the address is computed, which is the object's.)
    unsafe { &*req.wrapping_byte_sub(R::OFFSET).cast::<R>() }
}

/// Declares that a transport object embeds its [`Request`] in the named field of the state
/// of a [`crate::rdma::kernel_gaps::slot::Slot`] field (whose owner reaches it).
///
/// ```ignore
/// impl_has_request!(RspSlot, state: RspState, req);
/// ```
macro_rules! impl_has_request {
    ($container:ty, $slot:ident: $inner:ty, $field:ident) => {
        $crate::rdma::cqe::impl_has_slot!($container, $slot: $inner);

        impl $crate::nvmet::request::RequestState for $inner {
            fn request(&mut self) -> &mut $crate::nvmet::request::Request {
                &mut self.$field
            }
        }

        impl $crate::nvmet::HasRequest for $container {
            const OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(&$inner) -> *const $crate::nvmet::request::Request =
                    |inner| &raw const inner.$field;
                <$container as $crate::rdma::cqe::HasSlot>::SLOT_OFFSET
                    + $crate::rdma::kernel_gaps::slot::Slot::<$inner>::value_offset()
                    + ::core::mem::offset_of!($inner, $field)
            };
        }
    };
}
pub(crate) use impl_has_request;
