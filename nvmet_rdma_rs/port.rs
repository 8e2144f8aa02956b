// SPDX-License-Identifier: GPL-2.0

//! Ports: what `add_port` makes of a configfs port, and its RDMA CM listener.

use crate::nvmet::PortConfig;
use crate::queue::Queue;
use crate::rdma::{bindings, CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, SocketAddr};
use crate::target::Target;
use crate::wire::{CmReject, ConnectData};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

/// `NVMET_RDMA_DEFAULT_INLINE_DATA_SIZE`: one page.
const DEFAULT_INLINE_DATA_SIZE: i32 = kernel::page::PAGE_SIZE as i32;
/// `NVMET_RDMA_MAX_INLINE_DATA_SIZE`: 16 KiB.
const MAX_INLINE_DATA_SIZE: i32 = 16 * 1024;
/// `NVMET_RDMA_BACKLOG`.
const BACKLOG: i32 = 128;

/// Counters of a port, summed over its queues as they go.
#[derive(Default)]
pub(crate) struct PortStats {
    /// Connections accepted.
    pub(crate) connects: AtomicU64,
    /// Connection requests refused (bad private data, no resources).
    pub(crate) rejects: AtomicU64,
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
    /// The nvmet port, for `nvmet_req.port`; valid until `remove_port`, which tears down
    /// this port's queues before it returns.
    raw: usize,
    target: Arc<Target>,
    #[pin]
    listener: Mutex<Option<CmId<Listener>>>,
    pub(crate) stats: PortStats,
    /// Closes the listener when its device goes away (RDMA CM waits for that).
    #[pin]
    device_gone: Work<Port>,
}

impl_has_work! {
    impl HasWork<Self> for Port { self.device_gone }
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
            size if size < 0 => bindings::NVME_RDMA_DEFAULT_QUEUE_SIZE as i32,
            // The nvmet core keeps it at 16 or more: so must the queues we accept.
            size => size.clamp(16, bindings::NVME_RDMA_MAX_QUEUE_SIZE as i32),
        };
        config.set_max_queue_size(max_queue_size);
        if config.pi_enable() {
            pr_info!(
                "port {}: T10-PI is not offered by this transport yet; disabling it\n",
                id
            );
            config.disable_pi();
        }
        let raw = config.raw() as usize;
        let port_target = target.clone();
        let port = Arc::pin_init(
            pin_init!(Self {
                id,
                address,
                inline_size: inline as u32,
                max_queue_size: max_queue_size as u32,
                raw,
                target: port_target,
                listener <- new_mutex!(None),
                stats: PortStats::default(),
                device_gone <- new_work!("Port::device_gone"),
            }),
            GFP_KERNEL,
        )?;
        let listener = CmId::new(Arc::new(Listener { port: port.clone() }, GFP_KERNEL)?)?;
        listener.set_afonly()?;
        let listening = listener
            .bind(&address)
            .and_then(|()| listener.listen(BACKLOG));
        if let Err(e) = listening {
            pr_err!("port {}: cannot listen on {}: {:?}\n", id, address, e);
            return Err(e);
        }
        *port.listener.lock() = Some(listener);
        if let Err(e) = target.add_port(port.clone()) {
            // The listener holds the port: take it back, or both would stay.
            let listener = port.listener.lock().take();
            drop(listener);
            return Err(e);
        }
        pr_info!("enabling port {} ({})\n", id, address);
        Ok(port)
    }

    /// `remove_port`: stops listening and tears down the port's queues.
    pub(crate) fn disable(self: Arc<Self>) {
        let listener = self.listener.lock().take();
        drop(listener);
        self.target.remove_port(&self);
        self.target.close_queues(|queue| queue.is_on(&self));
        pr_info!("disabling port {} ({})\n", self.id, self.address);
    }

    /// The nvmet port, for requests.
    pub(crate) fn raw(&self) -> *mut bindings::nvmet_port {
        self.raw as *mut bindings::nvmet_port
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

    /// The target the port belongs to.
    pub(crate) fn target(&self) -> &Arc<Target> {
        &self.target
    }
}

impl CmHandler for Listener {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::DeviceRemoval => {
                // The id cannot be destroyed from its own handler: a work item does it.
                let port = this.port.clone();
                let _ = port.target.workqueue().queue().enqueue(port.clone());
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
            pr_err!("port {}: cannot take a connection: {:?}\n", port.id, e);
            port.stats.rejects.fetch_add(1, Relaxed);
        }
    }
}

impl WorkItem for Port {
    type Pointer = Arc<Port>;

    /// The listener's device went away: close the listener.
    fn run(this: Arc<Port>) {
        let listener = this.listener.lock().take();
        if listener.is_some() {
            drop(listener);
            pr_warn!(
                "port {}: its RDMA device went away; the listener is closed: re-enable the \
                 port to listen again\n",
                this.id
            );
        }
    }
}

/// The reject a queue that cannot be set up sends.
pub(crate) const NO_RESOURCES: CmReject = CmReject::NoResources;
