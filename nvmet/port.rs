// SPDX-License-Identifier: GPL-2.0

//! Ports (`struct nvmet_port`, `/sys/kernel/config/nvmet/ports/N`): their configuration
//! while the transport enables one, and a handle that stays usable afterwards.

use super::bindings;
use crate::rdma::SocketAddr;
use core::ptr::NonNull;
use kernel::{prelude::*, revocable::Revocable, sync::Arc};

/// A configfs port the core is enabling, lent to [`super::Transport::add_port`].
pub(crate) struct PortConfig<'a> {
    port: &'a mut bindings::nvmet_port,
    link: &'a Arc<PortLink>,
}

/// The text of a NUL-padded configfs string field.
fn field_text(field: &[u8]) -> &[u8] {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    &field[..len]
}

impl<'a> PortConfig<'a> {
    /// The configuration of `port`, which `link` refers to.
    pub(super) fn new(port: &'a mut bindings::nvmet_port, link: &'a Arc<PortLink>) -> Self {
        Self { port, link }
    }

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

    /// A handle on the port for the transport to keep while it is enabled.
    pub(crate) fn enabled(&self) -> EnabledPort {
        EnabledPort {
            link: self.link.clone(),
            address: core::ptr::from_ref(&*self.port) as usize,
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
/// which the core may free the port).
pub(super) type PortLink = Revocable<RawPort>;

/// Makes the link of `port`, which the core is enabling.
pub(super) fn new_link(port: NonNull<bindings::nvmet_port>) -> Result<Arc<PortLink>> {
    // INVARIANT: the core is enabling the port; `remove_port` revokes the link.
    Arc::pin_init(Revocable::new(RawPort(port)), GFP_KERNEL)
}

/// A transport's handle on a port it enabled, from [`PortConfig::enabled`]; once the core
/// removed the port, its accessors see nothing.
#[derive(Clone)]
pub(crate) struct EnabledPort {
    link: Arc<PortLink>,
    /// The port's address, for [`EnabledPort::as_raw`].
    address: usize,
}

impl EnabledPort {
    /// `param_pi_enable`; false once the port was removed.
    pub(crate) fn pi_enabled(&self) -> bool {
        self.link
            .try_access_with(|port| {
                // SAFETY: the port is live until the link is revoked (`RawPort`). configfs
                // refuses to change an enabled port's parameters (a write racing with
                // `add_port` aside, as for the C transports), so meanwhile only this
                // transport writes the field.
                unsafe { core::ptr::read_volatile(&raw const (*port.0.as_ptr()).pi_enable) }
            })
            .unwrap_or(false)
    }

    /// Switches `param_pi_enable` off, for controllers created from now on (configfs then
    /// shows 0); nothing once the port was removed.
    pub(crate) fn disable_pi(&self) {
        self.link.try_access_with(|port| {
            // SAFETY: as in `pi_enabled`.
            unsafe { core::ptr::write_volatile(&raw mut (*port.0.as_ptr()).pi_enable, false) }
        });
    }

    /// The port, for `nvmet_req.port` of the requests of its queues. Using it after the
    /// port's `remove_port` returned is the caller's to avoid.
    pub(crate) fn as_raw(&self) -> *mut bindings::nvmet_port {
        self.address as *mut bindings::nvmet_port
    }
}
