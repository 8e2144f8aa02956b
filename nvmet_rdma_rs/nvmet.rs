// SPDX-License-Identifier: GPL-2.0

//! The nvmet core's side of the transport: the `struct nvmet_fabrics_ops` registration
//! and its callbacks, the configfs port, and the submission/completion queue pair that
//! every transport queue embeds.
//!
//! The callbacks run the transport's Rust functions in [`crate::port`] and
//! [`crate::queue`]; this file turns the C pointers they get into references.

use crate::port::Port;
use crate::queue::Queue;
use crate::rdma::{bindings, SocketAddr};
use kernel::ffi::{c_char, c_int};
use kernel::{prelude::*, sync::Arc, types::ForeignOwnable, types::Opaque};

/// `NVMET_RDMA_MAX_MDTS`: 2^8 pages (1 MiB) per command.
const MAX_MDTS: u8 = 8;
/// `NVMET_RDMA_MAX_METADATA_MDTS`, with protection information.
const MAX_METADATA_MDTS: u8 = 5;

/// The transport, registered with the nvmet core for `trtype` rdma while it exists.
///
/// # Invariants
///
/// `ops` was registered successfully and is unregistered only in `Drop`.
pub(crate) struct Registration {
    ops: KBox<bindings::nvmet_fabrics_ops>,
}

// SAFETY: the ops table is immutable once registered.
unsafe impl Send for Registration {}
// SAFETY: as above.
unsafe impl Sync for Registration {}

impl Registration {
    /// The transport's ops table, not yet registered: its address is what requests carry,
    /// and it stays put when the box moves into [`Registration::new`].
    pub(crate) fn table(module: &'static ThisModule) -> Result<KBox<bindings::nvmet_fabrics_ops>> {
        Ok(KBox::new(
            bindings::nvmet_fabrics_ops {
                owner: module.as_ptr().cast(),
                type_: bindings::NVMF_TRTYPE_RDMA,
                msdbd: 1,
                flags: bindings::NVMF_KEYED_SGLS | bindings::NVMF_METADATA_SUPPORTED,
                queue_response: Some(queue_response),
                add_port: Some(add_port),
                remove_port: Some(remove_port),
                delete_ctrl: Some(delete_ctrl),
                disc_traddr: Some(disc_traddr),
                host_traddr: Some(host_traddr),
                get_mdts: Some(get_mdts),
                get_max_queue_size: Some(get_max_queue_size),
                ..Default::default()
            },
            GFP_KERNEL,
        )?)
    }

    /// Registers `ops` (from [`Registration::table`]). If another RDMA transport (the C
    /// `nvmet_rdma`) is registered already, fails with `EBUSY` and says so.
    pub(crate) fn new(ops: KBox<bindings::nvmet_fabrics_ops>) -> Result<Self> {
        // SAFETY: `ops` is a valid table whose heap address stays put until `Drop`
        // unregisters it; its callbacks match the nvmet core's expectations.
        let ret = unsafe { bindings::nvmet_register_transport(&*ops) };
        if ret != 0 {
            pr_err!(
                "another NVMe-oF RDMA transport is registered (is nvmet_rdma loaded?); \
                 unload it first\n"
            );
            return Err(EBUSY);
        }
        Ok(Self { ops })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant). The core holds a module reference for every
        // enabled port, so none uses the table once the module is being unloaded.
        unsafe { bindings::nvmet_unregister_transport(&*self.ops) };
    }
}

/// A configfs port (`/sys/kernel/config/nvmet/ports/N`), borrowed during a callback.
pub(crate) struct PortConfig<'a> {
    port: &'a mut bindings::nvmet_port,
}

/// The text of a NUL-padded configfs string field.
fn field_text(field: &[u8]) -> &[u8] {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    &field[..len]
}

impl PortConfig<'_> {
    /// The port's number (`portid`).
    pub(crate) fn id(&self) -> u16 {
        u16::from_le(self.port.disc_addr.portid)
    }

    /// `addr_traddr`:`addr_trsvcid` as a socket address of family `addr_adrfam`; `EINVAL`
    /// with a log line if they do not make one.
    pub(crate) fn address(&self) -> Result<SocketAddr> {
        let addr = &self.port.disc_addr;
        let traddr = field_text(&addr.traddr);
        let trsvcid = field_text(&addr.trsvcid);
        let family_ok = match u32::from(addr.adrfam) {
            bindings::NVMF_ADDR_FAMILY_IP4 => !traddr.contains(&b':'),
            bindings::NVMF_ADDR_FAMILY_IP6 => traddr.contains(&b':'),
            _ => false,
        };
        let port = core::str::from_utf8(trsvcid)
            .ok()
            .and_then(|s| s.parse::<u16>().ok());
        match (family_ok, port) {
            (true, Some(port)) if !traddr.is_empty() => SocketAddr::parse(traddr, port)
                .inspect_err(|_| pr_err!("port {}: addr_traddr is not an address\n", self.id())),
            _ => {
                pr_err!(
                    "port {}: needs addr_adrfam ipv4 or ipv6, a matching addr_traddr and a \
                     numeric addr_trsvcid\n",
                    self.id()
                );
                Err(EINVAL)
            }
        }
    }

    /// `param_inline_data_size` (negative: not set).
    pub(crate) fn inline_data_size(&self) -> i32 {
        self.port.inline_data_size
    }

    /// Sets the in-capsule data size the port really offers.
    pub(crate) fn set_inline_data_size(&mut self, size: i32) {
        self.port.inline_data_size = size;
    }

    /// `param_max_queue_size` (negative: not set).
    pub(crate) fn max_queue_size(&self) -> i32 {
        self.port.max_queue_size
    }

    /// Sets the queue size limit the port really offers.
    pub(crate) fn set_max_queue_size(&mut self, size: i32) {
        self.port.max_queue_size = size;
    }

    /// The port for `nvmet_req.port`; valid while the port is enabled.
    pub(crate) fn raw(&mut self) -> *mut bindings::nvmet_port {
        self.port
    }
}

/// An enabled port's `param_pi_enable`.
///
/// # Safety
///
/// `port` is a port this transport enabled and has not yet removed. (configfs refuses to
/// change an enabled port's parameters: meanwhile only this transport writes the field.)
pub(crate) unsafe fn port_pi_enabled(port: *mut bindings::nvmet_port) -> bool {
    // SAFETY: see the function's safety section.
    unsafe { core::ptr::read_volatile(&raw const (*port).pi_enable) }
}

/// Switches an enabled port's `param_pi_enable` off, for controllers created from now on;
/// configfs then shows 0.
///
/// # Safety
///
/// As for [`port_pi_enabled`].
pub(crate) unsafe fn disable_port_pi(port: *mut bindings::nvmet_port) {
    // SAFETY: see the function's safety section.
    unsafe { core::ptr::write_volatile(&raw mut (*port).pi_enable, false) }
}

/// Reads the port's transport state, stored by `add_port`.
///
/// # Safety
///
/// `port` is a port this transport enabled and has not yet removed.
unsafe fn port_state<'a>(port: *mut bindings::nvmet_port) -> kernel::sync::ArcBorrow<'a, Port> {
    // SAFETY: `add_port` stored an `Arc<Port>` in `priv`; `remove_port` takes it back.
    unsafe { <Arc<Port> as ForeignOwnable>::borrow((*port).priv_) }
}

/// `add_port`.
///
/// # Safety
///
/// Called by the nvmet core with a live port, under `nvmet_config_sem`.
unsafe extern "C" fn add_port(port: *mut bindings::nvmet_port) -> c_int {
    // SAFETY: see the function's safety section; nothing else uses the port meanwhile.
    let port_ref = unsafe { &mut *port };
    let config = PortConfig { port: port_ref };
    match Port::enable(config) {
        Ok(state) => {
            // SAFETY: as above; `priv` is the transport's to use while the port is enabled.
            unsafe { (*port).priv_ = state.into_foreign() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `remove_port`.
///
/// # Safety
///
/// Called by the nvmet core for a port `add_port` enabled.
unsafe extern "C" fn remove_port(port: *mut bindings::nvmet_port) {
    // SAFETY: the port was enabled by `add_port`, which stored an `Arc<Port>` in `priv`;
    // the core calls `remove_port` once, so ownership returns once.
    let state = unsafe { <Arc<Port> as ForeignOwnable>::from_foreign((*port).priv_) };
    // SAFETY: as above.
    unsafe { (*port).priv_ = core::ptr::null_mut() };
    state.disable();
}

/// `queue_response`.
///
/// # Safety
///
/// Called by the nvmet core for a request this transport passed to `nvmet_req_init`.
unsafe extern "C" fn queue_response(req: *mut bindings::nvmet_req) {
    // SAFETY: every request this transport passes to `nvmet_req_init` is a response slot's.
    unsafe { crate::command::queue_response(req) };
}

/// `delete_ctrl`.
///
/// # Safety
///
/// Called by the nvmet core with a live controller (only compared, never dereferenced).
unsafe extern "C" fn delete_ctrl(ctrl: *mut bindings::nvmet_ctrl) {
    crate::queue::delete_ctrl(ctrl.cast_const().cast());
}

/// The queue whose submission queue is `sq` (from a request or a controller).
///
/// # Safety
///
/// `sq` is the `nvme_sq` of a live [`Queue`].
unsafe fn queue_of<'a>(sq: *mut bindings::nvmet_sq) -> &'a Queue {
    // SAFETY: see the function's safety section.
    unsafe { &*Queue::from_sq(sq) }
}

/// `disc_traddr`.
///
/// # Safety
///
/// Called by the nvmet core with a request of one of our queues, its enabled port and a
/// buffer of `NVMF_TRADDR_SIZE` bytes.
unsafe extern "C" fn disc_traddr(
    req: *mut bindings::nvmet_req,
    port: *mut bindings::nvmet_port,
    traddr: *mut c_char,
) {
    // SAFETY: the core passes a live request of one of our queues, its port, and a buffer
    // of `NVMF_TRADDR_SIZE` bytes. The port may have been disabled meanwhile (`priv` NULL).
    let (queue, any, out) = unsafe {
        (
            queue_of((*req).sq),
            !(*port).priv_.is_null() && port_state(port).listens_on_any(),
            core::slice::from_raw_parts_mut(
                traddr.cast::<u8>(),
                bindings::NVMF_TRADDR_SIZE as usize,
            ),
        )
    };
    if any {
        // The wildcard is no address to give a host: name the one this host reached.
        queue.local_address().write_ip(out);
    } else {
        // SAFETY: as above.
        let configured = unsafe { &(*port).disc_addr.traddr };
        out.copy_from_slice(configured);
    }
}

/// `host_traddr`.
///
/// # Safety
///
/// Called by the nvmet core with a live controller of ours and a buffer of `len` bytes.
unsafe extern "C" fn host_traddr(
    ctrl: *mut bindings::nvmet_ctrl,
    traddr: *mut c_char,
    len: usize,
) -> isize {
    // SAFETY: the core passes a buffer of `len` bytes.
    let out = unsafe { core::slice::from_raw_parts_mut(traddr.cast::<u8>(), len) };
    let Some(target) = crate::target::Target::get() else {
        return ENODEV.to_errno() as isize;
    };
    // Not `sqs[0]`: `nvmet_sq_destroy` clears it when the admin queue goes, while the
    // controller (and its debugfs `host_traddr`) lives on with its I/O queues. A queue
    // on the list is alive while the list is locked; all of a controller's queues come
    // from its host.
    let mut written = crate::rdma::code::enotconn().to_errno() as isize;
    target.for_each_queue(|queue| {
        if written < 0 && queue.nvmet.ctrl() == ctrl.cast_const().cast() {
            written = queue.peer().write_ip(out) as isize;
        }
    });
    written
}

/// `get_mdts`.
///
/// # Safety
///
/// Called by the nvmet core with a live controller.
unsafe extern "C" fn get_mdts(ctrl: *const bindings::nvmet_ctrl) -> u8 {
    // SAFETY: the core passes a live controller.
    if unsafe { (*ctrl).pi_support } {
        MAX_METADATA_MDTS
    } else {
        MAX_MDTS
    }
}

/// `get_max_queue_size`.
///
/// # Safety
///
/// Called by the nvmet core with a live controller.
unsafe extern "C" fn get_max_queue_size(ctrl: *const bindings::nvmet_ctrl) -> u16 {
    // SAFETY: the core passes a live controller.
    if unsafe { (*ctrl).pi_support } {
        bindings::NVME_RDMA_MAX_METADATA_QUEUE_SIZE as u16
    } else {
        bindings::NVME_RDMA_MAX_QUEUE_SIZE as u16
    }
}

/// The nvmet core's workqueue: queue releases run there, as in the C transport, so that
/// the core's flush of it (before it frees a removed port) waits for them.
pub(crate) fn nvmet_workqueue() -> &'static kernel::workqueue::Queue {
    // SAFETY: `nvmet_wq` is created when the nvmet core loads, which this module depends
    // on, and destroyed only when the core unloads, after this module.
    unsafe { kernel::workqueue::Queue::from_raw(bindings::nvmet_wq.cast_const().cast()) }
}

/// Waits for every work item on the nvmet core's workqueue (at unload, for our releases).
pub(crate) fn flush_nvmet_workqueue() {
    // SAFETY: as in `nvmet_workqueue`.
    unsafe { bindings::__flush_workqueue(bindings::nvmet_wq) };
}

/// Waits for the nvmet core's asynchronous event work (on device removal, as the C
/// transport: an AEN queued for a controller of a released queue completes before the
/// device goes).
pub(crate) fn flush_nvmet_aen_workqueue() {
    // SAFETY: `nvmet_aen_wq` lives as `nvmet_wq` does (see `nvmet_workqueue`).
    unsafe { bindings::__flush_workqueue(bindings::nvmet_aen_wq) };
}

/// The nvmet submission and completion queue a transport queue embeds.
#[pin_data(PinnedDrop)]
pub(crate) struct SqCq {
    #[pin]
    sq: Opaque<bindings::nvmet_sq>,
    #[pin]
    cq: Opaque<bindings::nvmet_cq>,
    /// Whether `nvmet_sq_init` succeeded (and `nvmet_sq_destroy` is still owed).
    sq_live: core::sync::atomic::AtomicBool,
    /// Whether the cq's initial reference is still held (`nvmet_cq_put` owed).
    cq_live: core::sync::atomic::AtomicBool,
}

// SAFETY: the nvmet core synchronises its use of the queues internally (percpu refs,
// atomics); Rust code only hands out pointers to them.
unsafe impl Send for SqCq {}
// SAFETY: as above.
unsafe impl Sync for SqCq {}

impl SqCq {
    /// Initialises the pair (`nvmet_cq_init`, `nvmet_sq_init`).
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            sq: Opaque::zeroed(),
            cq <- Opaque::ffi_init(|cq: *mut bindings::nvmet_cq| {
                // SAFETY: `cq` is pinned memory of this value, uninitialised: zero it (the
                // core expects no controller, no queue id) before `nvmet_cq_init`.
                unsafe {
                    cq.write_bytes(0, 1);
                    bindings::nvmet_cq_init(cq)
                }
            }),
            cq_live: core::sync::atomic::AtomicBool::new(true),
            sq_live: core::sync::atomic::AtomicBool::new({
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
            if this.sq_live.load(core::sync::atomic::Ordering::Relaxed) {
                Ok(())
            } else {
                Err(ENOMEM)
            }
        })
    }

    /// The pair that embeds `sq`.
    ///
    /// # Safety
    ///
    /// `sq` is the `sq` of a live `SqCq`.
    pub(crate) unsafe fn from_sq(sq: *mut bindings::nvmet_sq) -> *const SqCq {
        // SAFETY: see the function's safety section.
        unsafe { kernel::container_of!(sq.cast::<Opaque<bindings::nvmet_sq>>(), SqCq, sq) }
    }

    /// Holds the sq's reference until the guard drops: `nvmet_sq_destroy` waits for it
    /// before it clears `sq->ctrl` and puts the controller. `None` once it was killed.
    pub(crate) fn enter(&self) -> Option<SqEntered<'_>> {
        // SAFETY: the sq was initialised (`new`); a killed or exited reference has
        // `__PERCPU_REF_DEAD` set, so the try then fails without using its counters.
        let live =
            unsafe { bindings::rdma_rs_percpu_ref_tryget_live(&raw mut (*self.sq.get()).ref_) };
        live.then_some(SqEntered(self))
    }

    /// The submission queue, for `nvmet_req_init` and lookups from it.
    pub(crate) fn sq(&self) -> *mut bindings::nvmet_sq {
        self.sq.get()
    }

    /// The controller the queue belongs to, once the host's Connect installed it.
    pub(crate) fn ctrl(&self) -> *const core::ffi::c_void {
        // SAFETY: the sq is initialised; `ctrl` is set once by the core's Connect handler.
        unsafe { (*self.sq.get()).ctrl.cast_const().cast() }
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
    /// queue happens to go). Sleeps: process context only.
    pub(crate) fn destroy(&self) {
        use core::sync::atomic::Ordering::AcqRel;
        if self.sq_live.swap(false, AcqRel) {
            // SAFETY: the sq was initialised and is destroyed once (the flag).
            unsafe { bindings::nvmet_sq_destroy(self.sq.get()) };
        }
        if self.cq_live.swap(false, AcqRel) {
            // SAFETY: initialised by `nvmet_cq_init`; its reference is put once (the flag),
            // after the sq, its other user, is destroyed.
            unsafe { bindings::nvmet_cq_put(self.cq.get()) };
        }
    }
}

/// A reference on a live sq, from [`SqCq::enter`].
pub(crate) struct SqEntered<'a>(&'a SqCq);

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
