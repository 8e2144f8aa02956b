// SPDX-License-Identifier: GPL-2.0

//! Ports (`struct nvmet_port`, `/sys/kernel/config/nvmet/ports/N`): their configuration
//! while the transport enables one, and a handle that stays usable afterwards.

use super::{bindings, workqueue::nvmet_workqueue};
use crate::rdma::SocketAddr;
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    revocable::Revocable,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc, Completion,
    },
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

/// A configfs port the core is enabling, lent to [`super::Transport::add_port`].
///
/// configfs's stores to a port's attributes (`addr_*`, `param_*` in
/// `drivers/nvme/target/configfs.c`) take no lock: they check `enabled`, which the core
/// sets only once `add_port` returned, and write the field with plain stores. So a store
/// can write a field while `add_port` reads it (as it can for the C transports): the
/// fields are read and written here with volatile (`READ_ONCE`/`WRITE_ONCE`-style)
/// accesses through the raw pointer, never through a reference to the port, and a racing
/// store can only make a value (say, `addr_traddr`) come out mixed, which the parsing
/// refuses or the transport settles like any other value.
///
/// # Invariants
///
/// `port` is a port the core is enabling (its `add_port` runs), live for `'a`.
pub(crate) struct PortConfig<'a> {
    port: NonNull<bindings::nvmet_port>,
    link: &'a Arc<PortLink>,
}

/// The text of a NUL-padded configfs string field.
fn field_text(field: &[u8]) -> &[u8] {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    &field[..len]
}

impl<'a> PortConfig<'a> {
    /// The configuration of `port`, which `link` refers to.
    ///
    /// # Safety
    ///
    /// `port` is a port the core is enabling (from the transport's `add_port`, for the
    /// call), live for `'a`.
    pub(super) unsafe fn new(port: NonNull<bindings::nvmet_port>, link: &'a Arc<PortLink>) -> Self {
        // INVARIANT: the caller's promise.
        Self { port, link }
    }

    /// The port's number (`portid`).
    pub(crate) fn id(&self) -> u16 {
        // SAFETY: the port is live (type invariant); a configfs store may write the field
        // meanwhile (see the type's documentation), hence the volatile read.
        u16::from_le(unsafe {
            core::ptr::read_volatile(&raw const (*self.port.as_ptr()).disc_addr.portid)
        })
    }

    /// `addr_traddr`:`addr_trsvcid` as a socket address of family `addr_adrfam`; `EINVAL`
    /// with a log line if they do not make one.
    pub(crate) fn address(&self) -> Result<SocketAddr> {
        let port = self.port.as_ptr();
        // SAFETY: as in `id`: copies, read with volatile reads.
        let (adrfam, traddr, trsvcid) = unsafe {
            (
                core::ptr::read_volatile(&raw const (*port).disc_addr.adrfam),
                core::ptr::read_volatile(&raw const (*port).disc_addr.traddr),
                core::ptr::read_volatile(&raw const (*port).disc_addr.trsvcid),
            )
        };
        let traddr = field_text(&traddr);
        let trsvcid = field_text(&trsvcid);
        let family_ok = match u32::from(adrfam) {
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
        // SAFETY: as in `id`.
        unsafe { core::ptr::read_volatile(&raw const (*self.port.as_ptr()).inline_data_size) }
    }

    /// Sets the in-capsule data size the port really offers.
    pub(crate) fn set_inline_data_size(&mut self, size: i32) {
        // SAFETY: as in `id`; the core reads the field after `add_port` returned (under
        // `nvmet_config_sem`, which it holds through the call).
        unsafe { core::ptr::write_volatile(&raw mut (*self.port.as_ptr()).inline_data_size, size) }
    }

    /// `param_max_queue_size` (negative: not set).
    pub(crate) fn max_queue_size(&self) -> i32 {
        // SAFETY: as in `id`.
        unsafe { core::ptr::read_volatile(&raw const (*self.port.as_ptr()).max_queue_size) }
    }

    /// Sets the queue size limit the port really offers.
    pub(crate) fn set_max_queue_size(&mut self, size: i32) {
        // SAFETY: as in `set_inline_data_size`.
        unsafe { core::ptr::write_volatile(&raw mut (*self.port.as_ptr()).max_queue_size, size) }
    }

    /// A handle on the port for the transport to keep while it is enabled.
    pub(crate) fn enabled(&self) -> EnabledPort {
        EnabledPort {
            link: self.link.clone(),
            address: self.port.as_ptr() as usize,
        }
    }
}

/// The port a [`PortLink`] refers to.
///
/// # Invariants
///
/// Points to a port the transport enabled, until the port's `remove_port` revokes the
/// [`PortLink`] that holds it.
pub(super) struct RawPort(NonNull<bindings::nvmet_port>);

// SAFETY: a port is not bound to a thread; its fields the handle touches are read and
// written with volatile accesses (see `EnabledPort`).
unsafe impl Send for RawPort {}
// SAFETY: as above.
unsafe impl Sync for RawPort {}

/// The link from the transport's handles to an enabled port, cut by `remove_port` (after
/// which the core may free the port, once its workqueue is flushed), and the count of the
/// [`PortHold`]s that keep the port from being freed.
///
/// # Invariants
///
/// `holds` counts the live [`PortHold`]s on the port, plus one while the link is not cut;
/// a hold is taken only while `port` is not revoked. `released` is completed when `holds`
/// reaches zero, which happens once: after the cut, when the last hold goes. Once
/// [`PortLink::cut`] revoked the link with holds left, a wait for `released` is queued on
/// `nvmet_wq`, so the core's flush of `nvmet_wq` before it frees the port returns only once
/// no hold is left.
#[pin_data]
pub(super) struct PortLink {
    #[pin]
    port: Revocable<RawPort>,
    /// The live [`PortHold`]s, plus one until the cut.
    holds: Atomic<usize>,
    /// Completed when the last hold went after the cut.
    #[pin]
    released: Completion,
    /// The port's number, for log lines.
    id: u16,
    /// Waits on `nvmet_wq` for the holds once the port was removed.
    #[pin]
    wait_work: Work<PortLink>,
}

impl_has_work! {
    impl HasWork<Self> for PortLink { self.wait_work }
}

impl WorkItem for PortLink {
    type Pointer = Arc<PortLink>;

    /// Sleeps until the removed port's last hold went.
    fn run(this: Arc<PortLink>) {
        this.released.wait_for_completion();
    }
}

impl PortLink {
    /// Cuts the link at the port's removal: the transport's handles see nothing from now
    /// on and no new hold is taken. If holds are left, queues on `nvmet_wq` a wait for
    /// them, which the core's flush before it frees the port waits for.
    ///
    /// The wait holds one of `nvmet_wq`'s workers until the holds go. A transport ends the
    /// removed port's queues first (their releases, which give the holds up, queued on
    /// `nvmet_wq` before this wait, as the C transports queue theirs), so the wait follows
    /// them rather than keeping them from running.
    pub(super) fn cut(self: &Arc<Self>) {
        self.port.revoke();
        // (Revoked, and past the grace period of any hold taken before: the count only
        // goes down from here.)
        // INVARIANT: the link's own count goes, once (the link is cut once).
        if self.put() {
            return;
        }
        // INVARIANT: holds are left: the wait is queued (once: the link is cut once).
        if nvmet_workqueue().enqueue(self.clone()).is_err() {
            pr_err!(
                "port {}: the wait for its queues is queued twice\n",
                self.id
            );
        }
    }

    /// Takes one count off `holds`; completes `released` and returns true if it was the
    /// last.
    fn put(&self) -> bool {
        if self.holds.fetch_sub(1, Full) != 1 {
            return false;
        }
        self.released.complete_all();
        true
    }

    /// The live holds on the port, without the link's own count (for tests).
    #[cfg(CONFIG_KUNIT)]
    pub(super) fn holds(&self) -> usize {
        let cut = self.port.try_access_with(|_| ()).is_none();
        self.holds.load(Relaxed) - usize::from(!cut)
    }
}

/// Makes the link of `port` (number `id`), which the core is enabling.
pub(super) fn new_link(port: NonNull<bindings::nvmet_port>, id: u16) -> Result<Arc<PortLink>> {
    // INVARIANT: the core is enabling the port; `remove_port` cuts the link; no hold
    // exists yet: the count is the link's own.
    Arc::pin_init(
        try_pin_init!(PortLink {
            port <- Revocable::new(RawPort(port)),
            holds: Atomic::new(1),
            released <- Completion::new(),
            id,
            wait_work <- new_work!("PortLink::wait_work"),
        }),
        GFP_KERNEL,
    )
}

/// A transport's handle on a port it enabled, from [`PortConfig::enabled`]; once the core
/// removed the port, its accessors see nothing.
#[derive(Clone)]
pub(crate) struct EnabledPort {
    link: Arc<PortLink>,
    /// The port's address, for [`PortHold::as_raw`].
    address: usize,
}

impl EnabledPort {
    /// `param_pi_enable`; false once the port was removed.
    pub(crate) fn pi_enabled(&self) -> bool {
        self.link
            .port
            .try_access_with(|port| {
                // SAFETY: the port is live until the link is revoked (`RawPort`). configfs
                // refuses to change an enabled port's parameters, but its stores take no
                // lock: one that checked `enabled` before it was set may still write the
                // field (see `PortConfig`), hence volatile accesses, no reference.
                unsafe { core::ptr::read_volatile(&raw const (*port.0.as_ptr()).pi_enable) }
            })
            .unwrap_or(false)
    }

    /// Switches `param_pi_enable` off, for controllers created from now on (configfs then
    /// shows 0); nothing once the port was removed.
    pub(crate) fn disable_pi(&self) {
        self.link.port.try_access_with(|port| {
            // SAFETY: as in `pi_enabled`.
            unsafe { core::ptr::write_volatile(&raw mut (*port.0.as_ptr()).pi_enable, false) }
        });
    }

    /// A hold on the port, for a queue that came in through it to name it in its requests
    /// ([`super::SqCq::new`]); `ENODEV` once the port was removed.
    pub(crate) fn hold(&self) -> Result<PortHold> {
        self.link
            .port
            .try_access_with(|_| {
                // INVARIANT: counted while the link is not revoked (inside its read-side
                // section, which `cut` waits for before it reads the count).
                self.link.holds.fetch_add(1, Relaxed);
                PortHold {
                    link: self.link.clone(),
                    address: self.address,
                    held: Atomic::new(true),
                }
            })
            .ok_or(ENODEV)
    }
}

/// Keeps a port from being freed, even after its removal, until it is released (or
/// dropped): the core frees a removed port only after a flush of `nvmet_wq`, which waits
/// for the holds (see [`PortLink`]).
///
/// # Invariants
///
/// Counted once in its link's `holds` while `held` is true; `address` is the port's.
pub(crate) struct PortHold {
    link: Arc<PortLink>,
    address: usize,
    held: Atomic<bool>,
}

impl PortHold {
    /// The port, for `nvmet_req.port`: not freed while the hold is held.
    pub(super) fn as_raw(&self) -> *mut bindings::nvmet_port {
        self.address as *mut bindings::nvmet_port
    }

    /// Gives the hold up (once; later calls and the drop do nothing).
    pub(super) fn release(&self) {
        // INVARIANT: the count goes down once, as `held` goes false.
        if self.held.xchg(false, Full) {
            self.link.put();
        }
    }
}

impl Drop for PortHold {
    fn drop(&mut self) {
        self.release();
    }
}
