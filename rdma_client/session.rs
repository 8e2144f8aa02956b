// SPDX-License-Identifier: GPL-2.0

//! The client's connection to the server; its messages to the server (the `send` round
//! trip, requests and their answers) are in `session/messages.rs`, krping's `ping` and
//! `bench` on it in `session/ping.rs` and `session/bench.rs`.
//!
//! Operations (connect, send, disconnect) run in the writer's process context, one at a
//! time, and wait for the RDMA CM events and work completions they cause; callbacks only
//! record what happened in the inbox and wake the waiter.

#![forbid(unsafe_code)]

mod bench;
mod inbox;
mod messages;
mod ping;

use crate::bench::BenchResult;
use crate::protocol::{HEADER_SIZE, MAX_TEXT, MAX_TRANSFER_PAGES, SLOT_SIZE};
use crate::rdma::{
    code, rw, CmEvent, CmEventKind, CmHandler, CmId, DmaBuf, GlobalRkeyOptIn, Mr, OwnedQueue, Pd,
    PollContext, QpCaps, SendOp, SocketAddr,
};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use inbox::{BenchProgress, Inbox, Outcome, Tag, TAGS};
use kernel::{
    fmt, new_condvar, new_mutex, new_spinlock,
    prelude::*,
    sync::{Arc, ArcBorrow, CondVar, CondVarTimeoutResult, Mutex, SpinLock},
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

/// How long one step (an RDMA CM event, a work completion) may take. Generous: the test
/// VMs emulate their CPUs.
const STEP_TIMEOUT_MS: u32 = 10_000;

/// How long a release waits for the server to acknowledge a disconnect.
const CLOSE_TIMEOUT_MS: u32 = 2_000;

/// Receive slots kept posted.
pub(super) const RECV_SLOTS: usize = 2;

/// Completions a polled link runs per poll (`ib_process_cq_direct`'s budget).
const POLL_BUDGET: u32 = 16;

/// Empty polls in a row before a polling task sleeps 50 µs.
const SPINS_BEFORE_SLEEP: u32 = 64;

/// The verbs resources of a connection. Field order is drop order: buffers and MRs
/// first, then the id (which drains and destroys QP, CQ and PD, then itself).
struct Link {
    recv: DmaBuf,
    send: DmaBuf,
    source: DmaBuf,
    sink: DmaBuf,
    source_mr: Mr,
    sink_mr: Mr,
    id: CmId<Session>,
    /// The QP's completions run only when a waiting task polls its CQ (`poll=1`).
    polled: bool,
    /// The most READs or WRITEs a bench may keep in flight (`txdepth`).
    txdepth: u32,
}

/// How a session connects: the module parameters given at load (checked there).
#[derive(Clone, Copy)]
pub(crate) struct LinkOptions {
    /// The admin's opt-in to the device-wide DMA rkey (`unsafe_global_rkey=1`).
    pub(crate) global_rkey: Option<GlobalRkeyOptIn>,
    /// The CM id's type of service (krping's `tos`), if given.
    pub(crate) tos: Option<u8>,
    /// Where completions run (krping's `poll`: [`PollContext::Direct`]).
    pub(crate) poll: PollContext,
    /// krping's `txdepth`: the send queue's room for a bench's READs and WRITEs, 1 to
    /// [`MAX_DEPTH`](crate::bench::MAX_DEPTH) (the queue has [`OWN_SEND_WRS`] more).
    pub(crate) txdepth: u32,
}

/// How long [`Session::answer`] waits for the server.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Patience {
    /// The step timeout (10 s), for an answer the server owes at once.
    StepTimeout,
    /// Until a signal or the end of the connection: the server answers after work of its
    /// own whose length the client cannot bound (a duplex bench's WRITEs).
    UntilSignal,
}

/// Send queue entries beyond `txdepth`: a ping's or a `send`'s registrations, SEND and
/// invalidations, and a duplex bench's sink registration, each awaited.
const OWN_SEND_WRS: u32 = 8;

/// The client: its connection, its inbox, and what `reply` and `stats` show.
#[pin_data]
pub(crate) struct Session {
    #[pin]
    operation: Mutex<()>,
    #[pin]
    link: Mutex<Option<Link>>,
    #[pin]
    inbox: SpinLock<Inbox>,
    #[pin]
    changed: CondVar,
    #[pin]
    reply: Mutex<KVec<u8>>,
    #[pin]
    bench_result: Mutex<Option<BenchResult>>,
    /// The session's number: 0 for `rdma_demo/`, n for `rdma_demo/session<n>/`.
    number: u32,
    seq: AtomicU32,
    send_messages: AtomicU64,
    send_bytes: AtomicU64,
    recv_messages: AtomicU64,
    recv_bytes: AtomicU64,
    /// Round trips in which the server READ the source and WROTE the sink, and bytes each way.
    served: AtomicU64,
    served_bytes: AtomicU64,
    /// Completions that ran in a waiting task, polled (`poll=1`).
    polled: AtomicU64,
    queue: OwnedQueue,
    #[pin]
    release_work: Work<Session>,
}

impl_has_work! {
    impl HasWork<Self> for Session { self.release_work }
}

impl Session {
    /// Client session `number`, without a connection.
    pub(crate) fn new(number: u32) -> Result<Arc<Self>> {
        let queue = OwnedQueue::new(c"rdma_client")?;
        Arc::pin_init(
            pin_init!(Self {
                operation <- new_mutex!(()),
                link <- new_mutex!(None),
                inbox <- new_spinlock!(Inbox {
                    cm: None,
                    disconnected: false,
                    cm_closed: false,
                    done: [const { None }; TAGS],
                    received: [const { None }; RECV_SLOTS],
                    arrivals: 0,
                    invalidatable: None,
                    bench: BenchProgress {
                        run: 0,
                        completed: 0,
                        failed: None,
                        samples: KVVec::new(),
                    },
                }),
                changed <- new_condvar!(),
                reply <- new_mutex!(KVec::new()),
                bench_result <- new_mutex!(None),
                number,
                seq: AtomicU32::new(1),
                send_messages: AtomicU64::new(0),
                send_bytes: AtomicU64::new(0),
                recv_messages: AtomicU64::new(0),
                recv_bytes: AtomicU64::new(0),
                served: AtomicU64::new(0),
                served_bytes: AtomicU64::new(0),
                polled: AtomicU64::new(0),
                queue,
                release_work <- new_work!("Session::release_work"),
            }),
            GFP_KERNEL,
        )
    }

    /// Waits until `ready` finds what it looks for in the inbox; `ETIMEDOUT` after the
    /// step timeout, `EINTR` on a signal, `ENOTCONN` if the connection went away.
    fn wait<T>(&self, mut ready: impl FnMut(&mut Inbox) -> Option<T>) -> Result<T> {
        let mut inbox = self.inbox.lock();
        let mut left = msecs_to_jiffies(STEP_TIMEOUT_MS);
        loop {
            if let Some(found) = ready(&mut inbox) {
                return Ok(found);
            }
            if inbox.disconnected {
                return Err(code::enotconn());
            }
            match self.changed.wait_interruptible_timeout(&mut inbox, left) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
            }
        }
    }

    /// As [`Session::wait`], for what a completion of `link`'s QP brings: on a polled link
    /// this task runs the completions, polling the CQ until `ready` finds its answer
    /// (spinning, with a short sleep now and then so that the device's own work runs on
    /// a busy CPU: soft providers complete from work items).
    fn wait_completion<T>(
        &self,
        link: &Link,
        mut ready: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Result<T> {
        if !link.polled {
            return self.wait(ready);
        }
        let start = Instant::<Monotonic>::now();
        let mut idle = 0;
        loop {
            {
                let mut inbox = self.inbox.lock();
                if let Some(found) = ready(&mut inbox) {
                    return Ok(found);
                }
                if inbox.disconnected {
                    return Err(code::enotconn());
                }
            }
            if kernel::current!().signal_pending() {
                return Err(EINTR);
            }
            if start.elapsed() > Delta::from_millis(STEP_TIMEOUT_MS.into()) {
                return Err(ETIMEDOUT);
            }
            match link.id.poll(POLL_BUDGET) {
                Ok(0) => idle += 1,
                Ok(ran) => {
                    self.polled.fetch_add(ran.into(), Relaxed);
                    idle = 0;
                }
                // (not expected: this task, holding the link, is its only poller)
                Err(e) if e == EBUSY => idle += 1,
                Err(e) => return Err(e),
            }
            if idle >= SPINS_BEFORE_SLEEP {
                idle = 0;
                fsleep(Delta::from_micros(50));
            } else {
                core::hint::spin_loop();
            }
        }
    }

    fn wait_cm(&self, wanted: CmEventKind) -> Result {
        let (kind, status) = self.wait(|inbox| inbox.cm.take())?;
        if kind == wanted {
            return Ok(());
        }
        pr_err!(
            "connect: expected {:?}, got {:?} (status {})\n",
            wanted,
            kind,
            status
        );
        Err(if kind == CmEventKind::Rejected {
            code::econnrefused()
        } else {
            code::ehostunreach()
        })
    }

    /// Waits (at most [`CLOSE_TIMEOUT_MS`]) until RDMA CM reports the connection closed.
    ///
    /// A disconnect is acknowledged only after the server moved its QP to the error state,
    /// so once this returns no new request of the server is on its way to the local QP:
    /// destroying the QP earlier races with the server's traffic, which soft-RoCE loopback
    /// handles badly (a warning in `rxe_sched_task` on a QP whose last reference is gone).
    fn wait_closed(&self) {
        let mut inbox = self.inbox.lock();
        let mut left = msecs_to_jiffies(CLOSE_TIMEOUT_MS);
        while !inbox.cm_closed {
            match self.changed.wait_interruptible_timeout(&mut inbox, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout | CondVarTimeoutResult::Signal { .. } => break,
            }
        }
    }

    /// Connects to `server` as `options` say, unless connected already (`EISCONN`).
    pub(crate) fn connect(this: &Arc<Self>, server: &SocketAddr, options: &LinkOptions) -> Result {
        let LinkOptions {
            global_rkey,
            tos,
            poll,
            txdepth,
        } = *options;
        let _operation = this.operation.lock();
        if this.link.lock().is_some() {
            return Err(code::eisconn());
        }
        {
            let mut inbox = this.inbox.lock();
            inbox.cm = None;
            inbox.disconnected = false;
            inbox.cm_closed = false;
            inbox.received = [const { None }; RECV_SLOTS];
            inbox.invalidatable = None;
            inbox.done = [const { None }; TAGS];
        }
        let mut id = CmId::new(this.clone())?;
        if let Some(tos) = tos {
            id.set_service_type(tos)?;
        }
        id.resolve_addr(server)?;
        this.wait_cm(CmEventKind::AddrResolved)?;
        let device = id.device().ok_or(ENODEV)?;
        let pd = Pd::new(device, global_rkey)?;
        let source_mr = Mr::new(&pd, 2)?;
        let sink_mr = Mr::new(&pd, 2)?;
        let recv = DmaBuf::new(device, RECV_SLOTS * SLOT_SIZE)?;
        let send = DmaBuf::new(device, SLOT_SIZE)?;
        let source = DmaBuf::new(device, MAX_TEXT)?;
        let sink = DmaBuf::new(device, MAX_TEXT)?;
        // The bench's READs and WRITEs go through `rdma_rw` contexts (`depth` at a time, at
        // most `txdepth`), which iWARP devices register through MRs from the QP's pool; a
        // ping or a `send` keeps at most two requests of its own in flight.
        let caps = QpCaps {
            rdma_ctxs: txdepth * rw::mr_factor(device, id.port_num(), MAX_TRANSFER_PAGES),
            ..QpCaps::new(OWN_SEND_WRS + txdepth, RECV_SLOTS as u32)
        };
        id.create_qp(pd, caps, poll)?;
        id.resolve_route()?;
        this.wait_cm(CmEventKind::RouteResolved)?;
        let link = Link {
            recv,
            send,
            source,
            sink,
            source_mr,
            sink_mr,
            id,
            polled: poll == PollContext::Direct,
            txdepth,
        };
        // The server may answer as soon as it is connected: receives go up first.
        for slot in 0..RECV_SLOTS {
            Self::post_recv(this, &link, slot)?;
        }
        link.id.connect(&[])?;
        this.wait_cm(CmEventKind::Established)?;
        *this.link.lock() = Some(link);
        // A disconnect or the device's removal that came after the establishment but
        // before the link was stored found no link to release: release it here (the
        // handler sets `disconnected` before it queues its work, so the work or this
        // takes the link; here, not through the work, so that a late run of the work
        // cannot take the next connection's link).
        if this.inbox.lock().disconnected {
            let link = this.link.lock().take();
            if link.is_some() {
                this.wait_closed();
            }
            drop(link);
            pr_err!(
                "session {}: connection to {} lost while connecting\n",
                this.number,
                server
            );
            return Err(code::enotconn());
        }
        pr_info!("session {}: connected to {}\n", this.number, server);
        Ok(())
    }

    fn post_recv(this: &Arc<Self>, link: &Link, slot: usize) -> Result {
        let qp = link.id.qp().ok_or(EINVAL)?;
        let local = link
            .id
            .dma_local(&link.recv, slot * SLOT_SIZE, SLOT_SIZE as u32)?;
        let session = this.clone();
        let recv = link.recv.clone();
        qp.post_recv(local, move |wc| {
            let mut header = [0u8; HEADER_SIZE];
            if wc.is_ok() && recv.copy_out(slot * SLOT_SIZE, &mut header).is_err() {
                return;
            }
            if wc.is_ok() {
                session.recv_messages.fetch_add(1, Relaxed);
                session.recv_bytes.fetch_add(wc.byte_len.into(), Relaxed);
            }
            let mut outcome = Outcome::from(wc);
            let mut inbox = session.inbox.lock();
            let watched = inbox.invalidatable.take();
            if let (Some(mr), Some(_)) = (&watched, wc.invalidated_rkey) {
                outcome.watched_invalidated = mr.note_remote_invalidate(wc).is_ok();
            }
            inbox.receive(slot, outcome, header);
            drop(inbox);
            // (the MR's clone goes outside the lock)
            drop(watched);
            session.changed.notify_all();
        })
    }

    /// Posts a send queue operation whose completion lands in the inbox under `tag`.
    fn post(this: &Arc<Self>, link: &Link, op: SendOp<'_>, tag: Tag) -> Result {
        let qp = link.id.qp().ok_or(EINVAL)?;
        this.inbox.lock().done[tag as usize] = None;
        let session = this.clone();
        qp.post_send(op, move |wc| {
            session.inbox.lock().done[tag as usize] = Some(wc.into());
            session.changed.notify_all();
        })
    }

    /// Waits for the completion of the operation posted under `tag`; `EIO` if it failed,
    /// with its status in the log.
    fn completed(&self, link: &Link, tag: Tag, what: &str) -> Result<Outcome> {
        let wc = self.wait_completion(link, |inbox| inbox.done[tag as usize].take())?;
        if !wc.ok {
            pr_err!(
                "send: {} failed: {} (status {})\n",
                what,
                wc.status_name.to_str().unwrap_or("?"),
                wc.status
            );
            return Err(EIO);
        }
        Ok(wc)
    }

    /// Registers `len` bytes of `buf` in `mr` and waits until the registration completed,
    /// so the key is valid before it is advertised.
    fn register(
        this: &Arc<Self>,
        link: &Link,
        mr: &Mr,
        buf: &DmaBuf,
        len: u32,
        access: u32,
        tag: Tag,
    ) -> Result {
        mr.map(buf, 0, len)?;
        Self::post(this, link, SendOp::Register { mr, access }, tag)?;
        this.completed(link, tag, "memory registration").map(|_| ())
    }

    /// Disconnects and releases the connection (for `ctl` and unload).
    pub(crate) fn disconnect(&self) {
        let _operation = self.operation.lock();
        let link = self.link.lock().take();
        if let Some(link) = link {
            let _ = link.id.disconnect();
            self.wait_closed();
            drop(link);
            pr_info!("session {}: disconnected\n", self.number);
        }
        self.queue.drain();
    }

    /// debugfs `reply`: the last reply, and a newline.
    pub(crate) fn show_reply(this: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reply = this.reply.lock();
        writeln!(
            f,
            "{}",
            core::str::from_utf8(&reply).unwrap_or("<not UTF-8>")
        )
    }

    /// debugfs `stats`: krping's counters.
    pub(crate) fn show_stats(this: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "connected {} send_msgs {} send_bytes {} recv_msgs {} recv_bytes {} \
             read_msgs {} read_bytes {} write_msgs {} write_bytes {} polled {}",
            u8::from(this.link.lock().is_some()),
            this.send_messages.load(Relaxed),
            this.send_bytes.load(Relaxed),
            this.recv_messages.load(Relaxed),
            this.recv_bytes.load(Relaxed),
            this.served.load(Relaxed),
            this.served_bytes.load(Relaxed),
            this.served.load(Relaxed),
            this.served_bytes.load(Relaxed),
            this.polled.load(Relaxed),
        )
    }
}

impl CmHandler for Session {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        let kind = event.kind();
        match kind {
            CmEventKind::Disconnected | CmEventKind::DeviceRemoval | CmEventKind::AddrChange => {
                pr_info!("{}\n", event.name().to_str().unwrap_or("?"));
                {
                    let mut inbox = this.inbox.lock();
                    inbox.disconnected = true;
                    inbox.cm_closed = true;
                }
                let this: Arc<Self> = this.into();
                let _ = this.queue.enqueue(this.clone());
            }
            CmEventKind::Rejected => {
                pr_err!(
                    "connect: rejected: {}\n",
                    event.reject_reason().to_str().unwrap_or("?")
                );
                this.inbox.lock().cm = Some((kind, event.status()));
            }
            CmEventKind::Other(_) | CmEventKind::TimewaitExit => return,
            _ => this.inbox.lock().cm = Some((kind, event.status())),
        }
        this.changed.notify_all();
    }
}

impl WorkItem for Session {
    type Pointer = Arc<Session>;

    /// The connection went away: release its resources, so the device can go too.
    fn run(this: Arc<Session>) {
        let link = this.link.lock().take();
        if link.is_some() {
            this.wait_closed();
        }
        drop(link);
    }
}
