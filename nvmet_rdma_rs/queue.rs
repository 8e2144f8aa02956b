// SPDX-License-Identifier: GPL-2.0

//! A queue: one RDMA connection from a host, bound to one nvmet submission queue.
//!
//! The listener adopts a valid connect request and sets the queue up (QP, buffers,
//! receives, accept) in its RDMA CM handler call, as the C transport does. Every
//! teardown — the host disconnecting, a fatal error, `delete_ctrl`, the port going away,
//! unload — marks the queue disconnecting and queues its release, which disconnects,
//! waits for the nvmet core to finish the queue's requests, drains the QP and frees
//! everything.

#![forbid(unsafe_code)]

use crate::command::{
    latency::LatencySnapshot, pending_of, Connection, Io, QueueLatency, QueueStats, SlotLists,
    TransportError, RESPONSE_SIZE,
};
use crate::nvmet::{
    sq::impl_has_sq_cq,
    trace::{self, QueueStep},
    CtrlId, OpsRef, SqCq,
};
use crate::port::{why, Port, Teardown, NO_RESOURCES};
use crate::rdma::{
    lifecycle::{Accepted, Lifecycle, Stage},
    rw, CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, DeviceName, HandlerHeld, IdContext,
    Pd, PollContext, PublishOnce, QpCaps, SocketAddr,
};
use crate::target::{ListedQueue, NvmetRdma, QueueReport, Target};
use crate::test_hooks::HoldPoint;
use crate::wire::ConnectData;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};
use kernel::{
    fmt, new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

/// Pages of the largest transfer a command may ask for (1 MiB: `MAX_MDTS` in `fabrics.rs`,
/// `NVMET_RDMA_MAX_MDTS`): the QP's `rdma_rw` resources are sized for it, as the C
/// transport's are.
pub(crate) const MAX_TRANSFER_PAGES: u32 = 1 << 8;

/// One host connection; see the module documentation.
#[pin_data]
pub(crate) struct Queue {
    #[pin]
    pub(crate) nvmet: SqCq,
    number: u32,
    port: Arc<Port>,
    target: Arc<Target>,
    data: ConnectData,
    peer: SocketAddr,
    local: SocketAddr,
    /// The RDMA device the connection came in on, as an address: only compared, never
    /// followed (see [`ListedQueue::device_key`]).
    device: usize,
    /// ... its name, for reports.
    device_name: DeviceName,
    /// RDMA READs the host lets us have outstanding.
    initiator_depth: u8,
    /// The id (and QP), from the listener's adoption to the release.
    #[pin]
    lifecycle: Lifecycle<Queue, CmId<Queue>>,
    /// Buffers and work request contexts, set up once before the accept (read on every
    /// completion: a `PublishOnce`, see `rdma/kernel_gaps/once.rs`).
    io: PublishOnce<Io>,
    /// Free response slots and waiting commands; filled at setup.
    #[pin]
    lists: SlotLists,
    stats: QueueStats,
    /// A transport error ended it (its teardown's cause, whoever closes it).
    failed: AtomicBool,
    /// The latency histograms of its commands.
    latency: QueueLatency,
    /// The histograms' counts at the last reset (debugfs `latency`), if any: reports
    /// show what was recorded since.
    #[pin]
    latency_base: Mutex<Option<KBox<LatencySnapshot>>>,
    #[pin]
    release_work: Work<Queue>,
}

impl_has_work! {
    impl HasWork<Self> for Queue { self.release_work }
}

impl_has_sq_cq!(Queue, nvmet);

impl Queue {
    /// Takes a validated connect request on `port` of `target`: adopts it and sets the
    /// queue up (in the listener's handler call, as the request is). If the queue cannot
    /// be made, rejects the request (no resources).
    pub(crate) fn start(
        target: &Arc<Target>,
        port: &Arc<Port>,
        data: ConnectData,
        request: ConnectRequest<'_>,
    ) -> Result {
        let number = target.next_queue_number();
        let peer = request.peer();
        let local = request.local();
        let device = request.device().as_raw() as usize;
        let device_name = DeviceName::of(request.device());
        let initiator_depth = request.initiator_depth();
        // The queue's requests name the port: the pair holds it (`ENODEV` once removed).
        let hold = port.nvmet().hold();
        let queue = hold.and_then(|hold| {
            Arc::pin_init(
                try_pin_init!(Self {
                    nvmet <- SqCq::new::<Self>(hold),
                    number,
                    port: port.clone(),
                    target: target.clone(),
                    data,
                    peer,
                    local,
                    device,
                    device_name,
                    initiator_depth,
                    lifecycle <- Lifecycle::new(),
                    io: PublishOnce::new(),
                    lists <- SlotLists::new(),
                    stats: QueueStats::default(),
                    failed: AtomicBool::new(false),
                    latency <- QueueLatency::new(),
                    latency_base <- new_mutex!(None),
                    release_work <- new_work!("Queue::release_work"),
                }),
                GFP_KERNEL,
            )
        });
        let mut request = Some(request);
        let mut held = None;
        // The id is in `pending` before the queue is listed: a close that finds the queue
        // finds the id, and its release takes it.
        let listed = queue.and_then(|queue| {
            let context = IdContext::new(queue.clone())?;
            target.add_queue(queue.clone(), || {
                if let Some(request) = request.take() {
                    held = queue.lifecycle.adopt(context, request);
                }
            })?;
            Ok(queue)
        });
        let queue = match listed {
            Ok(queue) => queue,
            Err(e) => {
                if let Some(request) = request {
                    trace::reject_event(port.id(), NO_RESOURCES as u8);
                    let _ = request.reject(&NO_RESOURCES.encode());
                }
                return Err(e);
            }
        };
        crate::test_hooks::hold(HoldPoint::Listed, &peer);
        match held {
            Some(held) => Lifecycle::set_up(queue, held),
            // (Never for a new queue; RDMA CM rejects the request.)
            None => Lifecycle::close(queue.as_arc_borrow(), why::NOT_ADOPTED),
        }
        Ok(())
    }

    /// The address the host connected to.
    pub(crate) fn local_address(&self) -> SocketAddr {
        self.local
    }

    /// Creates the QP and buffers, posts the receives (unless an SRQ has them) and
    /// accepts.
    fn build_on(this: &Arc<Self>, id: &mut CmId<Queue>, held: HandlerHeld<'_>) -> Result {
        let device = id.device().ok_or(ENODEV)?;
        let data = &this.data;
        let port_inline_size = this.port.inline_size();
        let (send_sge, read_sge) = device.max_send_sges();
        // Asked for every queue, so that the admin queue's answer holds for the
        // controller the host's Connect creates on it.
        let pi = this.port.pi_on(device);
        let caps = QpCaps {
            send_wr: data.send_queue_size,
            recv_wr: data.recv_queue_size,
            send_sge: send_sge.max(read_sge),
            recv_sge: 2,
            rdma_ctxs: data.send_queue_size
                * rw::mr_factor(device, id.port_num(), MAX_TRANSFER_PAGES),
            vector: if data.qid == 0 {
                0
            } else {
                this.number % device.completion_vectors()
            },
            // As the C transport: queues on a device share the pool's CQs, so one polling
            // pass serves completions of several queues.
            shared_cq: true,
            // As the C transport: only I/O queues carry data with PI.
            integrity: pi && data.qid != 0,
            // Responses are small enough to go inline where the device allows it.
            inline_data: RESPONSE_SIZE as u32,
        };
        let shared = if crate::srq::use_srq.get() {
            this.target
                .shared_recv(device, port_inline_size, caps.vector)?
        } else {
            None
        };
        let granted = match &shared {
            Some(srq) => id.create_qp_on_srq(srq, caps, PollContext::Workqueue)?,
            None => id.create_qp(Pd::new(device, None)?, caps, PollContext::Workqueue)?,
        };
        // (The admin queue never takes in-capsule data, even from an SRQ's slots.)
        let inline_size = if data.qid == 0 { 0 } else { port_inline_size };
        let (recv, send) = (data.recv_queue_size, data.send_queue_size);
        let io = Io::new(id, recv, send, inline_size, granted, caps.integrity, shared)?;
        this.lists.fill(io.response_slots(), recv)?;
        if !this.io.populate(io) {
            return Err(EBUSY);
        }
        let io = this.io.as_ref().ok_or(EINVAL)?;
        // Before the first command can arrive: the sq keeps the queue for its requests,
        // until the release destroys it (`tear_down`).
        this.nvmet.keep(this.as_arc_borrow())?;
        // (and posts the receives of the queue's own slots)
        io.prepare(id, |queue: &Queue| queue.io.as_ref())?;
        id.accept_as_target(held, &data.accept_data(), this.initiator_depth)
    }

    /// Fires the queue's trace event of `step`.
    fn trace(&self, step: QueueStep, count: u64, why: &CStr) {
        trace::queue(step, self.number, self.port.id(), self.data.qid, count, why);
    }

    /// `connecting`, `live` or `disconnecting`.
    fn state_name(&self) -> &'static str {
        match self.lifecycle.stage() {
            Stage::Connecting => "connecting",
            Stage::Live => "live",
            Stage::Closing => "disconnecting",
        }
    }

    /// debugfs `queues`: one line for this queue.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state_name();
        let s = &self.stats;
        // (polls first: see `QueueStats::polls`)
        let polls = s.polls.load(Relaxed);
        // (RDMA READs, WRITEs and SENDs posted and not completed, now and at their peaks)
        let (pending, peaks) = pending_of(self.io.as_ref());
        writeln!(
            f,
            "queue {} port {} qid {} host {} {} depth {}/{} srq {} inline_rsp {} commands {} \
             read_bytes {} write_bytes {} in_capsule {} keyed {} sq_full_waits {} rsp_peak {}/{} \
             rsp_waits {} device {} send_wrs {} send_posts {} completions {} polls {} \
             pending {}/{}/{} peak {}/{}/{} errors {}",
            self.number,
            self.port.id(),
            self.data.qid,
            self.peer,
            state,
            self.data.recv_queue_size,
            self.data.send_queue_size,
            u8::from(self.io.as_ref().is_some_and(|io| io.uses_srq())),
            u8::from(self.io.as_ref().is_some_and(|io| io.inline_responses())),
            s.commands.load(Relaxed),
            s.read_bytes.load(Relaxed),
            s.write_bytes.load(Relaxed),
            s.in_capsule.load(Relaxed),
            s.keyed.load(Relaxed),
            s.sq_full_waits.load(Relaxed),
            s.rsp_peak.load(Relaxed),
            self.io.as_ref().map_or(0, |io| io.response_slots()),
            s.rsp_waits.load(Relaxed),
            self.device_name.as_str(),
            s.send_wrs.load(Relaxed),
            s.send_posts.load(Relaxed),
            s.completions.load(Relaxed),
            polls,
            pending[0],
            pending[1],
            pending[2],
            peaks[0],
            peaks[1],
            peaks[2],
            s.errors.load(Relaxed),
        )
    }
}

impl Queue {
    /// Whether the queue is being torn down (commands are dropped).
    pub(crate) fn is_disconnecting(&self) -> bool {
        self.lifecycle.is_closing()
    }

    /// Starts the teardown: marks the queue disconnecting and queues its release. Takes
    /// no lock, so completion callbacks in any context may call it.
    pub(crate) fn close(self: ArcBorrow<'_, Self>, why: &CStr) {
        Lifecycle::close(self, why);
    }

    /// A fatal transport error: ends the controller (which deletes its queues) or, before
    /// the host's Connect installed one, this queue.
    pub(crate) fn fatal_error(self: ArcBorrow<'_, Self>, kind: TransportError) {
        self.count_error(kind);
        self.failed.store(true, Relaxed);
        if self.is_disconnecting() {
            // Going already; its controller may be going too.
            return;
        }
        if !self.nvmet.fatal_error() {
            self.close(c"transport error");
        }
    }
}

impl Connection for Queue {
    type Transport = NvmetRdma;

    fn io(&self) -> Option<&Io> {
        self.io.as_ref()
    }

    fn lists(&self) -> &SlotLists {
        &self.lists
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }

    fn latency(&self) -> &QueueLatency {
        &self.latency
    }

    fn trace_id(&self) -> (u32, u16) {
        (self.number, self.data.qid)
    }

    fn ops(&self) -> OpsRef<NvmetRdma> {
        self.target.ops()
    }

    fn is_disconnecting(&self) -> bool {
        Queue::is_disconnecting(self)
    }

    fn close(self: ArcBorrow<'_, Self>, why: &CStr) {
        Queue::close(self, why)
    }

    fn count_error(&self, kind: TransportError) {
        self.stats.count_error(kind);
        self.port.stats.count_error(kind);
    }

    fn fatal_error(self: ArcBorrow<'_, Self>, kind: TransportError) {
        Queue::fatal_error(self, kind)
    }

    fn exceeded_depth(self: ArcBorrow<'_, Self>) {
        pr_err!(
            "queue {}: host {} sent more commands than its queue depth ({}) allows; ending the queue\n",
            self.number,
            self.peer,
            self.data.recv_queue_size
        );
        self.fatal_error(TransportError::OverDepth);
    }
}

impl ListedQueue for Queue {
    fn device_key(&self) -> usize {
        self.device
    }

    fn is_admin(&self) -> bool {
        self.data.qid == 0
    }

    fn is_disconnecting(&self) -> bool {
        Queue::is_disconnecting(self)
    }

    fn is_on(&self, port: &Port) -> bool {
        core::ptr::eq(&*self.port, port)
    }

    fn ctrl(&self) -> Option<CtrlId> {
        self.nvmet.ctrl()
    }

    fn peer(&self) -> SocketAddr {
        self.peer
    }

    fn close(self: ArcBorrow<'_, Self>, why: &CStr) {
        Queue::close(self, why)
    }

    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.show(f)
    }

    fn report(&self) -> QueueReport<'_> {
        QueueReport {
            number: self.number,
            port: &self.port,
            qid: self.data.qid,
            peer: self.peer,
            state: self.state_name(),
            depth: (self.data.recv_queue_size, self.data.send_queue_size),
            rsp_slots: self.io.as_ref().map_or(0, |io| io.response_slots()),
            srq: self.io.as_ref().is_some_and(|io| io.uses_srq()),
            device: self.device_name.as_str(),
            io: self.io.as_ref(),
            lists: &self.lists,
            stats: &self.stats,
            latency: &self.latency,
            latency_base: &self.latency_base,
        }
    }
}

impl CmHandler for Queue {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        if event.kind() == CmEventKind::Established {
            this.trace(QueueStep::Established, 0, c"");
        }
        Lifecycle::event(this, event);
    }
}

impl Accepted for Queue {
    type Link = CmId<Queue>;

    fn lifecycle(&self) -> &Lifecycle<Self, CmId<Queue>> {
        &self.lifecycle
    }

    fn id_of(link: &CmId<Queue>) -> &CmId<Self> {
        link
    }

    fn build(
        this: &Arc<Self>,
        mut id: CmId<Self>,
        held: HandlerHeld<'_>,
    ) -> Result<CmId<Self>, (Error, CmId<Self>)> {
        match Self::build_on(this, &mut id, held) {
            Ok(()) => {
                this.port.stats.connects.fetch_add(1, Relaxed);
                let slots = this.io.as_ref().map_or(0, |io| io.response_slots());
                this.trace(QueueStep::Accept, u64::from(slots), c"");
                Ok(id)
            }
            Err(e) => Err((e, id)),
        }
    }

    fn reject(&self, id: &CmId<Self>, error: Error) {
        pr_err!(
            "queue {} from {}: setup failed: {:?}; rejecting\n",
            self.number,
            self.peer,
            error
        );
        self.port.stats.reject(NO_RESOURCES);
        trace::reject_event(self.port.id(), NO_RESOURCES as u8);
        let _ = id.reject(&NO_RESOURCES.encode());
    }

    fn closing(&self, why: &CStr) {
        self.trace(QueueStep::Close, self.stats.commands.load(Relaxed), why);
        // (a transport error ends the controller, whose deletion closes the queue)
        let cause = if self.failed.load(Relaxed) {
            Teardown::Error
        } else {
            Teardown::of(why)
        };
        self.port.stats.torn_down[cause as usize].fetch_add(1, Relaxed);
        self.target.count_teardown(cause);
        pr_debug!(
            "queue {} closing ({})\n",
            self.number,
            why.to_str().unwrap_or("?")
        );
    }

    fn queue_release(this: Arc<Self>) {
        let _ = crate::nvmet::workqueue::nvmet_workqueue().enqueue(this);
    }

    /// Lets the nvmet core finish the queue's requests, drains the QP, reclaims what is
    /// still in flight and frees everything; then leaves the list.
    fn tear_down(this: &Arc<Self>, link: Option<CmId<Self>>, unlinked: Option<CmId<Self>>) {
        // (A rejected id may have a QP the set-up posted receives on.)
        let id = link.or(unlinked);
        if let Some(io) = this.io.as_ref() {
            io.abandon_waiting(this.as_arc_borrow());
        }
        // Waits for every request: those in RDMA are flushed by the disconnect. (What the
        // sq kept is not the queue's last reference: `this` is one.)
        drop(this.nvmet.destroy());
        let drained = id.as_ref().map(|id| id.shut_down());
        if let (Some(io), Some(drained)) = (this.io.as_ref(), &drained) {
            this.lists.discard_parked(io);
            io.reclaim(drained);
        }
        drop(id);
        this.trace(QueueStep::Release, this.stats.commands.load(Relaxed), c"");
        pr_info!(
            "queue {} (port {}, qid {}, host {}) released after {} commands\n",
            this.number,
            this.port.id(),
            this.data.qid,
            this.peer,
            this.stats.commands.load(Relaxed)
        );
        let duplicates = this.stats.duplicate_completions.load(Relaxed);
        if duplicates != 0 {
            pr_warn!(
                "queue {}: the device completed {} work request(s) twice; the second completions were ignored\n",
                this.number,
                duplicates
            );
        }
        this.target.remove_queue(&**this);
    }
}

impl WorkItem for Queue {
    type Pointer = Arc<Queue>;

    /// Releases the queue (see [`Accepted::tear_down`]).
    fn run(this: Arc<Queue>) {
        Lifecycle::release(this);
    }
}
