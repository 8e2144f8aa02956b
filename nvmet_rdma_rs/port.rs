// SPDX-License-Identifier: GPL-2.0

//! Ports: what `add_port` makes of a configfs port, and its RDMA CM listener.

#![forbid(unsafe_code)]

use crate::nvmet::{EnabledPort, PortConfig};
use crate::queue::Queue;
use crate::rdma::{CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, Device, SocketAddr};
use crate::target::Target;
use crate::wire::{queue_size, CmReject, ConnectData};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    time::msecs_to_jiffies,
    workqueue::{impl_has_delayed_work, new_delayed_work, DelayedWork, WorkItem},
};

/// `NVMET_RDMA_DEFAULT_INLINE_DATA_SIZE`: one page.
const DEFAULT_INLINE_DATA_SIZE: i32 = kernel::page::PAGE_SIZE as i32;
/// `NVMET_RDMA_MAX_INLINE_DATA_SIZE`: 16 KiB.
const MAX_INLINE_DATA_SIZE: i32 = 16 * 1024;
/// `NVMET_RDMA_BACKLOG`: the listen backlog, and how many queues may be torn down at
/// once before a new controller is refused.
pub(crate) const BACKLOG: i32 = 128;
/// How often a lost listener is tried again, as the C transport's repair work does.
const REPAIR_RETRY_MS: u32 = 5000;

/// Counters of a port, summed over its queues as they go.
#[derive(Default)]
pub(crate) struct PortStats {
    /// Connections accepted.
    pub(crate) connects: AtomicU64,
    /// Connection requests refused (bad private data, no resources).
    pub(crate) rejects: AtomicU64,
}

/// A port's listener, and whether the port may listen at all.
struct ListenerSlot {
    /// The listening id; `None` while the port is set up or repaired, or once disabled.
    id: Option<CmId<Listener>>,
    /// `remove_port` ran: nothing may listen again (a repair in progress stops).
    disabled: bool,
}

/// An enabled port.
#[pin_data]
pub(crate) struct Port {
    id: u16,
    address: SocketAddr,
    /// In-capsule data accepted per command, in bytes.
    inline_size: u32,
    /// The deepest I/O queue a host may ask for.
    max_queue_size: u32,
    /// The nvmet port, for `nvmet_req.port` (valid until `remove_port`, which tears down
    /// this port's queues before it returns) and its `param_pi_enable`.
    nvmet: EnabledPort,
    target: Arc<Target>,
    #[pin]
    listener: Mutex<ListenerSlot>,
    pub(crate) stats: PortStats,
    /// Re-creates the listener after its device went away or its address changed
    /// (RDMA CM waits for the lost id to be destroyed, which its handler cannot do).
    #[pin]
    repair: DelayedWork<Port>,
    /// Failed attempts of the repair under way (the first one is logged).
    repair_failures: AtomicU32,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for Port { self.repair }
}

/// The listening id's handler.
struct Listener {
    port: Arc<Port>,
}

impl Port {
    /// `add_port`: settles the port's parameters as the C transport does and listens.
    pub(crate) fn enable(mut config: PortConfig<'_>) -> Result<Arc<Self>> {
        let target = Target::get().ok_or(ENODEV)?;
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
        let nvmet = config.enabled();
        let port_target = target.clone();
        let port = Arc::pin_init(
            pin_init!(Self {
                id,
                address,
                inline_size: inline as u32,
                max_queue_size: max_queue_size as u32,
                nvmet,
                target: port_target,
                listener <- new_mutex!(ListenerSlot {
                    id: None,
                    disabled: false,
                }),
                stats: PortStats::default(),
                repair_failures: AtomicU32::new(0),
                repair <- new_delayed_work!("Port::repair"),
            }),
            GFP_KERNEL,
        )?;
        // Listed before it listens: nothing may fail once hosts can connect.
        target.add_port(port.clone())?;
        // Listens under the listener's lock, as the repair does: a repair queued by an
        // event on the new id waits, and then finds it stored.
        let mut slot = port.listener.lock();
        match port.listen() {
            Ok(listener) => slot.id = Some(listener),
            Err(e) => {
                // A repair queued meanwhile must not listen for a port nvmet never enabled.
                slot.disabled = true;
                drop(slot);
                pr_err!("port {}: cannot listen on {}: {:?}\n", id, address, e);
                port.cancel_repair();
                target.remove_port(&port);
                return Err(e);
            }
        }
        drop(slot);
        pr_info!("enabling port {} ({})\n", id, address);
        Ok(port)
    }

    /// A listening id on the port's address.
    fn listen(self: &Arc<Self>) -> Result<CmId<Listener>> {
        let listener = CmId::new(Arc::new(Listener { port: self.clone() }, GFP_KERNEL)?)?;
        listener.set_afonly()?;
        listener.bind(&self.address)?;
        listener.listen(BACKLOG)?;
        Ok(listener)
    }

    /// `remove_port`: stops listening (and any repair) and tears down the port's queues.
    pub(crate) fn disable(self: Arc<Self>) {
        let listener = {
            let mut slot = self.listener.lock();
            slot.disabled = true;
            slot.id.take()
        };
        drop(listener);
        self.cancel_repair();
        self.target.remove_port(&self);
        self.target.close_queues(|queue| queue.is_on(&self));
        pr_info!("disabling port {} ({})\n", self.id, self.address);
    }

    /// Cancels a queued repair, or waits for a running one; after it, the repair cannot be
    /// queued again. A retry queued with a delay would otherwise keep the port until it
    /// ran.
    fn cancel_repair(self: &Arc<Self>) {
        crate::rdma::workqueue::disable_delayed_work(self);
    }

    /// The nvmet port, for requests.
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

    /// The target the port belongs to.
    pub(crate) fn target(&self) -> &Arc<Target> {
        &self.target
    }
}

impl CmHandler for Listener {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        match event.kind() {
            kind @ (CmEventKind::DeviceRemoval | CmEventKind::AddrChange) => {
                // The id cannot be destroyed from its own handler: the repair does it.
                let port = &this.port;
                pr_warn!(
                    "port {}: listener lost ({:?}); re-creating it\n",
                    port.id,
                    kind
                );
                let _ = port
                    .target
                    .workqueue()
                    .queue()
                    .enqueue_delayed(port.clone(), 0);
            }
            kind => pr_info!("port {}: listener event {:?}\n", this.port.id, kind),
        }
    }

    fn connect_request(this: ArcBorrow<'_, Self>, request: ConnectRequest<'_>) {
        let port = &this.port;
        let data = match ConnectData::parse(request.event().private_data(), port.max_queue_size) {
            Ok(data) => data,
            Err(reason) => {
                pr_err!(
                    "port {}: refusing a connection from {}: {:?}\n",
                    port.id,
                    request.peer(),
                    reason
                );
                port.stats.rejects.fetch_add(1, Relaxed);
                let _ = request.reject(&reason.encode());
                return;
            }
        };
        if let Err(e) = Queue::start(port, data, request) {
            port.stats.rejects.fetch_add(1, Relaxed);
            if e == ENODEV {
                // (a host reconnecting while the device's removal ends its queues)
                pr_info!(
                    "port {}: refusing a connection: its device is going away\n",
                    port.id
                );
            } else {
                pr_err!("port {}: cannot take a connection: {:?}\n", port.id, e);
            }
        }
    }
}

impl WorkItem for Port {
    type Pointer = Arc<Port>;

    /// The listener's device went away or its address changed: destroy the lost id and
    /// listen again, retrying every few seconds until it works or the port is disabled
    /// (the device may come back later).
    fn run(this: Arc<Port>) {
        let mut slot = this.listener.lock();
        // Destroying the lost id lets the device's removal complete. Its handler does
        // not take this lock, so waiting for a running handler here cannot deadlock.
        drop(slot.id.take());
        if slot.disabled {
            return;
        }
        match this.listen() {
            Ok(listener) => {
                slot.id = Some(listener);
                this.repair_failures.store(0, Relaxed);
                pr_info!("port {}: listening again on {}\n", this.id, this.address);
            }
            Err(e) => {
                if this.repair_failures.fetch_add(1, Relaxed) == 0 {
                    pr_warn!(
                        "port {}: cannot listen on {} ({:?}); retrying every {} s\n",
                        this.id,
                        this.address,
                        e,
                        REPAIR_RETRY_MS / 1000
                    );
                }
                drop(slot);
                // No worker sleeps meanwhile; `disable` cancels the retry.
                let queue = this.target.workqueue().queue();
                let _ = queue.enqueue_delayed(this.clone(), msecs_to_jiffies(REPAIR_RETRY_MS));
            }
        }
    }
}

/// The reject a queue that cannot be set up sends.
pub(crate) const NO_RESOURCES: CmReject = CmReject::NoResources;
