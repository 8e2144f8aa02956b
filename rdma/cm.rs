// SPDX-License-Identifier: GPL-2.0

//! RDMA CM ids (`struct rdma_cm_id`): addressing, connection management, and the QP.
//!
//! A [`CmId`] owns its id, its handler (an `Arc<T>` stored as the id's context) and,
//! once created, its QP with the PD and CQ under it. Dropping it drains the QP (every
//! posted work request completes, flushed if need be), destroys QP, CQ and PD, and then
//! the id: in that order, because the device may go away as soon as its last id does.
//!
//! # Deadlocks
//!
//! The RDMA core delivers events with the id's handler mutex held, so a `CmId` must not
//! be dropped (nor `accept`ed, nor `connect`ed) from inside its own handler: handlers
//! hand such work to a work item, as the C users of RDMA CM do.

use super::{
    addr::SocketAddr,
    bindings,
    qp::{Local, Qp, QpRecords},
    qp_handle::QpHandle,
    Cq, Device, DmaBuf, Pd, Srq,
};
use core::{
    cell::Cell,
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    prelude::*,
    sync::{Arc, ArcBorrow},
};

/// The events of `enum rdma_cm_event_type` a handler sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmEventKind {
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectRequest,
    ConnectResponse,
    ConnectError,
    Unreachable,
    Rejected,
    Established,
    Disconnected,
    DeviceRemoval,
    AddrChange,
    TimewaitExit,
    /// Anything else (multicast, internal).
    Other(u32),
}

impl CmEventKind {
    fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED => Self::AddrResolved,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR => Self::AddrError,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED => Self::RouteResolved,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR => Self::RouteError,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_REQUEST => Self::ConnectRequest,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_RESPONSE => Self::ConnectResponse,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR => Self::ConnectError,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE => Self::Unreachable,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED => Self::Rejected,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED => Self::Established,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED => Self::Disconnected,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL => Self::DeviceRemoval,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE => Self::AddrChange,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT => Self::TimewaitExit,
            other => Self::Other(other),
        }
    }
}

/// An event, borrowed for the duration of the handler call.
pub(crate) struct CmEvent<'a> {
    raw: &'a bindings::rdma_cm_event,
    id: *mut bindings::rdma_cm_id,
}

impl CmEvent<'_> {
    /// What happened.
    pub(crate) fn kind(&self) -> CmEventKind {
        CmEventKind::from_raw(self.raw.event)
    }

    /// The event's status: an errno, or a reject reason for `Rejected`.
    pub(crate) fn status(&self) -> i32 {
        self.raw.status
    }

    /// The event's name as RDMA CM spells it, e.g. `RDMA_CM_EVENT_ESTABLISHED`.
    pub(crate) fn name(&self) -> &'static CStr {
        // SAFETY: `rdma_event_msg` returns a static string for any value.
        unsafe { CStr::from_char_ptr(bindings::rdma_event_msg(self.raw.event)) }
    }

    /// For `Rejected`: the reason as text.
    pub(crate) fn reject_reason(&self) -> &'static CStr {
        // SAFETY: the id is live during the handler call; the string is static.
        unsafe { CStr::from_char_ptr(bindings::rdma_reject_msg(self.id, self.raw.status)) }
    }

    /// The private data of a connect request, response or reject (may be padded by
    /// the transport: InfiniBand/RoCE pad it to a fixed length).
    pub(crate) fn private_data(&self) -> &[u8] {
        // SAFETY: `conn` is the member in use for connection events.
        let conn = unsafe { &self.raw.param.conn };
        if conn.private_data.is_null() {
            return &[];
        }
        // SAFETY: the core provides `private_data_len` readable bytes for the call.
        unsafe {
            core::slice::from_raw_parts(
                conn.private_data.cast::<u8>(),
                conn.private_data_len.into(),
            )
        }
    }
}

/// Receives the events of the ids it is the handler of.
pub(crate) trait CmHandler: Send + Sync + Sized + 'static {
    /// An event on an id this handler owns. Runs in process context, with the id's handler
    /// mutex held (see the module documentation).
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>);

    /// A connection request on a listening id. To take it, call [`ConnectRequest::adopt`]
    /// and hand the new id to a work item that sets it up and accepts or rejects it; if
    /// the request is not adopted, RDMA CM rejects and destroys it. The default refuses.
    fn connect_request(_this: ArcBorrow<'_, Self>, _request: ConnectRequest<'_>) {}
}

/// A connection request, valid during the listener's handler call.
pub(crate) struct ConnectRequest<'a> {
    id: NonNull<bindings::rdma_cm_id>,
    event: CmEvent<'a>,
    adopted: &'a Cell<bool>,
}

impl ConnectRequest<'_> {
    /// The event (private data, and so on).
    pub(crate) fn event(&self) -> &CmEvent<'_> {
        &self.event
    }

    /// The device the request arrived on.
    pub(crate) fn device(&self) -> &Device {
        // SAFETY: a connect request's id is bound to a registered device, which stays so
        // at least while the id exists.
        unsafe { Device::from_raw((*self.id.as_ptr()).device) }
    }

    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        peer_of(self.id)
    }

    /// The local address the request came in on (a listener on the wildcard address
    /// learns the real one here).
    pub(crate) fn local(&self) -> SocketAddr {
        // SAFETY: the id is live for the handler call; its source address is a
        // `sockaddr_storage`.
        unsafe {
            SocketAddr::from_raw(core::ptr::from_ref(
                &(*self.id.as_ptr()).route.addr.src_addr,
            ))
        }
    }

    /// How many RDMA READs the requester lets this side have outstanding at once (its
    /// responder resources, as the CM presents them to the passive side).
    pub(crate) fn initiator_depth(&self) -> u8 {
        // SAFETY: `conn` is the member in use for connect requests.
        unsafe { self.event.raw.param.conn.initiator_depth }
    }

    /// Refuses the request with `private_data` (at most 255 bytes) as the reject's
    /// consumer-defined data. RDMA CM then destroys the request's id.
    pub(crate) fn reject(self, private_data: &[u8]) -> Result {
        let len = u8::try_from(private_data.len()).map_err(|_| EINVAL)?;
        // SAFETY: the id is live for the handler call; the core holds its handler mutex,
        // as `rdma_reject` expects; the private data outlives the call.
        to_result(unsafe {
            bindings::rdma_reject(
                self.id.as_ptr(),
                private_data.as_ptr().cast(),
                len,
                bindings::ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED as u8,
            )
        })
    }

    /// Takes the request: future events of the new id go to `handler`, which the returned
    /// [`CmId`] owns. The caller must not drop the id in this handler call.
    pub(crate) fn adopt<C: CmHandler>(self, handler: Arc<C>) -> CmId<C> {
        let id = self.id.as_ptr();
        // SAFETY: the core holds the new id's handler mutex during this call, so no event
        // is delivered while its handler and context change; from here on the context is
        // an `Arc<C>` the returned `CmId` owns.
        unsafe {
            (*id).context = handler.into_raw().cast_mut().cast();
            (*id).event_handler = Some(cm_handler::<C>);
        }
        self.adopted.set(true);
        CmId {
            id: self.id,
            verbs: None,
            _handler: PhantomData,
        }
    }
}

fn peer_of(id: NonNull<bindings::rdma_cm_id>) -> SocketAddr {
    // SAFETY: the id is live; its destination address is a `sockaddr_storage`.
    unsafe { SocketAddr::from_raw(core::ptr::from_ref(&(*id.as_ptr()).route.addr.dst_addr)) }
}

/// The RDMA CM event trampoline for ids whose context is an `Arc<T>`.
///
/// # Safety
///
/// Called by RDMA CM with a live id whose `context` is the raw pointer of an `Arc<T>`
/// kept alive by the id's owner (a [`CmId<T>`], or for a connect request the listener's).
unsafe extern "C" fn cm_handler<T: CmHandler>(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: see the function's safety section: the `Arc<T>` outlives the id's events,
    // since its owner destroys the id (which waits for handlers) before releasing it.
    let this = unsafe { ArcBorrow::<T>::from_raw((*id).context.cast::<T>()) };
    let event = CmEvent {
        // SAFETY: the core passes a valid event for the duration of the call.
        raw: unsafe { &*event },
        id,
    };
    if event.kind() != CmEventKind::ConnectRequest {
        T::event(this, &event);
        return 0;
    }
    let adopted = Cell::new(false);
    let request = ConnectRequest {
        // SAFETY: the core never passes a null id.
        id: unsafe { NonNull::new_unchecked(id) },
        event,
        adopted: &adopted,
    };
    T::connect_request(this, request);
    // A non-zero return makes RDMA CM destroy the new id, which nobody owns.
    if adopted.get() {
        0
    } else {
        -(bindings::ECONNREFUSED as c_int)
    }
}

/// Sizes of a QP.
#[derive(Clone, Copy)]
pub(crate) struct QpCaps {
    /// Send queue depth.
    pub(crate) send_wr: u32,
    /// Receive queue depth.
    pub(crate) recv_wr: u32,
    /// Scatter/gather entries per send and per receive work request.
    pub(crate) send_sge: u32,
    /// As `send_sge`, for receives.
    pub(crate) recv_sge: u32,
    /// `rdma_rw` contexts the QP must be able to run at once (0: the QP does not use
    /// `rdma_rw`); the RDMA core grows the send queue and MR pool for them.
    pub(crate) rdma_ctxs: u32,
    /// The completion vector of the QP's CQ.
    pub(crate) vector: u32,
    /// Share a CQ of the device's pool with other QPs ([`Cq::from_pool`]) instead of
    /// allocating one.
    pub(crate) shared_cq: bool,
    /// The QP offloads T10-PI (`IB_QP_CREATE_INTEGRITY_EN`): its `rdma_rw` contexts may
    /// use signature MRs. Only on a device that [supports it](Device::supports_integrity).
    pub(crate) integrity: bool,
    /// Bytes a send should be able to carry inline (`IB_SEND_INLINE`, copied at post
    /// time); a device that offers fewer gets a QP without inline sends (see
    /// [`CmId::max_inline_data`]).
    pub(crate) inline_data: u32,
}

impl QpCaps {
    /// `send_wr` and `recv_wr` deep, one SGE each way, no `rdma_rw`, vector 0, a CQ of
    /// its own.
    pub(crate) const fn new(send_wr: u32, recv_wr: u32) -> Self {
        Self {
            send_wr,
            recv_wr,
            send_sge: 1,
            recv_sge: 1,
            rdma_ctxs: 0,
            vector: 0,
            shared_cq: false,
            integrity: false,
            inline_data: 0,
        }
    }
}

/// The verbs objects under a CM id's QP, freed after the QP (field order matters).
struct Verbs {
    cq: Cq,
    /// The QP's PD: its own, or the one of the SRQ it shares with other QPs. MRs on it
    /// hold a reference too, so it outlives them even when the QP goes first.
    pd: Arc<Pd>,
    /// The SRQ the QP receives from, if any (kept alive until the QP is gone).
    srq: Option<Arc<Srq>>,
    /// The QP was drained: once is enough, and on an SRQ a second `ib_drain_qp` would
    /// wait a minute for an `IB_EVENT_QP_LAST_WQE_REACHED` that came already.
    drained: AtomicBool,
    /// Bytes a send may carry inline, as the device granted.
    inline_data: u32,
    /// The QP's posting gate and records of failed requests, kept until the CQ is gone
    /// (declared after it); boxed so that it does not move while records point to it.
    records: Pin<KBox<QpRecords>>,
}

impl Verbs {
    /// Drains the QP of `id` unless done before.
    ///
    /// # Safety
    ///
    /// `id` owns these verbs and its QP exists; the caller runs in process context, not in
    /// a completion callback of the QP's CQ.
    unsafe fn drain(&self, id: *mut bindings::rdma_cm_id) {
        if !self.drained.swap(true, Ordering::AcqRel) {
            // Nothing may be posted behind the drain's marker: it would never complete.
            self.records.close();
            // SAFETY: see the function's safety section.
            unsafe { bindings::ib_drain_qp((*id).qp) };
        }
    }
}

/// An owned RDMA CM id with handler `T`; see the module documentation.
///
/// # Invariants
///
/// `id` is live until `Drop`; its context is `Arc::into_raw` of an `Arc<T>` this value
/// owns; `verbs` is `Some` exactly when `id->qp` was created by [`CmId::create_qp`].
pub(crate) struct CmId<T: CmHandler> {
    id: NonNull<bindings::rdma_cm_id>,
    verbs: Option<Verbs>,
    _handler: PhantomData<Arc<T>>,
}

// SAFETY: the id may be used and destroyed from any thread (process context).
unsafe impl<T: CmHandler> Send for CmId<T> {}
// SAFETY: `&CmId` methods only pass the pointer to RDMA CM calls that lock internally.
unsafe impl<T: CmHandler> Sync for CmId<T> {}

/// How long address and route resolution may take.
pub(crate) const RESOLVE_TIMEOUT_MS: usize = 2000;

impl<T: CmHandler> CmId<T> {
    /// Creates a reliable-connected (`RDMA_PS_TCP`) id in the initial network namespace.
    pub(crate) fn new(handler: Arc<T>) -> Result<Self> {
        let context = handler.into_raw();
        // SAFETY: `init_net` is the static initial namespace; the trampoline matches the
        // context, an `Arc<T>` whose ownership passes to the returned id.
        let id = unsafe {
            bindings::__rdma_create_kernel_id(
                core::ptr::addr_of_mut!(bindings::init_net),
                Some(cm_handler::<T>),
                context.cast_mut().cast(),
                bindings::rdma_ucm_port_space_RDMA_PS_TCP,
                bindings::ib_qp_type_IB_QPT_RC,
                crate::MODULE_NAME.as_char_ptr(),
            )
        };
        match super::from_err_ptr(id) {
            Ok(id) => Ok(Self {
                id,
                verbs: None,
                _handler: PhantomData,
            }),
            Err(e) => {
                // SAFETY: creation failed, so the context was not taken: reclaim it.
                drop(unsafe { Arc::from_raw(context) });
                Err(e)
            }
        }
    }

    fn raw(&self) -> *mut bindings::rdma_cm_id {
        self.id.as_ptr()
    }

    /// Binds to a local address (the wildcard address binds to all devices).
    pub(crate) fn bind(&self, addr: &SocketAddr) -> Result {
        // SAFETY: the id is live; `addr` is a valid socket address for the call.
        to_result(unsafe { bindings::rdma_bind_addr(self.raw(), addr.as_raw()) })
    }

    /// Makes an IPv6 id bind to IPv6 only (not IPv4 too); call before [`CmId::bind`].
    pub(crate) fn set_afonly(&self) -> Result {
        // SAFETY: the id is live and not bound yet.
        to_result(unsafe { bindings::rdma_set_afonly(self.raw(), 1) })
    }

    /// Listens for connection requests (after [`CmId::bind`]).
    pub(crate) fn listen(&self, backlog: i32) -> Result {
        // SAFETY: the id is live.
        to_result(unsafe { bindings::rdma_listen(self.raw(), backlog) })
    }

    /// Starts resolving `dst` to a device; `AddrResolved` or `AddrError` follows.
    pub(crate) fn resolve_addr(&self, dst: &SocketAddr) -> Result {
        // SAFETY: the id is live; `dst` is valid for the call (RDMA CM copies it).
        to_result(unsafe {
            bindings::rdma_resolve_addr(
                self.raw(),
                core::ptr::null_mut(),
                dst.as_raw(),
                RESOLVE_TIMEOUT_MS,
            )
        })
    }

    /// Starts resolving the route; `RouteResolved` or `RouteError` follows.
    pub(crate) fn resolve_route(&self) -> Result {
        // SAFETY: the id is live.
        to_result(unsafe { bindings::rdma_resolve_route(self.raw(), RESOLVE_TIMEOUT_MS) })
    }

    /// The device the id is bound to, once an address is resolved or a request arrived.
    pub(crate) fn device(&self) -> Option<&Device> {
        // SAFETY: the id is live; a bound id keeps its device registered while it exists.
        let device = unsafe { (*self.raw()).device };
        // SAFETY: non-null devices of a live id are registered (see above).
        (!device.is_null()).then(|| unsafe { Device::from_raw(device) })
    }

    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        peer_of(self.id)
    }

    /// Creates the QP (RC, every request signalled) with `caps` on a CQ and the given
    /// PD, and returns the send queue depth the device granted (with `rdma_ctxs`, more
    /// than asked). Fails with `EEXIST` if the id has a QP already, `ENODEV` if it is not
    /// bound to a device yet.
    pub(crate) fn create_qp(
        &mut self,
        pd: Arc<Pd>,
        caps: QpCaps,
        poll: super::PollContext,
    ) -> Result<u32> {
        self.create_qp_with(pd, None, caps, poll)
    }

    /// As [`CmId::create_qp`], for a QP whose receives come from `srq` (and which shares
    /// its PD): `caps.recv_wr` then only sizes the CQ, for the receive completions the QP
    /// may take at once.
    pub(crate) fn create_qp_on_srq(
        &mut self,
        srq: &Arc<Srq>,
        caps: QpCaps,
        poll: super::PollContext,
    ) -> Result<u32> {
        self.create_qp_with(srq.pd().clone(), Some(srq.clone()), caps, poll)
    }

    fn create_qp_with(
        &mut self,
        pd: Arc<Pd>,
        srq: Option<Arc<Srq>>,
        caps: QpCaps,
        poll: super::PollContext,
    ) -> Result<u32> {
        if self.verbs.is_some() {
            return Err(EEXIST);
        }
        let device = self.device().ok_or(ENODEV)?;
        let records = KBox::pin_init(QpRecords::new(), GFP_KERNEL)?;
        // Every work request the QP can hold: soft providers (rxe, siw) complete each
        // flushed one, signalled or not, so a teardown under load can have them all
        // pending at once. The RDMA core adds send queue entries for the `rdma_rw`
        // contexts (one transfer each, plus a registration and an invalidation where the
        // device reads through MRs or the QP offloads T10-PI), as `rdma_rw_max_send_wr`
        // tells. One extra entry each for the drain markers `ib_drain_qp` posts.
        let create_flags = if caps.integrity {
            u32::try_from(bindings::ib_qp_create_flags_IB_QP_CREATE_INTEGRITY_EN).unwrap_or(0)
        } else {
            0
        };
        // SAFETY: the device is registered (the id is bound to it); a pure computation.
        let rw_wrs = unsafe {
            bindings::rdma_rw_max_send_wr(
                device.as_raw(),
                self.port_num(),
                caps.rdma_ctxs,
                create_flags,
            )
        };
        let entries = caps
            .send_wr
            .saturating_add(rw_wrs)
            .saturating_add(caps.recv_wr)
            .saturating_add(2);
        let cq = if caps.shared_cq {
            Cq::from_pool(device, entries, caps.vector, poll)?
        } else {
            Cq::new(device, entries, caps.vector, poll)?
        };
        // SAFETY: all-zeroes is a valid, empty QP attribute set.
        let mut attr: bindings::ib_qp_init_attr = unsafe { core::mem::zeroed() };
        attr.send_cq = cq.as_raw();
        attr.recv_cq = cq.as_raw();
        attr.cap.max_send_wr = caps.send_wr + 1;
        match &srq {
            Some(srq) => attr.srq = srq.as_raw(),
            None => attr.cap.max_recv_wr = caps.recv_wr + 1,
        }
        attr.cap.max_send_sge = caps.send_sge;
        attr.cap.max_recv_sge = caps.recv_sge;
        attr.cap.max_rdma_ctxs = caps.rdma_ctxs;
        attr.port_num = self.port_num();
        attr.sq_sig_type = bindings::ib_sig_type_IB_SIGNAL_REQ_WR;
        attr.qp_type = bindings::ib_qp_type_IB_QPT_RC;
        if caps.integrity {
            // (bindgen types the enum as `int` or `unsigned int` depending on the module's
            // other headers: `try_from` fits either.)
            attr.create_flags |=
                u32::try_from(bindings::ib_qp_create_flags_IB_QP_CREATE_INTEGRITY_EN).unwrap_or(0);
        }
        attr.event_handler = Some(qp_event);
        attr.qp_context = self.raw().cast();
        attr.cap.max_inline_data = caps.inline_data;
        let requested = attr;
        let create = |attr: &mut bindings::ib_qp_init_attr| {
            // SAFETY: the id is live and bound to the device PD and CQ belong to; `attr`
            // is valid for the call. The QP's context is the id, which outlives the QP
            // (`Drop` destroys the QP first).
            // (An SRQ belongs to the PD given here: `create_qp_on_srq` passes the SRQ's.)
            to_result(unsafe { bindings::rdma_create_qp(self.raw(), pd.as_raw(), attr) })
        };
        if let Err(error) = create(&mut attr) {
            if caps.inline_data == 0 || error != EINVAL {
                return Err(error);
            }
            // Inline sends are an optimisation: a device that refuses the size (`EINVAL`)
            // gets a QP without them.
            attr = requested;
            attr.cap.max_inline_data = 0;
            create(&mut attr)?;
        }
        // RDMA CM records the QPs it creates under its own name ("rdma_cm", for every
        // kernel user); name this one after the module that owns it, as its id, PD and CQ
        // are, so that `rdma res show qp` tells whose it is.
        // SAFETY: `rdma_create_qp` succeeded, so the id's QP is live and this id owns it;
        // the name is a `'static` C string of this module, which destroys its QPs before
        // it unloads (`rdma_restrack_del` waits for readers), as the id's own name
        // already requires. The QP is published to `rdma res` readers already, so the
        // store is a volatile one (the kernel's WRITE_ONCE): a reader sees the old
        // pointer or the new one, both valid strings.
        unsafe {
            core::ptr::write_volatile(
                &raw mut (*(*self.raw()).qp).res.kern_name,
                crate::MODULE_NAME.as_char_ptr(),
            )
        };
        self.verbs = Some(Verbs {
            cq,
            pd,
            srq,
            drained: AtomicBool::new(false),
            inline_data: attr.cap.max_inline_data,
            records,
        });
        Ok(attr.cap.max_send_wr)
    }

    /// The handler of the id that owns `qp`: for completions that do not say which
    /// connection they belong to (receives taken from an SRQ).
    ///
    /// # Safety
    ///
    /// `qp` was created by [`CmId::create_qp`] or [`CmId::create_qp_on_srq`] on a
    /// `CmId<T>` that stays alive (with its QP) for `'a`.
    pub(crate) unsafe fn handler_of_qp<'a>(qp: *mut bindings::ib_qp) -> &'a T {
        // SAFETY: the QP's context is its id (see `create_qp_with`), whose context is the
        // `Arc<T>` it owns; both live for `'a` by the caller's promise.
        unsafe {
            let id = (*qp).qp_context.cast::<bindings::rdma_cm_id>();
            &*(*id).context.cast::<T>()
        }
    }

    /// The device port the id is bound to (1 on rxe and siw).
    pub(crate) fn port_num(&self) -> u32 {
        // SAFETY: the id is live; `port_num` is set when it is bound.
        unsafe { (*self.raw()).port_num }
    }

    /// The local address (a listener's bound address; a connection's local end).
    pub(crate) fn local(&self) -> SocketAddr {
        // SAFETY: the id is live; its source address is a `sockaddr_storage`.
        unsafe { SocketAddr::from_raw(core::ptr::from_ref(&(*self.raw()).route.addr.src_addr)) }
    }

    /// A handle on the QP for work requests with embedded completion entries and for
    /// `rdma_rw` contexts; `None` before [`CmId::create_qp`].
    ///
    /// # Safety
    ///
    /// The caller uses the handle, its clones and the contexts mapped through them only
    /// while this id's QP lives (until the id is dropped).
    pub(crate) unsafe fn qp_handle(&self) -> Option<QpHandle> {
        self.verbs.as_ref()?;
        // SAFETY: the id is live and `verbs` says it has a QP.
        let qp = NonNull::new(unsafe { (*self.raw()).qp })?;
        // SAFETY: the QP lives until `Drop` destroys it; the rest is the caller's promise.
        Some(unsafe { QpHandle::new(qp, self.port_num()) })
    }

    /// The QP, once created.
    pub(crate) fn qp(&self) -> Option<Qp<'_>> {
        let verbs = self.verbs.as_ref()?;
        // SAFETY: the id is live and `verbs` says it has a QP.
        let qp = NonNull::new(unsafe { (*self.raw()).qp })?;
        // SAFETY: the QP lives as long as `self` is borrowed, and `Drop` drains it before
        // destroying it; its `records` go only after its CQ (field order of `Verbs`).
        Some(unsafe { Qp::from_raw(qp, &verbs.records) })
    }

    /// `len` bytes of `buf` at `offset`, with the PD's local DMA lkey: the usual local side
    /// of a work request. `ENOTCONN` before the QP exists.
    pub(crate) fn dma_local<'a>(
        &self,
        buf: &'a DmaBuf,
        offset: usize,
        len: u32,
    ) -> Result<Local<'a>> {
        let pd = self.pd().ok_or_else(super::code::enotconn)?;
        Ok(Local {
            buf,
            offset,
            len,
            lkey: pd.local_dma_lkey(),
        })
    }

    /// Bytes a send on the QP may carry inline (`IB_SEND_INLINE`); 0 before the QP exists
    /// or if the device offers no inline sends.
    pub(crate) fn max_inline_data(&self) -> u32 {
        self.verbs.as_ref().map_or(0, |verbs| verbs.inline_data)
    }

    /// The PD under the QP, once created.
    pub(crate) fn pd(&self) -> Option<&Arc<Pd>> {
        self.verbs.as_ref().map(|verbs| &verbs.pd)
    }

    fn conn_param(&self, private_data: &[u8]) -> Result<bindings::rdma_conn_param> {
        // (No QP without verbs resources: the dereference below needs one.)
        if self.verbs.is_none() {
            return Err(super::errno(bindings::ENOTCONN));
        }
        let device = self.device().ok_or(ENODEV)?;
        // SAFETY: all-zeroes is a valid connection parameter set.
        let mut param: bindings::rdma_conn_param = unsafe { core::mem::zeroed() };
        param.private_data = private_data.as_ptr().cast();
        param.private_data_len = u8::try_from(private_data.len()).map_err(|_| EINVAL)?;
        let (responder, initiator) = device.rdma_read_depths();
        param.responder_resources = responder;
        param.initiator_depth = initiator;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        // SAFETY: the id is live; it has verbs resources (checked above), so its QP exists.
        param.qp_num = unsafe { (*(*self.raw()).qp).qp_num };
        Ok(param)
    }

    /// Connects (after `RouteResolved`, with a QP); `Established` or an error event
    /// follows. Not from this id's handler.
    pub(crate) fn connect(&self, private_data: &[u8]) -> Result {
        let mut param = self.conn_param(private_data)?;
        // SAFETY: the id is live and routed; `param` and its private data outlive the call.
        to_result(unsafe { bindings::rdma_connect(self.raw(), &mut param) })
    }

    /// Accepts an adopted connection request (with a QP and receives posted). Not from
    /// this id's handler.
    pub(crate) fn accept(&self, private_data: &[u8]) -> Result {
        let mut param = self.conn_param(private_data)?;
        self.accept_param(&mut param)
    }

    /// Accepts an adopted connection request as an NVMe-oF target does (the C
    /// `nvmet-rdma`'s parameters): this side issues at most `initiator_depth` RDMA READs
    /// at once (what the requester offered, see [`ConnectRequest::initiator_depth`]; at
    /// most what the device allows) and answers none (responder resources 0: the host
    /// never reads the target's memory), with end-to-end flow control and RNR retries
    /// without limit. Not from this id's handler.
    pub(crate) fn accept_as_target(&self, private_data: &[u8], initiator_depth: u8) -> Result {
        let mut param = self.conn_param(private_data)?;
        param.initiator_depth = param.initiator_depth.min(initiator_depth);
        param.responder_resources = 0;
        param.flow_control = 1;
        param.retry_count = 0;
        self.accept_param(&mut param)
    }

    fn accept_param(&self, param: &mut bindings::rdma_conn_param) -> Result {
        // SAFETY: the id is live; `rdma_accept` requires the handler mutex, which we take
        // here, outside any handler of this id; `param` outlives the call.
        let ret = unsafe {
            bindings::rdma_lock_handler(self.raw());
            let ret = bindings::rdma_accept(self.raw(), param);
            bindings::rdma_unlock_handler(self.raw());
            ret
        };
        to_result(ret)
    }

    /// Rejects an adopted connection request, with `private_data` (at most 255 bytes).
    pub(crate) fn reject(&self, private_data: &[u8]) -> Result {
        let len = u8::try_from(private_data.len()).map_err(|_| EINVAL)?;
        // SAFETY: the id is live; `IB_CM_REJ_CONSUMER_DEFINED` is a valid reason; the
        // private data outlives the call.
        to_result(unsafe {
            bindings::rdma_reject(
                self.raw(),
                private_data.as_ptr().cast(),
                len,
                bindings::ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED as u8,
            )
        })
    }

    /// Starts a disconnect; `Disconnected` follows on both sides.
    pub(crate) fn disconnect(&self) -> Result {
        // SAFETY: the id is live; `rdma_disconnect` may be called from any context that
        // may sleep, including handlers.
        to_result(unsafe { bindings::rdma_disconnect(self.raw()) })
    }

    /// Disconnects and drains the QP: when this returns, the peer can no longer reach local
    /// memory through the connection and every posted work request has completed. For an
    /// operation abandoned while the peer may still READ or WRITE its buffers. Must not be
    /// called from a completion callback of the QP's CQ.
    pub(crate) fn shut_down(&self) {
        let _ = self.disconnect();
        if let Some(verbs) = &self.verbs {
            // SAFETY: the QP exists while `verbs` is set (invariant); the caller runs in
            // process context outside the CQ's completion callbacks, as draining needs.
            unsafe { verbs.drain(self.raw()) };
        }
    }
}

impl<T: CmHandler> Drop for CmId<T> {
    fn drop(&mut self) {
        if let Some(verbs) = self.verbs.take() {
            // SAFETY: the QP exists (invariant); draining from this process context,
            // never a completion callback of its CQ, completes every posted request.
            unsafe {
                verbs.drain(self.raw());
                bindings::rdma_destroy_qp(self.raw());
            }
            let duplicates = verbs.records.duplicates();
            if duplicates != 0 {
                pr_warn!(
                    "the device completed {} flushed work request(s) twice; the second completions were ignored\n",
                    duplicates
                );
            }
            drop(verbs);
        }
        // SAFETY: the id is live (invariant).
        let context = unsafe { (*self.raw()).context.cast::<T>() };
        // SAFETY: the id is live and, by the module's rule, not dropped from its own
        // handler. `rdma_destroy_id` waits for running handlers; none run afterwards.
        unsafe { bindings::rdma_destroy_id(self.raw()) };
        // SAFETY: the context is the `Arc<T>` this id owned; no handler can use it now.
        drop(unsafe { Arc::<T>::from_raw(context) });
    }
}

/// QP events: the first message on a connection whose CM handshake has not finished yet
/// (`IB_EVENT_COMM_EST`) tells RDMA CM it is established, as the CM documentation asks.
///
/// # Safety
///
/// Called by the RDMA core for a QP made by [`CmId::create_qp`], whose context is its id.
unsafe extern "C" fn qp_event(event: *mut bindings::ib_event, context: *mut core::ffi::c_void) {
    // SAFETY: the core passes a valid event for the call.
    let kind = unsafe { (*event).event };
    if kind == bindings::ib_event_type_IB_EVENT_COMM_EST {
        // SAFETY: the context is the live id that owns the QP (see `create_qp`).
        unsafe { bindings::rdma_notify(context.cast(), kind) };
    }
}

fn to_result(ret: c_int) -> Result {
    if ret == 0 {
        Ok(())
    } else {
        Err(Error::from_errno(ret))
    }
}
