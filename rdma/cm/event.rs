// SPDX-License-Identifier: GPL-2.0

//! RDMA CM events: what a [`CmHandler`] sees, connect requests it may adopt as new ids,
//! and the C trampoline that delivers them.

use super::{to_result, CmId, IdContext, SocketAddr};
use crate::rdma::{bindings, Device};
use core::{cell::Cell, ffi::c_int, marker::PhantomData, ptr::NonNull, sync::atomic::AtomicBool};
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

    /// A connection request on a listening id. To take it, call [`ConnectRequest::adopt`],
    /// set the new id up and accept it within this call (the accept needs the
    /// [`HandlerHeld`] of [`ConnectRequest::handler_held`]), or reject it; if the request
    /// is not adopted, RDMA CM rejects and destroys it. The default refuses.
    fn connect_request(_this: ArcBorrow<'_, Self>, _request: ConnectRequest<'_>) {}
}

/// A connection request, valid during the listener's handler call.
pub(crate) struct ConnectRequest<'a> {
    id: NonNull<bindings::rdma_cm_id>,
    event: CmEvent<'a>,
    adopted: &'a Cell<bool>,
}

/// Proof that the running RDMA CM handler call holds the handler mutex of one id, the
/// new id of a connect request: what [`CmId::accept`] needs. It lives no longer than that
/// call (`'a`) and stays on its thread (neither `Send` nor `Sync`).
///
/// Accepting inside the listener's handler, as the C users of RDMA CM do, also keeps the
/// peer's side of a connection on one machine from running ahead of the accept: for
/// iWARP both sides' events go through `iw_cm`'s ordered workqueue, so the peer learns
/// that it is connected only once the accept has returned (`siw_accept` answers the peer
/// before it hands the socket to the QP; data arriving in between would wait unread).
///
/// # Invariants
///
/// The core holds `id`'s handler mutex for all of `'a`, on the thread holding this value.
#[derive(Clone, Copy)]
pub(crate) struct HandlerHeld<'a> {
    id: NonNull<bindings::rdma_cm_id>,
    _call: PhantomData<(&'a (), *mut ())>,
}

impl HandlerHeld<'_> {
    /// Whether this is the proof for `id`.
    pub(super) fn holds<T: CmHandler>(&self, id: &CmId<T>) -> bool {
        self.id.as_ptr() == id.raw()
    }
}

impl<'a> ConnectRequest<'a> {
    /// The proof that this handler call holds the request's (new) id's handler mutex, for
    /// accepting the id once adopted and set up.
    pub(crate) fn handler_held(&self) -> HandlerHeld<'a> {
        // INVARIANT: the core calls the listener's handler for a connect request with the
        // new id's handler mutex held, for the call, which `'a` does not outlive (it
        // borrows the trampoline's locals).
        HandlerHeld {
            id: self.id,
            _call: PhantomData,
        }
    }

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
        // SAFETY: the id is live for the handler call; its destination address is a
        // `sockaddr_storage`.
        unsafe {
            SocketAddr::from_raw(core::ptr::from_ref(
                &(*self.id.as_ptr()).route.addr.dst_addr,
            ))
        }
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
    pub(crate) fn adopt<C: CmHandler>(self, handler: IdContext<C>) -> CmId<C> {
        let id = self.id.as_ptr();
        // SAFETY: the core holds the new id's handler mutex during this call, so no event
        // is delivered while its handler and context change; from here on the context is
        // the address of the boxed `Arc<C>` the returned `CmId` owns.
        unsafe {
            (*id).context = handler.into_context().cast();
            (*id).event_handler = Some(cm_handler::<C>);
        }
        self.adopted.set(true);
        // INVARIANT: a connection's id, which never listened.
        CmId {
            id: self.id,
            verbs: None,
            listened: AtomicBool::new(false),
            _handler: PhantomData,
        }
    }
}

/// The RDMA CM event trampoline for ids whose context is a boxed `Arc<T>` ([`IdContext`]).
///
/// # Safety
///
/// Called by RDMA CM with a live id whose `context` is the address of a boxed `Arc<T>`
/// kept alive by the id's owner (a [`CmId<T>`], or for a connect request the listener's).
pub(super) unsafe extern "C" fn cm_handler<T: CmHandler>(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: see the function's safety section: the `Arc<T>` outlives the id's events,
    // since its owner destroys the id (which waits for handlers) before releasing it.
    let this = unsafe { &*(*id).context.cast::<Arc<T>>() }.as_arc_borrow();
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
        crate::rdma::code::econnrefused().to_errno()
    }
}
