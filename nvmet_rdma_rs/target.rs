// SPDX-License-Identifier: GPL-2.0

//! The transport's global state: its ports, its queues, and the workqueue their setup
//! and release run on. The nvmet core's callbacks find it through [`Target::get`].

use crate::port::Port;
use crate::queue::Queue;
use crate::rdma::{Device, OwnedQueue};
use crate::recv::RecvSlots;
use crate::srq::SrqSet;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    time::msecs_to_jiffies,
};

kernel::sync::global_lock! {
    // SAFETY: initialised in `Target::install`, before the transport registers.
    unsafe(uninit) static TARGET: Mutex<Option<Arc<Target>>> = None;
}

/// Ports and queues of the loaded transport.
#[pin_data]
pub(crate) struct Target {
    #[pin]
    ports: Mutex<KVec<Arc<Port>>>,
    #[pin]
    queues: Mutex<KVec<Arc<Queue>>>,
    /// SRQs of the devices with queues (`use_srq`).
    #[pin]
    srq_sets: Mutex<KVec<SrqSet>>,
    #[pin]
    emptied: CondVar,
    next_queue: AtomicU32,
    workqueue: OwnedQueue,
    /// The transport's ops table, for `nvmet_req_init` (stable: boxed, registered until
    /// unload).
    ops: usize,
}

impl Target {
    /// Creates the state for the transport with ops table `ops` and makes it what
    /// [`Target::get`] finds.
    pub(crate) fn install(
        ops: *const crate::rdma::bindings::nvmet_fabrics_ops,
    ) -> Result<Arc<Self>> {
        // SAFETY: called once, at module load, before anything uses `TARGET`.
        unsafe { TARGET.init() };
        let workqueue = OwnedQueue::new(c"nvmet_rdma_rs")?;
        let target = Arc::pin_init(
            pin_init!(Self {
                ports <- new_mutex!(KVec::new()),
                queues <- new_mutex!(KVec::new()),
                srq_sets <- new_mutex!(KVec::new()),
                emptied <- new_condvar!(),
                next_queue: AtomicU32::new(1),
                workqueue,
                ops: ops as usize,
            }),
            GFP_KERNEL,
        )?;
        *TARGET.lock() = Some(target.clone());
        Ok(target)
    }

    /// The loaded transport's state (`None` while loading or unloading).
    pub(crate) fn get() -> Option<Arc<Self>> {
        TARGET.lock().clone()
    }

    /// Forgets the state, at unload: after [`Target::close_all`].
    pub(crate) fn uninstall() {
        *TARGET.lock() = None;
    }

    /// The transport's ops table.
    pub(crate) fn ops(&self) -> *const crate::rdma::bindings::nvmet_fabrics_ops {
        self.ops as *const _
    }

    /// The workqueue for queue setup and release.
    pub(crate) fn workqueue(&self) -> &OwnedQueue {
        &self.workqueue
    }

    /// A number for a new queue (its name in logs and debugfs).
    pub(crate) fn next_queue_number(&self) -> u32 {
        self.next_queue.fetch_add(1, Relaxed)
    }

    pub(crate) fn add_port(&self, port: Arc<Port>) -> Result {
        self.ports.lock().push(port, GFP_KERNEL)?;
        Ok(())
    }

    pub(crate) fn remove_port(&self, port: &Arc<Port>) {
        let mut ports = self.ports.lock();
        if let Some(index) = ports.iter().position(|p| Arc::ptr_eq(p, port)) {
            let _ = ports.remove(index);
        }
    }

    /// Calls `f` for every enabled port.
    pub(crate) fn for_each_port(&self, mut f: impl FnMut(&Arc<Port>)) {
        for port in self.ports.lock().iter() {
            f(port);
        }
    }

    pub(crate) fn add_queue(&self, queue: Arc<Queue>) -> Result {
        self.queues.lock().push(queue, GFP_KERNEL)?;
        Ok(())
    }

    /// Takes a released queue off the list; the SRQs of its device go with its last
    /// queue.
    pub(crate) fn remove_queue(&self, queue: &Queue) {
        let mut queues = self.queues.lock();
        if let Some(index) = queues.iter().position(|q| core::ptr::eq(&**q, queue)) {
            let _ = queues.remove(index);
        }
        let device = queue.device_key();
        let device_idle = !queues.iter().any(|q| q.device_key() == device);
        drop(queues);
        if device_idle {
            // (made under this lock, freed under it; queues still holding a set's slots
            // keep them)
            self.srq_sets.lock().retain(|set| !set.is_on(device));
        }
        self.emptied.notify_all();
    }

    /// The SRQ slots for a queue on `device` with `inline_size` bytes of in-capsule data
    /// and completion vector `vector`; the device's SRQs are made on first use. `None`
    /// if the device has no SRQs.
    pub(crate) fn shared_recv(
        &self,
        device: &Device,
        inline_size: u32,
        vector: u32,
    ) -> Result<Option<Arc<RecvSlots>>> {
        let mut sets = self.srq_sets.lock();
        if let Some(set) = sets.iter().find(|set| set.serves(device, inline_size)) {
            return Ok(set.for_vector(vector));
        }
        let set = SrqSet::new(device, inline_size)?;
        let slots = set.for_vector(vector);
        sets.push(set, GFP_KERNEL)?;
        Ok(slots)
    }

    /// Calls `f` for every queue.
    pub(crate) fn for_each_queue(&self, mut f: impl FnMut(&Arc<Queue>)) {
        for queue in self.queues.lock().iter() {
            f(queue);
        }
    }

    /// Disconnects every queue `which` selects (their release follows on the workqueue).
    pub(crate) fn close_queues(&self, which: impl Fn(&Queue) -> bool) {
        let mut chosen = KVec::new();
        for queue in self.queues.lock().iter() {
            if which(queue) && chosen.push(queue.clone(), GFP_KERNEL).is_err() {
                break;
            }
        }
        for queue in &chosen {
            queue.close(c"port or controller going away");
        }
    }

    /// Disconnects every queue on `device` and waits until they are released; returns
    /// how many there were.
    pub(crate) fn end_queues_on(&self, device: &Device) -> usize {
        let on_device = |queue: &Queue| queue.is_on_device(device);
        let ended = self.queues.lock().iter().filter(|q| on_device(q)).count();
        self.close_queues(on_device);
        self.wait_released(on_device);
        // Their releases end on the nvmet workqueue: done once it is flushed, before the
        // device goes.
        crate::nvmet::flush_nvmet_workqueue();
        ended
    }

    /// Waits until no queue `which` selects is left on the list.
    fn wait_released(&self, which: impl Fn(&Queue) -> bool) {
        let mut queues = self.queues.lock();
        while queues.iter().any(|q| which(q)) {
            // Queues were told to close; wake up now and then to re-check.
            let _ = self
                .emptied
                .wait_interruptible_timeout(&mut queues, msecs_to_jiffies(500));
        }
    }

    /// Disconnects every queue and waits until all are released (for unload).
    pub(crate) fn close_all(&self) {
        self.close_queues(|_| true);
        self.wait_released(|_| true);
        self.workqueue.drain();
        // The last releases may still be finishing there.
        crate::nvmet::flush_nvmet_workqueue();
    }
}
