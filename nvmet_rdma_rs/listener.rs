// SPDX-License-Identifier: GPL-2.0

//! A port's RDMA CM listener: it takes the hosts' connect requests and starts queues for
//! them, and is re-created when its device goes away or its address changes.

#![forbid(unsafe_code)]

use crate::nvmet::{trace, PortConfig};
use crate::port::{why, Port, BACKLOG, NO_RESOURCES};
use crate::queue::Queue;
use crate::rdma::{CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest};
use crate::target::Target;
use crate::test_hooks::HoldPoint;
use crate::wire::ConnectData;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    time::msecs_to_jiffies,
    workqueue::{impl_has_delayed_work, new_delayed_work, DelayedWork, WorkItem},
};

/// How often a lost listener is tried again, as the C transport's repair work does.
const REPAIR_RETRY_MS: u32 = 5000;

/// A port's listening id, and whether the port may listen at all.
struct ListenerSlot {
    /// The listening id; `None` while the port is set up or repaired, or once disabled.
    id: Option<CmId<Listener>>,
    /// `remove_port` ran: nothing may listen again (a repair in progress stops).
    disabled: bool,
}

/// An enabled port and its listener: what `add_port` gives the nvmet core.
#[pin_data]
pub(crate) struct PortListener {
    port: Arc<Port>,
    target: Arc<Target>,
    #[pin]
    listening: Mutex<ListenerSlot>,
    /// Re-creates the listener after its device went away or its address changed
    /// (RDMA CM waits for the lost id to be destroyed, which its handler cannot do).
    #[pin]
    repair: DelayedWork<PortListener>,
    /// Failed attempts of the repair under way (the first one is logged).
    repair_failures: AtomicU32,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for PortListener { self.repair }
}

/// The listening id's handler.
struct Listener {
    port: Arc<PortListener>,
}

impl PortListener {
    /// `add_port`: settles the port's parameters as the C transport does and listens.
    pub(crate) fn enable(config: PortConfig<'_>) -> Result<Arc<Self>> {
        let target = Target::get().ok_or(ENODEV)?;
        let port = Arc::new(Port::settle(config)?, GFP_KERNEL)?;
        let (id, address) = (port.id(), port.address());
        let (listener_port, listener_target) = (port.clone(), target.clone());
        let this = Arc::pin_init(
            pin_init!(Self {
                port: listener_port,
                target: listener_target,
                listening <- new_mutex!(ListenerSlot {
                    id: None,
                    disabled: false,
                }),
                repair_failures: AtomicU32::new(0),
                repair <- new_delayed_work!("PortListener::repair"),
            }),
            GFP_KERNEL,
        )?;
        // Listed before it listens: nothing may fail once hosts can connect.
        target.add_port(port.clone())?;
        // Listens under the listener's lock, as the repair does: a repair queued by an
        // event on the new id waits, and then finds it stored.
        let mut slot = this.listening.lock();
        match this.listen() {
            Ok(listener) => slot.id = Some(listener),
            Err(e) => {
                // A repair queued meanwhile must not listen for a port nvmet never enabled.
                slot.disabled = true;
                drop(slot);
                pr_err!("port {}: cannot listen on {}: {:?}\n", id, address, e);
                this.cancel_repair();
                target.remove_port(&port);
                return Err(e);
            }
        }
        drop(slot);
        pr_info!("enabling port {} ({})\n", id, address);
        Ok(this)
    }

    /// A listening id on the port's address.
    fn listen(self: &Arc<Self>) -> Result<CmId<Listener>> {
        let listener = CmId::new(Arc::new(Listener { port: self.clone() }, GFP_KERNEL)?)?;
        listener.set_afonly()?;
        listener.bind(&self.port.address())?;
        listener.listen(BACKLOG)?;
        Ok(listener)
    }

    /// `remove_port`: stops listening (and any repair) and tears down the port's queues.
    pub(crate) fn disable(self: Arc<Self>) {
        let listener = {
            let mut slot = self.listening.lock();
            slot.disabled = true;
            slot.id.take()
        };
        drop(listener);
        self.cancel_repair();
        let port = &self.port;
        self.target.remove_port(port);
        self.target
            .close_queues(|queue| queue.is_on(port), why::PORT_REMOVED);
        pr_info!("disabling port {} ({})\n", port.id(), port.address());
    }

    /// Runs a pending repair now (it finds the port disabled and returns) and waits for
    /// any running one; after it, no repair is queued again: `disable` set `disabled`, and
    /// a repair queues its retry only under the lock that flag is read under. A retry
    /// queued with a delay would otherwise keep the port until it ran.
    fn cancel_repair(self: &Arc<Self>) {
        crate::rdma::kernel_gaps::workqueue::flush_delayed_work(self);
    }

    /// The port.
    pub(crate) fn port(&self) -> &Port {
        &self.port
    }
}

impl CmHandler for Listener {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        match event.kind() {
            kind @ (CmEventKind::DeviceRemoval | CmEventKind::AddrChange) => {
                // The id cannot be destroyed from its own handler: the repair does it.
                let listener = &this.port;
                pr_warn!(
                    "port {}: listener lost ({:?}); re-creating it\n",
                    listener.port.id(),
                    kind
                );
                // (on the system queue, which is never destroyed: `disable` flushes it)
                let _ = kernel::workqueue::system().enqueue_delayed(listener.clone(), 0);
            }
            kind => pr_info!("port {}: listener event {:?}\n", this.port.port.id(), kind),
        }
    }

    fn connect_request(this: ArcBorrow<'_, Self>, request: ConnectRequest<'_>) {
        let (target, port) = (&this.port.target, &this.port.port);
        let data = match ConnectData::parse(request.event().private_data(), port.max_queue_size()) {
            Ok(data) => data,
            Err(reason) => {
                pr_err!(
                    "port {}: refusing a connection from {}: {:?}\n",
                    port.id(),
                    request.peer(),
                    reason
                );
                port.stats.reject(reason);
                trace::reject_event(port.id(), reason as u8);
                let _ = request.reject(&reason.encode());
                return;
            }
        };
        trace::connect_request_event(
            port.id(),
            data.qid,
            data.recv_queue_size,
            data.send_queue_size,
        );
        crate::test_hooks::hold(HoldPoint::Parsed, &request.peer());
        if let Err(e) = Queue::start(target, port, data, request) {
            // (rejected for want of resources)
            port.stats.reject(NO_RESOURCES);
            if e == ENODEV {
                // (a host reconnecting while the device's removal ends its queues)
                pr_info!(
                    "port {}: refusing a connection: its device is going away\n",
                    port.id()
                );
            } else {
                pr_err!("port {}: cannot take a connection: {:?}\n", port.id(), e);
            }
        }
    }
}

impl WorkItem for PortListener {
    type Pointer = Arc<PortListener>;

    /// The listener's device went away or its address changed: destroy the lost id and
    /// listen again, retrying every few seconds until it works or the port is disabled
    /// (the device may come back later).
    fn run(this: Arc<PortListener>) {
        let mut slot = this.listening.lock();
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
                let port = &this.port;
                pr_info!(
                    "port {}: listening again on {}\n",
                    port.id(),
                    port.address()
                );
            }
            Err(e) => {
                if this.repair_failures.fetch_add(1, Relaxed) == 0 {
                    pr_warn!(
                        "port {}: cannot listen on {} ({:?}); retrying every {} s\n",
                        this.port.id(),
                        this.port.address(),
                        e,
                        REPAIR_RETRY_MS / 1000
                    );
                }
                // No worker sleeps meanwhile. Queued under the lock, so that `disable`,
                // which sets `disabled` under it and then flushes, sees this retry.
                let _ = kernel::workqueue::system()
                    .enqueue_delayed(this.clone(), msecs_to_jiffies(REPAIR_RETRY_MS));
                drop(slot);
            }
        }
    }
}
