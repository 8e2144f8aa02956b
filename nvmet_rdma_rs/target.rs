// SPDX-License-Identifier: GPL-2.0

//! The transport's global state: its ports and its queues. The nvmet core's callbacks
//! find it through [`Target::get`].
//!
//! It sits below the ports' listeners and the queues, which hold it: it knows a queue
//! only through [`ListedQueue`].

#![forbid(unsafe_code)]

use crate::command::{latency::LatencySnapshot, InFlight, Io, QueueLatency, QueueStats, SlotLists};
use crate::nvmet::{global, CtrlId, OpsRef};
use crate::port::{why, Port, Teardown, BACKLOG, TEARDOWNS};
use crate::rdma::{Clock, Device, SocketAddr};
use crate::recv::SharedSlots;
use crate::srq::SrqSet;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use kernel::{
    fmt, new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, CondVar, Mutex},
};

/// What the target needs to know of a queue it lists.
pub(crate) trait ListedQueue: Send + Sync {
    /// The RDMA device the queue is on, as an address (only compared).
    fn device_key(&self) -> usize;
    /// Whether it is an admin queue (the first of a new controller).
    fn is_admin(&self) -> bool;
    /// Whether the queue is being torn down.
    fn is_disconnecting(&self) -> bool;
    /// Whether the queue came in through `port`.
    fn is_on(&self, port: &Port) -> bool;
    /// The controller the queue belongs to, once the host's Connect installed it.
    fn ctrl(&self) -> Option<CtrlId>;
    /// The host's address.
    fn peer(&self) -> SocketAddr;
    /// Starts the queue's teardown; its release takes it off the list.
    fn close(self: ArcBorrow<'_, Self>, why: &CStr);
    /// debugfs `queues`: one line for the queue.
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// What the reports (`report`) show of the queue.
    fn report(&self) -> QueueReport<'_>;
}

/// What a queue shows of itself in the reports.
pub(crate) struct QueueReport<'a> {
    /// Its number (logs, debugfs).
    pub(crate) number: u32,
    /// The port it came in on.
    pub(crate) port: &'a Arc<Port>,
    /// Its NVMe queue id.
    pub(crate) qid: u16,
    /// The host's address.
    pub(crate) peer: SocketAddr,
    /// `connecting`, `live` or `disconnecting`.
    pub(crate) state: &'static str,
    /// The host's receive and send queue sizes.
    pub(crate) depth: (u32, u32),
    /// Response slots (0 before the set-up).
    pub(crate) rsp_slots: u32,
    /// Whether its commands arrive in an SRQ.
    pub(crate) srq: bool,
    /// The name of the RDMA device it is on.
    pub(crate) device: &'a str,
    /// Its buffers and slots, once set up, and its lists: what its commands wait for
    /// ([`QueueReport::in_flight`]).
    pub(crate) io: Option<&'a Io>,
    pub(crate) lists: &'a SlotLists,
    /// Its counters.
    pub(crate) stats: &'a QueueStats,
    /// Its histograms.
    pub(crate) latency: &'a QueueLatency,
    /// Their counts at the last reset.
    pub(crate) latency_base: &'a Mutex<Option<KBox<LatencySnapshot>>>,
}

impl QueueReport<'_> {
    /// Its commands by what they wait for, now (reads each response slot's state).
    pub(crate) fn in_flight(&self) -> InFlight {
        self.io
            .map(|io| io.in_flight(self.lists))
            .unwrap_or_default()
    }
}

/// The NVMe/RDMA transport, as the nvmet core sees it (its callbacks: `fabrics`).
pub(crate) struct NvmetRdma;

/// The mark of a departed device's entry in `Target::removing` (device addresses are
/// aligned: the low bit is free).
const DEPARTED: usize = 1;

/// Ports and queues of the loaded transport.
#[pin_data]
pub(crate) struct Target {
    #[pin]
    ports: Mutex<KVec<Arc<Port>>>,
    #[pin]
    queues: Mutex<KVec<Arc<dyn ListedQueue>>>,
    /// SRQs of the devices with queues (`use_srq`).
    #[pin]
    srq_sets: Mutex<KVec<SrqSet>>,
    #[pin]
    emptied: CondVar,
    /// Devices whose queues `end_queues_on` is ending (addresses), or ended (address with
    /// [`DEPARTED`] set: the rest of the kernel's removal of the device runs after our
    /// RDMA client's, and a connect that lands meanwhile must not be accepted on it);
    /// 0 = free entry: `add_queue` refuses queues on them all. A departed entry is freed
    /// when a device is added at its address (`device_added`), or taken by the next
    /// removal that finds no free entry. Changed and read with `queues` locked; with
    /// every entry held by a removal under way, `removing_any` counts the other removals
    /// and refuses all.
    removing: [AtomicUsize; 4],
    removing_any: AtomicUsize,
    /// Where `removing_entry` looks first for a departed entry to take (with `queues`
    /// locked).
    evict_next: AtomicUsize,
    next_queue: AtomicU32,
    /// The cycle counter's rate, for the latency reports.
    clock: Clock,
    /// Queues whose teardown started, by [`Teardown`], over every port (removed ones
    /// too).
    torn_down: [AtomicU64; TEARDOWNS],
    /// The transport's ops table, for starting requests (registered until unload).
    ops: OpsRef<NvmetRdma>,
}

impl Target {
    /// Creates the state for the transport with ops table `ops` and makes it what
    /// [`Target::get`] finds.
    pub(crate) fn install(ops: OpsRef<NvmetRdma>) -> Result<Arc<Self>> {
        let target = Arc::pin_init(
            pin_init!(Self {
                ports <- new_mutex!(KVec::new()),
                queues <- new_mutex!(KVec::new()),
                srq_sets <- new_mutex!(KVec::new()),
                emptied <- new_condvar!(),
                removing: Default::default(),
                removing_any: AtomicUsize::new(0),
                evict_next: AtomicUsize::new(0),
                next_queue: AtomicU32::new(1),
                clock: Clock::new(),
                torn_down: Default::default(),
                ops,
            }),
            GFP_KERNEL,
        )?;
        global::install(target.clone())?;
        Ok(target)
    }

    /// The loaded transport's state (`None` while loading or unloading).
    pub(crate) fn get() -> Option<Arc<Self>> {
        global::get::<Self>()
    }

    /// Forgets the state, at unload: after [`Target::close_all`].
    pub(crate) fn uninstall() {
        global::uninstall();
    }

    /// The transport's ops table.
    pub(crate) fn ops(&self) -> OpsRef<NvmetRdma> {
        self.ops
    }

    /// Counts a queue's teardown, which started for `cause`.
    pub(crate) fn count_teardown(&self, cause: Teardown) {
        self.torn_down[cause as usize].fetch_add(1, Relaxed);
    }

    /// Queues whose teardown started, by [`Teardown`] as an index.
    pub(crate) fn teardowns(&self) -> &[AtomicU64; TEARDOWNS] {
        &self.torn_down
    }

    /// The cycle counter's rate, measured since the module loaded.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
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

    /// Lists `queue`, unless its device is going away, or it would start a controller
    /// while more than [`BACKLOG`] queues are still being torn down (a reconnect storm;
    /// the C transport's guard). `publish` runs first, under the list's lock once room is
    /// made: what it stores (the CM id) is there for any close that finds the queue.
    /// Nothing fails after `publish`.
    pub(crate) fn add_queue(&self, queue: Arc<dyn ListedQueue>, publish: impl FnOnce()) -> Result {
        let mut queues = self.queues.lock();
        let device = queue.device_key();
        if self.removing_any.load(Relaxed) != 0
            || self
                .removing
                .iter()
                .any(|d| d.load(Relaxed) & !DEPARTED == device)
        {
            return Err(ENODEV);
        }
        if queue.is_admin() {
            let going = queues.iter().filter(|q| q.is_disconnecting()).count();
            if going > BACKLOG as usize {
                pr_warn!(
                    "refusing a new controller's admin queue from {}: {} queues are still being torn down\n",
                    queue.peer(),
                    going
                );
                return Err(EBUSY);
            }
        }
        queues.reserve(1, GFP_KERNEL)?;
        publish();
        // (room was made above, under this lock)
        let _ = queues.push_within_capacity(queue);
        Ok(())
    }

    /// Takes a released queue off the list; the SRQs of its device go with its last
    /// queue.
    pub(crate) fn remove_queue(&self, queue: &dyn ListedQueue) {
        let mut queues = self.queues.lock();
        if let Some(index) = queues.iter().position(|q| core::ptr::addr_eq(&**q, queue)) {
            let _ = queues.remove(index);
            // (under the list's lock: a report finds the queue listed or folded in)
            let report = queue.report();
            report.port.fold_released(report.latency);
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
    ) -> Result<Option<Arc<SharedSlots>>> {
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
    pub(crate) fn for_each_queue(&self, mut f: impl FnMut(&dyn ListedQueue)) {
        for queue in self.queues.lock().iter() {
            f(&**queue);
        }
    }

    /// Calls `f` with the list of queues, locked: no queue is added or released (folded
    /// into its port's figures) meanwhile.
    pub(crate) fn with_queues<R>(&self, f: impl FnOnce(&[Arc<dyn ListedQueue>]) -> R) -> R {
        f(&self.queues.lock())
    }

    /// The enabled ports.
    pub(crate) fn ports(&self) -> Result<KVec<Arc<Port>>> {
        let ports = self.ports.lock();
        let mut copy = KVec::with_capacity(ports.len(), GFP_KERNEL)?;
        for port in ports.iter() {
            copy.push(port.clone(), GFP_KERNEL)?;
        }
        Ok(copy)
    }

    /// Disconnects every queue `which` selects, saying `why` (their release follows on
    /// the workqueue). (Under the list's lock, allocating nothing: `close` only marks the
    /// queue and queues its release.)
    pub(crate) fn close_queues(&self, which: impl Fn(&dyn ListedQueue) -> bool, why: &CStr) {
        for queue in self.queues.lock().iter().filter(|q| which(&***q)) {
            queue.as_arc_borrow().close(why);
        }
    }

    /// A device was added: a departed device's entry at its address is freed (the new
    /// device takes queues).
    pub(crate) fn device_added(&self, device: &Device) {
        let key = device.as_raw() as usize;
        let _queues = self.queues.lock();
        for entry in &self.removing {
            if entry.load(Relaxed) == key | DEPARTED {
                entry.store(0, Relaxed);
            }
        }
    }

    /// The entry of `removing` a removal of the device at `key` takes: its own departed
    /// entry (the device removed again), a free one, or else the departed entry held
    /// longest; `None` if removals under way hold them all. (With `queues` locked: the
    /// load and the store that follows cannot race.)
    fn removing_entry(&self, key: usize) -> Option<&AtomicUsize> {
        let departed = |d: &&AtomicUsize| d.load(Relaxed) & DEPARTED != 0;
        self.removing
            .iter()
            .find(|d| d.load(Relaxed) == key | DEPARTED)
            .or_else(|| self.removing.iter().find(|d| d.load(Relaxed) == 0))
            .or_else(|| {
                // (in turn: the entry after the one taken last)
                let start = self.evict_next.load(Relaxed);
                let n = self.removing.len();
                let found = (0..n)
                    .map(|i| (start + i) % n)
                    .find(|&i| departed(&&self.removing[i]))?;
                self.evict_next.store((found + 1) % n, Relaxed);
                Some(&self.removing[found])
            })
    }

    /// Disconnects every queue on `device` and waits until they are released; returns
    /// how many there were. Queues on it are refused from then on, until a device is
    /// added at its address.
    pub(crate) fn end_queues_on(&self, device: &Device) -> usize {
        let key = device.as_raw() as usize;
        let mut queues = self.queues.lock();
        // From here `add_queue` refuses the device: the queues listed now are all we wait
        // for (as `nvmet_rdma_remove_one`, which closes only the queues it finds).
        let slot = self.removing_entry(key);
        if let Some(slot) = slot {
            slot.store(key, Relaxed);
        } else {
            self.removing_any.fetch_add(1, Relaxed);
        }
        let mut ended = 0;
        for queue in queues.iter().filter(|q| q.device_key() == key) {
            queue.as_arc_borrow().close(why::DEVICE_GOING);
            ended += 1;
        }
        // Uninterruptible: with a signal pending (`rdma link delete`, `rmmod`) an
        // interruptible wait returns at once, in a loop. Bounded: nothing joins the
        // device any more. `remove_queue` changes the list under this lock and notifies.
        while queues.iter().any(|q| q.device_key() == key) {
            self.emptied.wait(&mut queues);
        }
        // Still refused: a connect may land on the device before RDMA CM, whose removal
        // comes after ours, ends its listeners. (A removal that found every entry held
        // takes one now if it can.)
        if slot.is_none() {
            self.removing_any.fetch_sub(1, Relaxed);
        }
        if let Some(slot) = slot.or_else(|| self.removing_entry(key)) {
            slot.store(key | DEPARTED, Relaxed);
        }
        drop(queues);
        // Their releases end on the nvmet workqueue: done once it is flushed, before the
        // device goes.
        crate::nvmet::workqueue::flush_nvmet_workqueue();
        crate::nvmet::workqueue::flush_nvmet_aen_workqueue();
        ended
    }

    /// Disconnects every queue and waits until all are released (for unload).
    pub(crate) fn close_all(&self) {
        self.close_queues(|_| true, why::UNLOAD);
        let mut queues = self.queues.lock();
        while !queues.is_empty() {
            // (no port is enabled: nothing is added)
            self.emptied.wait(&mut queues);
        }
        drop(queues);
        // (no listener's repair is left: the core disabled every port, each flushing its
        // repair, before it let the module go)
        // The last releases may still be finishing there.
        crate::nvmet::workqueue::flush_nvmet_workqueue();
    }
}
