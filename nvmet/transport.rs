// SPDX-License-Identifier: GPL-2.0

//! A fabrics transport's registration with the nvmet core: the [`Transport`] trait, the
//! `struct nvmet_fabrics_ops` built once from it, and the C callbacks that turn the core's
//! pointers into the transport's own types.

use super::{bindings, port, Ctrl, CtrlId, HasRequest, HasSqCq, PortConfig};
use crate::rdma::{
    cqe::{placed_slot, HasSlot},
    kernel_gaps::slot::{Owner, CORE_TAG},
};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    error::VTABLE_DEFAULT_ERROR,
    ffi::{c_char, c_int},
    prelude::*,
    sync::{Arc, ArcBorrow},
};

/// Transport types (`trtype`).
pub(crate) mod trtype {
    /// NVMe over RDMA.
    pub(crate) const RDMA: u32 = super::bindings::NVMF_TRTYPE_RDMA;
}

/// What a transport offers (`nvmet_fabrics_ops.flags`).
pub(crate) mod flags {
    /// Keyed SGL data blocks (the host's memory, by rkey).
    pub(crate) const KEYED_SGLS: u32 = super::bindings::NVMF_KEYED_SGLS;
    /// Protection information beside the data.
    pub(crate) const METADATA_SUPPORTED: u32 = super::bindings::NVMF_METADATA_SUPPORTED;
}

/// A fabrics transport's answers to the nvmet core (`struct nvmet_fabrics_ops`).
///
/// The core finds the transport's objects through the ones it was given: the
/// `nvmet_req` of every request the transport passes to `nvmet_req_init` is embedded in a
/// [`Transport::Request`], whose submission queue is the [`super::SqCq`] of a
/// [`Transport::Queue`] held in an `Arc` ([`super::SqCq::enter`] takes it so). That promise
/// is made where the transport calls `nvmet_req_init` ([`super::Request::init`]), and both
/// objects stay alive until the request's `queue_response` returned.
#[vtable]
pub(crate) trait Transport: Sized + 'static {
    /// The transport's state of an enabled port, from `add_port` until `remove_port`.
    type Port: Send + Sync;
    /// The transport's queue, which embeds an [`super::SqCq`]: its set-up makes the pair
    /// keep it ([`super::SqCq::keep`]) and its release destroys the pair, which gives it
    /// back.
    type Queue: HasSqCq + Send + Sync + 'static;
    /// The transport's object that embeds each request's `nvmet_req`.
    type Request: HasRequest;

    /// `trtype`: one of [`trtype`].
    const TRTYPE: u32;
    /// Data descriptors per command the transport accepts (`msdbd`).
    const MSDBD: u32;
    /// What the transport offers: [`flags`].
    const FLAGS: u32;

    /// configfs enables a port of this transport type: settle its parameters (they can
    /// be written back through `config`) and start listening.
    fn add_port(config: PortConfig<'_>) -> Result<Self::Port>;

    /// configfs disables a port `add_port` enabled; the core may free it afterwards.
    fn remove_port(port: Self::Port);

    /// The core completed `request`, of `queue`: send its data and its response. `owner`
    /// is the request's slot, which the core gave back (resumed by the layer: the only
    /// way to take a slot back from the core).
    fn queue_response(
        queue: ArcBorrow<'_, Self::Queue>,
        request: &Self::Request,
        owner: Owner<'_, <Self::Request as HasSlot>::State>,
    );

    /// The core deletes a controller: end its queues.
    fn delete_ctrl(ctrl: CtrlId);

    /// Writes the address a discovery log entry names for `port` into `out`
    /// (`NVMF_TRADDR_SIZE` bytes), for a host on `queue`; `configured` is the port's
    /// `addr_traddr`. `port` is `None` if the port is being removed.
    fn disc_traddr(
        _queue: &Self::Queue,
        _port: Option<&Self::Port>,
        _configured: &[u8],
        _out: &mut [u8],
    ) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Writes the address of controller `ctrl`'s host into `out`; returns its length.
    fn host_traddr(_ctrl: CtrlId, _out: &mut [u8]) -> Result<usize> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The largest data transfer of `ctrl`, as a power of two of pages.
    fn get_mdts(_ctrl: &Ctrl) -> u8 {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The largest queue `ctrl` may create.
    fn get_max_queue_size(_ctrl: &Ctrl) -> u16 {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// What `nvmet_port.priv` holds for an enabled port.
struct PortEntry<T: Transport> {
    /// The link the transport's [`super::EnabledPort`] handles use; revoked at removal.
    link: Arc<port::PortLink>,
    /// The transport's state, set once `add_port` succeeded.
    data: Option<T::Port>,
}

/// A handle on transport `T`'s ops table ([`Ops::handle`]), which its requests name
/// when they start ([`super::Request::init`]): the core keeps the table's address in each
/// request's `nvmet_req.ops` and calls through it until the request completed, so the
/// handle borrows the table for `'static`.
pub(crate) struct OpsRef<T: Transport>(&'static Ops<T>);

impl<T: Transport> Clone for OpsRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Transport> Copy for OpsRef<T> {}

impl<T: Transport> OpsRef<T> {
    /// The table.
    pub(super) fn as_raw(self) -> *const bindings::nvmet_fabrics_ops {
        self.0.as_raw()
    }
}

/// Transport `T`'s ops table (`struct nvmet_fabrics_ops`), built at compile time. The
/// core keeps its address for as long as the transport is registered, and in every
/// request started with it until that request completed, so a transport keeps it in a
/// `static`: both [`Registration::new`] and [`Ops::handle`] borrow it for `'static`.
///
/// ```ignore
/// static OPS: Ops<MyTransport> = Ops::new();
///
/// let registration = Registration::new(&OPS)?;
/// // ... `OPS.handle()` for `Request::init`.
/// ```
pub(crate) struct Ops<T: Transport> {
    table: bindings::nvmet_fabrics_ops,
    _transport: PhantomData<T>,
}

// SAFETY: the table is immutable (neither this layer nor the core writes it); it holds
// only function pointers, constants and the owning module.
unsafe impl<T: Transport> Sync for Ops<T> {}

impl<T: Transport> Ops<T> {
    /// The table of `T`, owned by this module (the one this layer is compiled into, whose
    /// code the callbacks are).
    pub(crate) const fn new() -> Self {
        let mut table: bindings::nvmet_fabrics_ops = pin_init::zeroed();
        table.owner = (&raw const kernel::bindings::__this_module)
            .cast_mut()
            .cast();
        table.type_ = T::TRTYPE;
        table.msdbd = T::MSDBD;
        table.flags = T::FLAGS;
        table.queue_response = Some(Self::queue_response);
        table.add_port = Some(Self::add_port);
        table.remove_port = Some(Self::remove_port);
        table.delete_ctrl = Some(Self::delete_ctrl);
        if T::HAS_DISC_TRADDR {
            table.disc_traddr = Some(Self::disc_traddr);
        }
        if T::HAS_HOST_TRADDR {
            table.host_traddr = Some(Self::host_traddr);
        }
        if T::HAS_GET_MDTS {
            table.get_mdts = Some(Self::get_mdts);
        }
        if T::HAS_GET_MAX_QUEUE_SIZE {
            table.get_max_queue_size = Some(Self::get_max_queue_size);
        }
        Self {
            table,
            _transport: PhantomData,
        }
    }

    /// The table, for the core's calls.
    pub(crate) fn as_raw(&self) -> *const bindings::nvmet_fabrics_ops {
        &self.table
    }

    /// A handle on the table for [`super::Request::init`]; the table is borrowed for
    /// `'static`, as the requests that name it may outlive any registration.
    pub(crate) fn handle(&'static self) -> OpsRef<T> {
        OpsRef(self)
    }

    /// `add_port`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core with a live port, under `nvmet_config_sem`.
    unsafe extern "C" fn add_port(port: *mut bindings::nvmet_port) -> c_int {
        let Some(raw) = NonNull::new(port) else {
            return EINVAL.to_errno();
        };
        // SAFETY: the core passes a live port, under `nvmet_config_sem`. configfs's stores
        // to the port's attributes check only `enabled`, still false, without that lock,
        // so one may write `portid` meanwhile: read with a volatile read, and no reference
        // to the port is formed (see `PortConfig`).
        let id =
            u16::from_le(unsafe { core::ptr::read_volatile(&raw const (*port).disc_addr.portid) });
        let entry = port::new_link(raw, id)
            .and_then(|link| Ok(KBox::new(PortEntry::<T> { link, data: None }, GFP_KERNEL)?));
        let mut entry = match entry {
            Ok(entry) => entry,
            Err(e) => return e.to_errno(),
        };
        // SAFETY: the core is enabling the port, which stays live through this call, for
        // which `config` lives.
        let config = unsafe { PortConfig::new(raw, &entry.link) };
        match T::add_port(config) {
            Ok(data) => {
                entry.data = Some(data);
                // SAFETY: the port is live (as above). `priv` is the transport's while the
                // port is enabled (configfs never writes it; the core, only under
                // `nvmet_config_sem`, which it holds through this call), and `remove_port`
                // takes the entry back. Written through the raw pointer: no reference to
                // the port, whose other fields configfs may write, is formed.
                unsafe { (*port).priv_ = KBox::into_raw(entry).cast() };
                0
            }
            Err(e) => {
                // The core calls no `remove_port` for a port that failed to enable: cut the
                // link of any handle the transport kept (and wait for its holds).
                entry.link.cut();
                e.to_errno()
            }
        }
    }

    /// `remove_port`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core, under `nvmet_config_sem`, once for a port `add_port`
    /// enabled.
    unsafe extern "C" fn remove_port(port: *mut bindings::nvmet_port) {
        // SAFETY: `add_port` stored a `KBox<PortEntry<T>>` in `priv`; the core calls
        // `remove_port` once, so ownership returns once.
        let entry = unsafe { KBox::from_raw((*port).priv_.cast::<PortEntry<T>>()) };
        // SAFETY: as above.
        unsafe { (*port).priv_ = core::ptr::null_mut() };
        let PortEntry { link, data } = KBox::into_inner(entry);
        if let Some(data) = data {
            T::remove_port(data);
        }
        // The core may free the port once this returns and `nvmet_wq` is flushed: the
        // transport's handles see nothing from now on, and the flush waits for the holds
        // of the queues that still name the port.
        link.cut();
    }

    /// `queue_response`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core for a request the transport passed to `nvmet_req_init`.
    unsafe extern "C" fn queue_response(req: *mut bindings::nvmet_req) {
        // SAFETY: a request started by `Request::init::<T>`: at `OFFSET` from a
        // `T::Request` that lives in its queue, which the queue's sq keeps until its
        // destroy waited for every sq reference; one is held through this call (the
        // request's, which `nvmet_req_complete` puts after `queue_response` returned, or,
        // for a command `nvmet_req_init` refused, the starter's).
        let request = unsafe { super::request::object_of::<T::Request>(req) };
        // (Logged if the object's slot is not where its type says: `init` started no
        // request in such an object.)
        let Some(slot) = placed_slot(request) else {
            return;
        };
        // SAFETY: this is the core's answer for the request, whose slot `Request::init`,
        // `execute` and `complete` handed off to the core's tag: the core holds nothing of
        // the state any more. That slot is this one: `init` started the request only in
        // the state of the slot at `SLOT_OFFSET` from the object (`Request::placed`),
        // which only that slot's owner reaches to hand it over, and `placed_slot` finds
        // this one there (borrowed from the object, it is the same slot).
        let Some(owner) = (unsafe { slot.resume(CORE_TAG) }) else {
            pr_err!("the nvmet core completed a request whose slot it does not hold; ignored\n");
            return;
        };
        // SAFETY: as above, with the sq reference held through this call; `owner` is the
        // request's slot, resumed from the core.
        let Some(queue) = (unsafe { super::request::Request::queue_of::<T>(req, true) }) else {
            pr_err!("a completed request names no queue; its response is not sent\n");
            // (back to the core's tag, as it was: nothing takes the slot again)
            // SAFETY: the core's tag, below `LOCAL_TAGS`; a second answer of the core would
            // find the slot as it did before this one.
            unsafe { owner.hand_off_to_event(CORE_TAG) };
            return;
        };
        T::queue_response(queue, request, owner);
    }

    /// `delete_ctrl`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core with a controller (only its identity is used).
    unsafe extern "C" fn delete_ctrl(ctrl: *mut bindings::nvmet_ctrl) {
        T::delete_ctrl(CtrlId::from_raw(ctrl));
    }

    /// `disc_traddr`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core, under `nvmet_config_sem`, with a request of one of the
    /// transport's queues, the queue's port and a buffer of `NVMF_TRADDR_SIZE` bytes.
    unsafe extern "C" fn disc_traddr(
        req: *mut bindings::nvmet_req,
        port: *mut bindings::nvmet_port,
        traddr: *mut c_char,
    ) {
        // SAFETY: a request started by `Request::init::<T>` and being executed: it holds
        // its sq, which keeps the queue, until its completion. The port is
        // allocated (the core flushes its workqueue, where queues are released, before it
        // frees a port); `tr_ops` and `priv` cannot change during the call
        // (`nvmet_config_sem`), and while `tr_ops` is this transport's table, `priv` holds
        // its entry (the port may have been removed, or enabled again for another
        // transport, since the queue connected). configfs's stores do not take that lock,
        // and a removed port's `addr_traddr` may be written meanwhile: it is copied with a
        // volatile read, never borrowed. The buffer has `NVMF_TRADDR_SIZE` bytes.
        let (queue, entry, configured, out) = unsafe {
            let ours = core::ptr::eq((*port).tr_ops, (*req).ops);
            (
                super::request::Request::queue_of::<T>(req, false),
                if ours {
                    (*port).priv_.cast::<PortEntry<T>>().as_ref()
                } else {
                    None
                },
                core::ptr::read_volatile(&raw const (*port).disc_addr.traddr),
                core::slice::from_raw_parts_mut(
                    traddr.cast::<u8>(),
                    bindings::NVMF_TRADDR_SIZE as usize,
                ),
            )
        };
        let Some(queue) = queue else {
            return;
        };
        T::disc_traddr(
            &queue,
            entry.and_then(|e| e.data.as_ref()),
            &configured,
            out,
        );
    }

    /// `host_traddr`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core with a controller of the transport and a buffer of `len`
    /// bytes.
    unsafe extern "C" fn host_traddr(
        ctrl: *mut bindings::nvmet_ctrl,
        traddr: *mut c_char,
        len: usize,
    ) -> isize {
        // SAFETY: the core passes a buffer of `len` bytes.
        let out = unsafe { core::slice::from_raw_parts_mut(traddr.cast::<u8>(), len) };
        match T::host_traddr(CtrlId::from_raw(ctrl), out) {
            Ok(written) => written as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// `get_mdts`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core with a live controller.
    unsafe extern "C" fn get_mdts(ctrl: *const bindings::nvmet_ctrl) -> u8 {
        // SAFETY: the core passes a live controller for the call.
        T::get_mdts(unsafe { Ctrl::from_raw(ctrl) })
    }

    /// `get_max_queue_size`.
    ///
    /// # Safety
    ///
    /// Called by the nvmet core with a live controller.
    unsafe extern "C" fn get_max_queue_size(ctrl: *const bindings::nvmet_ctrl) -> u16 {
        // SAFETY: the core passes a live controller for the call.
        T::get_max_queue_size(unsafe { Ctrl::from_raw(ctrl) })
    }
}

/// The transport, registered with the nvmet core for its `trtype` while this exists.
///
/// # Invariants
///
/// `ops` was registered successfully and is unregistered only in `Drop`.
pub(crate) struct Registration<T: Transport> {
    ops: &'static Ops<T>,
}

impl<T: Transport> Registration<T> {
    /// Registers `ops`; `EBUSY` if another transport of the type is registered already
    /// (such as the C one: the caller says so; the core answers `EINVAL`).
    pub(crate) fn new(ops: &'static Ops<T>) -> Result<Self> {
        // SAFETY: the table is valid, lives forever (`'static`) and its callbacks are the
        // ones above.
        let ret = unsafe { bindings::nvmet_register_transport(ops.as_raw()) };
        kernel::error::to_result(ret).map_err(|_| EBUSY)?;
        // INVARIANT: registered just now.
        Ok(Self { ops })
    }
}

impl<T: Transport> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant). The core holds a module reference for every
        // enabled port, so none uses the table once the module is being unloaded.
        unsafe { bindings::nvmet_unregister_transport(self.ops.as_raw()) };
    }
}
