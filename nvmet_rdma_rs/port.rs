// SPDX-License-Identifier: GPL-2.0

//! Ports: the parameters `add_port` settles for a configfs port, and its counters. The
//! port's RDMA CM listener is `listener`'s.

#![forbid(unsafe_code)]

use crate::command::{latency::LatencySnapshot, QueueLatency, TransportError, TRANSPORT_ERRORS};
use crate::nvmet::{EnabledPort, PortConfig};
use crate::rdma::{Device, SocketAddr};
use crate::wire::{queue_size, CmReject};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use kernel::{new_mutex, prelude::*, sync::Mutex};

/// `NVMET_RDMA_DEFAULT_INLINE_DATA_SIZE`: one page.
const DEFAULT_INLINE_DATA_SIZE: i32 = kernel::page::PAGE_SIZE as i32;
/// `NVMET_RDMA_MAX_INLINE_DATA_SIZE`: 16 KiB.
const MAX_INLINE_DATA_SIZE: i32 = 16 * 1024;
/// `NVMET_RDMA_BACKLOG`: the listen backlog, and how many queues may be torn down at
/// once before a new controller is refused.
pub(crate) const BACKLOG: i32 = 128;

/// Why a queue's teardown started, as a port counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// The host disconnected (RDMA CM `DISCONNECTED`, `TIMEWAIT_EXIT`).
    HostDisconnect = 0,
    /// The nvmet core deleted the queue's controller (keep-alive timeout, a fatal error,
    /// the subsystem or host going).
    ControllerDeleted = 1,
    /// Its port was removed or disabled.
    PortRemoved = 2,
    /// Its RDMA device went away.
    DeviceRemoved = 3,
    /// The module is unloading.
    Unload = 4,
    /// A transport error on the queue (failed completion or post, malformed capsule, a
    /// host over its depth), or a connection that failed after its accept.
    Error = 5,
    /// The queue could not be set up (its connect request was rejected).
    SetupFailed = 6,
}

/// Kinds of [`Teardown`].
pub(crate) const TEARDOWNS: usize = 7;

/// Names of the kinds of [`Teardown`], by index (`stats.json`).
pub(crate) const TEARDOWN_NAMES: [&str; TEARDOWNS] = [
    "host_disconnect",
    "controller_deleted",
    "port_removed",
    "device_removed",
    "unload",
    "error",
    "setup_failed",
];

/// The reasons the target closes queues itself, which say what ended them.
pub(crate) mod why {
    use kernel::prelude::*;
    /// `delete_ctrl`.
    pub(crate) const CTRL_DELETED: &CStr = c"controller deleted";
    /// The port is removed.
    pub(crate) const PORT_REMOVED: &CStr = c"port removed";
    /// The device is going away.
    pub(crate) const DEVICE_GOING: &CStr = c"device going away";
    /// The module unloads.
    pub(crate) const UNLOAD: &CStr = c"module unloading";
    /// The set-up failed (the connect request is rejected): what `rdma::lifecycle` says.
    pub(crate) const SETUP_FAILED: &CStr = c"setup failure";
    /// The listener did not hand the request over.
    pub(crate) const NOT_ADOPTED: &CStr = c"not adopted";
}

impl Teardown {
    /// The kind of a teardown closed with `why`: the target's own reasons above, or the
    /// name of the RDMA CM event that closed it (`rdma_event_msg`).
    pub(crate) fn of(why: &CStr) -> Self {
        match why.to_bytes() {
            b"disconnected" | b"timewait exit" => Self::HostDisconnect,
            b"device removal" => Self::DeviceRemoved,
            w if w == why::CTRL_DELETED.to_bytes() => Self::ControllerDeleted,
            w if w == why::PORT_REMOVED.to_bytes() => Self::PortRemoved,
            w if w == why::DEVICE_GOING.to_bytes() => Self::DeviceRemoved,
            w if w == why::UNLOAD.to_bytes() => Self::Unload,
            w if w == why::SETUP_FAILED.to_bytes() || w == why::NOT_ADOPTED.to_bytes() => {
                Self::SetupFailed
            }
            _ => Self::Error,
        }
    }
}

/// NVMe/RDMA CM reject statuses a port counts ([`CmReject`] as an index).
pub(crate) const REJECT_REASONS: usize = 7;

/// Counters of a port, summed over its queues as they go.
#[derive(Default)]
pub(crate) struct PortStats {
    /// Connections accepted.
    pub(crate) connects: AtomicU64,
    /// Connection requests refused (bad private data, no resources).
    pub(crate) rejects: AtomicU64,
    /// ... by the NVMe/RDMA CM status sent.
    pub(crate) rejects_by_reason: [AtomicU64; REJECT_REASONS],
    /// Queues whose teardown started, by [`Teardown`] (also counted for the whole
    /// target, which keeps the counts of ports removed).
    pub(crate) torn_down: [AtomicU64; TEARDOWNS],
    /// Transport errors on its queues, by kind (kept when the queues go).
    pub(crate) errors_by_kind: [AtomicU64; TRANSPORT_ERRORS],
}

impl PortStats {
    /// Counts a connect request rejected with `reason`.
    pub(crate) fn reject(&self, reason: CmReject) {
        self.rejects.fetch_add(1, Relaxed);
        if let Some(count) = self.rejects_by_reason.get(reason as usize) {
            count.fetch_add(1, Relaxed);
        }
    }

    /// Counts a transport error of kind `kind` on one of the port's queues.
    pub(crate) fn count_error(&self, kind: TransportError) {
        self.errors_by_kind[kind as usize].fetch_add(1, Relaxed);
    }
}

/// The latency histograms of a port's released queues, and the port's reset baseline.
struct PortLatency {
    /// The released queues' counts, folded in as each is released.
    released: KBox<LatencySnapshot>,
    /// The port's counts (released and live queues) at the last reset, if any.
    base: Option<KBox<LatencySnapshot>>,
}

/// An enabled port: what its queues need to know of it.
pub(crate) struct Port {
    id: u16,
    address: SocketAddr,
    /// In-capsule data accepted per command, in bytes.
    inline_size: u32,
    /// The deepest I/O queue a host may ask for.
    max_queue_size: u32,
    /// The nvmet port: its `param_pi_enable`, and the holds its queues take on it (which
    /// keep it allocated for their requests after `remove_port`).
    nvmet: EnabledPort,
    pub(crate) stats: PortStats,
    latency: Pin<KBox<Mutex<PortLatency>>>,
}

impl Port {
    /// Settles the port's parameters as the C transport does (written back to `config`).
    pub(crate) fn settle(mut config: PortConfig<'_>) -> Result<Self> {
        let id = config.id();
        let address = config.address()?;
        let inline = match config.inline_data_size() {
            size if size < 0 => DEFAULT_INLINE_DATA_SIZE,
            size if size > MAX_INLINE_DATA_SIZE => {
                pr_warn!(
                    "port {}: param_inline_data_size {} is over the limit; using {}\n",
                    id,
                    size,
                    MAX_INLINE_DATA_SIZE
                );
                MAX_INLINE_DATA_SIZE
            }
            size => size,
        };
        config.set_inline_data_size(inline);
        let max_queue_size = match config.max_queue_size() {
            size if size < 0 => queue_size::DEFAULT as i32,
            // The nvmet core keeps it at 16 or more: so must the queues we accept.
            size => size.clamp(16, queue_size::MAX as i32),
        };
        config.set_max_queue_size(max_queue_size);
        Ok(Self {
            id,
            address,
            inline_size: inline as u32,
            max_queue_size: max_queue_size as u32,
            stats: PortStats::default(),
            latency: KBox::pin_init(
                new_mutex!(PortLatency {
                    released: LatencySnapshot::new_zero()?,
                    base: None,
                }),
                GFP_KERNEL,
            )?,
            nvmet: config.enabled(),
        })
    }

    /// The nvmet port, for its queues to hold.
    pub(crate) fn nvmet(&self) -> &EnabledPort {
        &self.nvmet
    }

    /// Whether the port listens on the wildcard address.
    pub(crate) fn listens_on_any(&self) -> bool {
        self.address.is_any()
    }

    /// In-capsule data accepted per command.
    pub(crate) fn inline_size(&self) -> u32 {
        self.inline_size
    }

    /// The port's number.
    pub(crate) fn id(&self) -> u16 {
        self.id
    }

    /// The port's address.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Whether queues on `device` carry T10-PI: the port's `param_pi_enable`, unless the
    /// device cannot offload PI. Then, as the C transport does, the port's PI is switched
    /// off with one log line, and the port serves plain I/O.
    pub(crate) fn pi_on(&self, device: &Device) -> bool {
        if !self.nvmet.pi_enabled() {
            return false;
        }
        if device.supports_integrity() {
            return true;
        }
        pr_warn!(
            "port {}: T10-PI is not supported by device {}; disabling it\n",
            self.id,
            device.name().to_str().unwrap_or("?")
        );
        self.nvmet.disable_pi();
        false
    }

    /// The deepest I/O queue a host may ask for.
    pub(crate) fn max_queue_size(&self) -> u32 {
        self.max_queue_size
    }

    /// Folds the histograms of a released queue of the port into its totals (by the
    /// target, with the queue list locked: a report sees the queue live or folded in,
    /// once).
    pub(crate) fn fold_released(&self, latency: &QueueLatency) {
        latency.add_to(&mut self.latency.lock().released);
    }

    /// Completes `into`, which holds the port's live queues' counts (read with the queue
    /// list locked), into the port's figures since its last reset.
    pub(crate) fn latency_totals(&self, into: &mut LatencySnapshot) {
        let latency = self.latency.lock();
        into.add(&latency.released);
        if let Some(base) = &latency.base {
            into.subtract(base);
        }
    }

    /// Takes a reset's baseline: `live` holds the port's live queues' counts now (read
    /// with the queue list locked).
    pub(crate) fn reset_latency(&self, mut live: KBox<LatencySnapshot>) {
        let mut latency = self.latency.lock();
        live.add(&latency.released);
        latency.base = Some(live);
    }
}

/// The reject a queue that cannot be set up sends.
pub(crate) const NO_RESOURCES: CmReject = CmReject::NoResources;
