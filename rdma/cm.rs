// SPDX-License-Identifier: GPL-2.0

//! RDMA CM ids (`struct rdma_cm_id`): addressing, connection management, and the QP.
//!
//! A [`CmId`] owns its id, its handler (an `Arc<T>`, boxed: the box is the id's context) and,
//! once created, its QP with the PD and CQ under it. Dropping it drains the QP (every
//! posted work request completes, flushed if need be), destroys QP, CQ and PD, and then
//! the id: in that order, because the device may go away as soon as its last id does.
//!
//! # Deadlocks
//!
//! The RDMA core delivers events with the id's handler mutex held, so a `CmId` must not
//! be dropped (nor `connect`ed) from inside its own handler: handlers hand such work to a
//! work item, as the C users of RDMA CM do. A connect request is accepted the other way
//! round: only from inside the listener's handler call for it, which holds the new id's
//! handler mutex, as `rdma_accept` requires ([`HandlerHeld`]).

mod event;
mod verbs;

pub(crate) use event::{CmEvent, CmEventKind, CmHandler, ConnectRequest, HandlerHeld};
pub(crate) use verbs::QpCaps;

use super::{addr::SocketAddr, bindings, to_result, Device};
use core::{
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering::Relaxed},
};
use event::cm_handler;
use kernel::{
    prelude::*,
    sync::{Arc, ArcBorrow},
};
use verbs::Verbs;

/// An owned RDMA CM id with handler `T`; see the module documentation.
///
/// # Invariants
///
/// `id` is live until `Drop`; its context is the address of the `Arc<T>` in an
/// [`IdContext<T>`] this value owns (`KBox::into_raw`); `verbs` is `Some` exactly when
/// `id->qp` was created by [`CmId::create_qp`]; `listened` is set once [`CmId::listen`]
/// was called on the id.
pub(crate) struct CmId<T: CmHandler> {
    id: NonNull<bindings::rdma_cm_id>,
    verbs: Option<Verbs>,
    listened: AtomicBool,
    _handler: PhantomData<Arc<T>>,
}

// SAFETY: the id may be used and destroyed from any thread (process context).
unsafe impl<T: CmHandler> Send for CmId<T> {}
// SAFETY: through `&CmId`, the Rust fields are only read (`verbs` is set by
// `create_qp_with`, which takes `&mut self`) or atomic (`listened`), the id's `qp` is read, which RDMA CM sets in
// `rdma_create_qp` (called under that `&mut`) and clears only in `rdma_destroy_qp`
// (called from `Drop`), and the id is passed to RDMA CM calls that serialise on the id's
// own locks (`handler_mutex`, the id's state lock) or only read what the id was created
// with: none of them races a write through another `&CmId`. (A direct poll of the QP's
// CQ, `CmId::poll`, goes through the CQ's own lock.)
unsafe impl<T: CmHandler> Sync for CmId<T> {}

/// How long address and route resolution may take.
pub(crate) const RESOLVE_TIMEOUT_MS: usize = 2000;

/// An id's handler, boxed: the box's address is the id's context, so that events and
/// completions reach the `Arc<T>` itself (an `ArcBorrow` of it costs nothing, where one
/// made from the handler's address has to find the `Arc`'s header first).
pub(crate) struct IdContext<T>(KBox<Arc<T>>);

impl<T> IdContext<T> {
    /// Boxes `handler` for an id (before the step that gives it the id, which cannot fail).
    pub(crate) fn new(handler: Arc<T>) -> Result<Self> {
        Ok(Self(KBox::new(handler, GFP_KERNEL)?))
    }

    /// The context an id owns from now on: `KBox::into_raw` of the box.
    fn into_context(self) -> *mut Arc<T> {
        KBox::into_raw(self.0)
    }
}

impl<T: CmHandler> CmId<T> {
    /// Creates a reliable-connected (`RDMA_PS_TCP`) id in the initial network namespace.
    pub(crate) fn new(handler: Arc<T>) -> Result<Self> {
        let context = IdContext::new(handler)?.into_context();
        // SAFETY: `init_net` is the static initial namespace; the trampoline matches the
        // context, the address of a boxed `Arc<T>` whose ownership passes to the returned
        // id.
        let id = unsafe {
            bindings::__rdma_create_kernel_id(
                core::ptr::addr_of_mut!(bindings::init_net),
                Some(cm_handler::<T>),
                context.cast(),
                bindings::rdma_ucm_port_space_RDMA_PS_TCP,
                bindings::ib_qp_type_IB_QPT_RC,
                crate::MODULE_NAME.as_char_ptr(),
            )
        };
        match super::from_err_ptr(id) {
            // INVARIANT: not listening yet.
            Ok(id) => Ok(Self {
                id,
                verbs: None,
                listened: AtomicBool::new(false),
                _handler: PhantomData,
            }),
            Err(e) => {
                // SAFETY: creation failed, so the context was not taken: reclaim it.
                drop(unsafe { KBox::from_raw(context) });
                Err(e)
            }
        }
    }

    fn raw(&self) -> *mut bindings::rdma_cm_id {
        self.id.as_ptr()
    }

    /// The id's handler, which the id keeps (its context) until it is destroyed.
    pub(crate) fn handler(&self) -> ArcBorrow<'_, T> {
        // SAFETY: the context is the address of the `Arc<T>` this id owns, boxed (type
        // invariant), alive while `self` is borrowed.
        unsafe { &*(*self.raw()).context.cast::<Arc<T>>() }.as_arc_borrow()
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
        // INVARIANT: set before the id can listen.
        self.listened.store(true, Relaxed);
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

    /// Sets the type of service of the id's connection (krping's `tos`): the IPv4 TOS
    /// byte or IPv6 traffic class of RoCE packets, the path's QoS class on InfiniBand.
    /// It takes effect when the route is resolved: set it first, before
    /// [`CmId::resolve_addr`], so that every record of the id carries it. May sleep.
    /// `EINVAL` on an id that listened: RDMA CM's device hot-plug reads a listener's
    /// value under a lock of its own.
    pub(crate) fn set_service_type(&mut self, tos: u8) -> Result {
        if self.listened.load(Relaxed) {
            return Err(EINVAL);
        }
        // SAFETY: the id is live (type invariant). `rdma_set_service_type` writes the
        // value under the id's `qp_mutex`; the readers that do not take that lock are
        // the id's route resolution, connect and listen, which this crate reaches only
        // through a borrow of the id, excluded by this `&mut`, and RDMA CM's device
        // hot-plug, which reads only listening ids, and this one never listened (type
        // invariant: `listen` takes `&self`, excluded too).
        unsafe { bindings::rdma_set_service_type(self.raw(), tos.into()) };
        Ok(())
    }

    /// Starts resolving the route; `RouteResolved` or `RouteError` follows.
    pub(crate) fn resolve_route(&self) -> Result {
        // SAFETY: the id is live.
        to_result(unsafe { bindings::rdma_resolve_route(self.raw(), RESOLVE_TIMEOUT_MS) })
    }

    /// The device the id is bound to, once an address is resolved or a request arrived.
    pub(crate) fn device(&self) -> Option<&Device> {
        // SAFETY: the id is live (type invariant), so its `device` may be read; a non-null
        // device is the one the id is bound to, which stays registered while the id exists,
        // so for as long as `self` is borrowed.
        unsafe {
            let device = (*self.raw()).device;
            (!device.is_null()).then(|| Device::from_raw(device))
        }
    }

    /// The device port the id is bound to (1 on rxe and siw).
    pub(crate) fn port_num(&self) -> u32 {
        // SAFETY: the id is live; `port_num` is set when it is bound.
        unsafe { (*self.raw()).port_num }
    }

    fn conn_param(&self, private_data: &[u8]) -> Result<bindings::rdma_conn_param> {
        // (No QP without verbs resources: the dereference below needs one.)
        if self.verbs.is_none() {
            return Err(super::code::enotconn());
        }
        let device = self.device().ok_or(ENODEV)?;
        let mut param: bindings::rdma_conn_param = pin_init::zeroed();
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

    /// Accepts an adopted connection request (with a QP and receives posted), inside the
    /// listener's handler call for it (`held`; `EINVAL` if that proves another id's).
    pub(crate) fn accept(&self, held: HandlerHeld<'_>, private_data: &[u8]) -> Result {
        let mut param = self.conn_param(private_data)?;
        self.accept_param(held, &mut param)
    }

    /// Accepts an adopted connection request as an NVMe-oF target does (the C
    /// `nvmet-rdma`'s parameters): this side issues at most `initiator_depth` RDMA READs
    /// at once (what the requester offered, see [`ConnectRequest::initiator_depth`]; at
    /// most what the device allows) and answers none (responder resources 0: the host
    /// never reads the target's memory), with end-to-end flow control and RNR retries
    /// without limit. Inside the listener's handler call, as [`CmId::accept`].
    pub(crate) fn accept_as_target(
        &self,
        held: HandlerHeld<'_>,
        private_data: &[u8],
        initiator_depth: u8,
    ) -> Result {
        let mut param = self.conn_param(private_data)?;
        param.initiator_depth = param.initiator_depth.min(initiator_depth);
        param.responder_resources = 0;
        param.flow_control = 1;
        param.retry_count = 0;
        self.accept_param(held, &mut param)
    }

    fn accept_param(&self, held: HandlerHeld<'_>, param: &mut bindings::rdma_conn_param) -> Result {
        if !held.holds(self) {
            return Err(EINVAL);
        }
        // SAFETY: the id is live; `held` proves that this thread's handler call holds its
        // handler mutex (`HandlerHeld`'s invariant), as `rdma_accept` requires; `param`
        // outlives the call.
        to_result(unsafe { bindings::rdma_accept(self.raw(), param) })
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
}

impl<T: CmHandler> Drop for CmId<T> {
    fn drop(&mut self) {
        if let Some(verbs) = self.verbs.take() {
            // SAFETY: the QP exists (invariant); draining from this process context,
            // never a completion callback of its CQ, completes every posted request.
            unsafe { verbs.drain(self.raw()) };
            // Nothing reaches the QP through a handle from now on.
            verbs.gate.retire();
            // SAFETY: the QP exists, drained; its handles no longer reach it.
            unsafe { bindings::rdma_destroy_qp(self.raw()) };
            let duplicates = verbs.records.duplicates();
            if duplicates != 0 {
                pr_warn!(
                    "the device completed {} flushed work request(s) twice; the second completions were ignored\n",
                    duplicates
                );
            }
            drop(verbs);
        }
        // The device stays until the id is gone: RDMA CM lets a device's removal go on
        // (`cma_release_dev` puts its device) before it puts the id's GID reference, so
        // a removal that an id destroyed here unblocks could otherwise free the device's
        // GID table first, and the last GID put would reach a freed table
        // (`free_gid_work`).
        let device = self.device().and_then(Device::try_hold);
        // SAFETY: the id is live (invariant).
        let context = unsafe { (*self.raw()).context.cast::<Arc<T>>() };
        // SAFETY: the id is live and, by the module's rule, not dropped from its own
        // handler. `rdma_destroy_id` waits for running handlers; none run afterwards.
        unsafe { bindings::rdma_destroy_id(self.raw()) };
        drop(device);
        // SAFETY: the context is the boxed `Arc<T>` this id owned; no handler can use it
        // now.
        drop(unsafe { KBox::from_raw(context) });
    }
}
