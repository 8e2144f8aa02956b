// SPDX-License-Identifier: GPL-2.0

//! The server's connections: setup, the TEXT round trip, and teardown (krping's `ping` and
//! `bench` transfers are in `connection/transfer.rs`).
//!
//! A connection request is adopted and set up (PD, CQ, QP, receives, accept) in the
//! listener's CM handler call; every teardown (disconnect, errors, device removal,
//! unload) goes through the release work item, because a CM id cannot be destroyed from
//! its own handler. Receive slot `i` owns the `i`-th region of the send and data buffers
//! until the SEND of its last answer completes, when the receive is posted again.

#![forbid(unsafe_code)]

mod transfer;

use crate::protocol::{
    Kind, Message, HEADER_SIZE, MAX_DUPLEX_DEPTH, MAX_TEXT, MAX_TRANSFER_PAGES, SLOT_SIZE,
};
use crate::rdma::{
    lifecycle::{Accepted, Lifecycle},
    rw, CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, DmaBuf, HandlerHeld, IdContext, Mr,
    OwnedQueue, Pd, PollContext, QpCaps, SendOp, SocketAddr, WorkCompletion,
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use kernel::{
    fmt, new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, CondVar, Mutex},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

/// Receives kept posted per connection.
const RECV_SLOTS: usize = 4;

/// State shared by the module, its listener and its connections.
#[pin_data]
pub(crate) struct Shared {
    #[pin]
    connections: Mutex<KVec<Arc<Connection>>>,
    #[pin]
    last_msg: Mutex<KVec<u8>>,
    #[pin]
    emptied: CondVar,
    next_number: AtomicU32,
    /// Test hook (debugfs `corrupt_next`): damage the next PING's data.
    pub(crate) corrupt_next: AtomicBool,
    queue: OwnedQueue,
}

impl Shared {
    /// The state of a freshly loaded server.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let queue = OwnedQueue::new(c"rdma_server")?;
        Arc::pin_init(
            pin_init!(Self {
                connections <- new_mutex!(KVec::new()),
                last_msg <- new_mutex!(KVec::new()),
                emptied <- new_condvar!(),
                next_number: AtomicU32::new(1),
                corrupt_next: AtomicBool::new(false),
                queue,
            }),
            GFP_KERNEL,
        )
    }

    /// The server's workqueue (drained by [`Shared::close_all`]).
    pub(crate) fn queue(&self) -> &OwnedQueue {
        &self.queue
    }

    /// debugfs `connections`: one line per connection.
    pub(crate) fn show_connections(this: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for connection in this.connections.lock().iter() {
            connection.show(f)?;
        }
        Ok(())
    }

    /// debugfs `last_msg`: the last text a client sent, and a newline.
    pub(crate) fn show_last_msg(this: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = this.last_msg.lock();
        writeln!(
            f,
            "{}",
            core::str::from_utf8(&text).unwrap_or("<not UTF-8>")
        )
    }

    /// Disconnects every connection and waits until all are released (for unload).
    pub(crate) fn close_all(&self) {
        // One at a time, each outside the list's lock (the listener's handler takes it with
        // RDMA CM's handler mutex held: nothing more is done under it), and without copying
        // the list: teardown allocates nothing. A closed connection is closing until its
        // release takes it off.
        loop {
            let next = self
                .connections
                .lock()
                .iter()
                .find(|c| !c.lifecycle.is_closing())
                .cloned();
            match next {
                Some(connection) => connection.close(c"module unload"),
                None => break,
            }
        }
        let mut list = self.connections.lock();
        // Uninterruptible: `rmmod` may run with a signal pending, and an interruptible
        // wait would then return at once, in a loop. Bounded: every listed connection's
        // release is queued; each leaves the list and notifies.
        while !list.is_empty() {
            self.emptied.wait(&mut list);
        }
        drop(list);
        self.queue.drain();
    }
}

/// The verbs resources of an accepted connection. Field order is drop order: buffers
/// first, then the id, which drains and destroys QP, CQ and PD before the id itself.
pub(crate) struct Link {
    recv: DmaBuf,
    send: DmaBuf,
    data: DmaBuf,
    id: CmId<Connection>,
}

/// A buffer and an MR that can register all of it. (The MR keeps the buffer it maps until
/// it is deregistered, with its last clone: no drop order matters.)
struct Registered {
    mr: Mr,
    buf: DmaBuf,
}

impl Registered {
    fn new(link: &Link, len: usize) -> Result<Self> {
        let device = link.id.device().ok_or(ENODEV)?;
        let pd = link.id.pd().ok_or(ENODEV)?;
        let buf = DmaBuf::new(device, len)?;
        let mr = Mr::new(pd, buf.pages(0, len))?;
        Ok(Self { buf, mr })
    }
}

/// Whether a SEND answers its message for the last time. A slot's receive is re-posted
/// only after its last answer: the answers share the slot's send buffer, and the client
/// cannot send into the slot before it is answered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// More answers follow (a duplex BENCH's first DONE).
    More,
    /// The last answer.
    Last,
}

/// Counters of one kind of transfer.
#[derive(Default)]
struct Counter {
    messages: AtomicU64,
    bytes: AtomicU64,
}

impl Counter {
    fn add(&self, bytes: u32) {
        self.messages.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes.into(), Relaxed);
    }
}

/// One client connection.
#[pin_data]
pub(crate) struct Connection {
    number: u32,
    peer: SocketAddr,
    device: [u8; 32],
    shared: Arc<Shared>,
    /// The id and the resources of an accepted connection (its `link`).
    #[pin]
    lifecycle: Lifecycle<Connection, Link>,
    /// The buffer PING data passes through (grown on demand, up to 4 MiB), and its MR once
    /// a PING asked for `read_inv`. Locked after `link` when both are.
    #[pin]
    ping: Mutex<Option<(DmaBuf, Option<Mr>)>>,
    /// The registered scratch buffer of the client's last BENCH. Locked after `link`.
    #[pin]
    scratch: Mutex<Option<Registered>>,
    recvs: Counter,
    sends: Counter,
    reads: Counter,
    writes: Counter,
    errors: AtomicU64,
    #[pin]
    release_work: Work<Connection>,
}

impl_has_work! {
    impl HasWork<Self> for Connection { self.release_work }
}

impl Connection {
    /// Takes a connection request: adopts it and sets the connection up, in the
    /// listener's handler call. If the connection cannot be made, the request is left
    /// alone, and RDMA CM rejects it.
    pub(crate) fn start(shared: &Arc<Shared>, request: ConnectRequest<'_>) {
        let number = shared.next_number.fetch_add(1, Relaxed);
        let peer = request.peer();
        let mut device = [0u8; 32];
        let name = request.device().name().to_bytes();
        let n = name.len().min(device.len());
        device[..n].copy_from_slice(&name[..n]);
        let connection = Arc::pin_init(
            pin_init!(Self {
                number,
                peer,
                device,
                shared: shared.clone(),
                lifecycle <- Lifecycle::new(),
                ping <- new_mutex!(None),
                scratch <- new_mutex!(None),
                recvs: Counter::default(),
                sends: Counter::default(),
                reads: Counter::default(),
                writes: Counter::default(),
                errors: AtomicU64::new(0),
                release_work <- new_work!("Connection::release_work"),
            }),
            GFP_KERNEL,
        );
        let Ok((connection, context)) =
            connection.and_then(|connection| Ok((connection.clone(), IdContext::new(connection)?)))
        else {
            pr_err!("out of memory for a connection from {}\n", request.peer());
            return;
        };
        if shared
            .connections
            .lock()
            .push(connection.clone(), GFP_KERNEL)
            .is_err()
        {
            pr_err!("out of memory for a connection from {}\n", request.peer());
            return;
        }
        pr_info!(
            "connection {} request from {} on {}\n",
            number,
            request.peer(),
            request.device().name().to_str().unwrap_or("?")
        );
        if let Some(held) = connection.lifecycle.adopt(context, request) {
            Lifecycle::set_up(connection, held);
        }
    }

    fn device_name(&self) -> &str {
        let len = self
            .device
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.device.len());
        core::str::from_utf8(&self.device[..len]).unwrap_or("?")
    }

    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lifecycle.stage().name();
        writeln!(
            f,
            "{} {} {} {} recv {}/{} send {}/{} read {}/{} write {}/{} errors {}",
            self.number,
            self.peer,
            self.device_name(),
            state,
            self.recvs.messages.load(Relaxed),
            self.recvs.bytes.load(Relaxed),
            self.sends.messages.load(Relaxed),
            self.sends.bytes.load(Relaxed),
            self.reads.messages.load(Relaxed),
            self.reads.bytes.load(Relaxed),
            self.writes.messages.load(Relaxed),
            self.writes.bytes.load(Relaxed),
            self.errors.load(Relaxed),
        )
    }

    /// Builds the verbs resources on the adopted id, posts the receives and accepts.
    fn build_link(
        this: &Arc<Self>,
        mut id: CmId<Connection>,
        held: HandlerHeld<'_>,
    ) -> Result<Link, (Error, CmId<Connection>)> {
        let device = match id.device() {
            Some(device) => device,
            None => return Err((ENODEV, id)),
        };
        let buffers = (|| -> Result<(Arc<Pd>, DmaBuf, DmaBuf, DmaBuf)> {
            Ok((
                Pd::new(device, None)?,
                DmaBuf::new(device, RECV_SLOTS * SLOT_SIZE)?,
                DmaBuf::new(device, RECV_SLOTS * HEADER_SIZE)?,
                DmaBuf::new(device, RECV_SLOTS * MAX_TEXT)?,
            ))
        })();
        let (pd, recv, send, data) = match buffers {
            Ok(buffers) => buffers,
            Err(e) => return Err((e, id)),
        };
        // The PING READs and WRITEs go through `rdma_rw` contexts (one per message being
        // served), which iWARP devices register through MRs from the QP's pool; a duplex
        // BENCH's WRITEs (which take no MR) need room in the send queue only.
        let caps = QpCaps {
            rdma_ctxs: RECV_SLOTS as u32 * rw::mr_factor(device, id.port_num(), MAX_TRANSFER_PAGES),
            ..QpCaps::new(4 * RECV_SLOTS as u32 + MAX_DUPLEX_DEPTH, RECV_SLOTS as u32)
        };
        if let Err(e) = id.create_qp(pd, caps, PollContext::Workqueue) {
            return Err((e, id));
        }
        let link = Link {
            recv,
            send,
            data,
            id,
        };
        // Receives go up before the accept: the client may send as soon as it is connected.
        for slot in 0..RECV_SLOTS {
            if let Err(e) = Self::post_recv(this, &link, slot) {
                return Err((e, link.id));
            }
        }
        if let Err(e) = link.id.accept(held, &[]) {
            return Err((e, link.id));
        }
        Ok(link)
    }

    fn post_recv(this: &Arc<Self>, link: &Link, slot: usize) -> Result {
        let qp = link.id.qp().ok_or(EINVAL)?;
        let local = link
            .id
            .dma_local(&link.recv, slot * SLOT_SIZE, SLOT_SIZE as u32)?;
        let connection = this.clone();
        qp.post_recv(local, move |wc| Self::received(connection, slot, wc))
    }

    /// A receive completed: a TEXT message (or a flush at teardown).
    fn received(this: Arc<Self>, slot: usize, wc: &WorkCompletion) {
        if !this.check(wc, c"receive") {
            return;
        }
        this.recvs.add(wc.byte_len);
        let guard = this.lifecycle.link();
        let Some(link) = &*guard else {
            return;
        };
        let mut header = [0u8; HEADER_SIZE];
        let mut text = [0u8; MAX_TEXT];
        let message = link
            .recv
            .copy_out(slot * SLOT_SIZE, &mut header)
            .and_then(|()| Message::decode(&header, wc.byte_len as usize));
        let message = match message {
            Ok(message) if message.kind != Kind::Done => message,
            _ => {
                pr_err!(
                    "connection {}: protocol error in a received message; closing\n",
                    this.number
                );
                drop(guard);
                this.close(c"protocol error");
                return;
            }
        };
        let result = match message.kind {
            Kind::Ping => Self::ping(&this, link, slot, message),
            Kind::Bench => Self::bench(&this, link, slot, message),
            Kind::Echo => Self::send_done(&this, link, slot, message.seq, message.length, None),
            _ => {
                let length = message.length as usize;
                if let Err(e) = this.store_text(link, slot, &mut text[..length]) {
                    pr_err!(
                        "connection {}: cannot store the text: {:?}\n",
                        this.number,
                        e
                    );
                    this.errors.fetch_add(1, Relaxed);
                }
                if length == 0 {
                    Self::send_done(&this, link, slot, message.seq, 0, None)
                } else {
                    let data = link.data.clone();
                    Self::read_source(&this, link, slot, message, data, slot * MAX_TEXT, None)
                }
            }
        };
        if let Err(e) = result {
            drop(guard);
            this.abort("cannot answer", e);
        }
    }

    /// Copies a TEXT message's text out of its receive slot into `last_msg`.
    fn store_text(&self, link: &Link, slot: usize, text: &mut [u8]) -> Result {
        link.recv.copy_out(slot * SLOT_SIZE + HEADER_SIZE, text)?;
        let mut last = self.shared.last_msg.lock();
        last.clear();
        last.extend_from_slice(text, GFP_KERNEL)?;
        Ok(())
    }

    /// SENDs DONE for the message in `slot`; its completion re-posts the slot's receive.
    fn send_done(
        this: &Arc<Self>,
        link: &Link,
        slot: usize,
        seq: u32,
        length: u32,
        invalidate: Option<u32>,
    ) -> Result {
        let done = Message::new(Kind::Done, seq, length);
        Self::send_message(this, link, slot, &done, invalidate, Answer::Last)
    }

    /// SENDs `done` for the message in `slot`; the completion of its last answer re-posts
    /// the slot's receive.
    fn send_message(
        this: &Arc<Self>,
        link: &Link,
        slot: usize,
        done: &Message,
        invalidate: Option<u32>,
        answer: Answer,
    ) -> Result {
        link.send.copy_in(slot * HEADER_SIZE, &done.encode())?;
        let qp = link.id.qp().ok_or(EINVAL)?;
        let local = link
            .id
            .dma_local(&link.send, slot * HEADER_SIZE, HEADER_SIZE as u32)?;
        let connection = this.clone();
        qp.post_send(SendOp::Send { local, invalidate }, move |wc| {
            if !connection.check(wc, c"SEND") {
                return;
            }
            connection.sends.add(HEADER_SIZE as u32);
            if answer == Answer::More {
                return;
            }
            let guard = connection.lifecycle.link();
            if let Some(link) = &*guard {
                if Self::post_recv(&connection, link, slot).is_err() {
                    drop(guard);
                    connection.close(c"receive post failure");
                }
            }
        })
    }

    /// `true` for a successful completion; logs a failure (flushes are quiet: they are
    /// teardown) and closes the connection.
    fn check(self: &Arc<Self>, wc: &WorkCompletion, what: &CStr) -> bool {
        if wc.is_ok() {
            return true;
        }
        if !wc.is_flush() {
            self.errors.fetch_add(1, Relaxed);
            pr_err!(
                "connection {}: {} failed: {} (status {}); closing\n",
                self.number,
                what.to_str().unwrap_or("?"),
                wc.status_name().to_str().unwrap_or("?"),
                wc.status
            );
            self.close(c"work request failure");
        }
        false
    }

    /// Logs why the connection cannot go on and closes it. The caller holds no `link` lock.
    fn abort(self: &Arc<Self>, what: &str, e: Error) {
        pr_err!("connection {}: {}: {:?}; closing\n", self.number, what, e);
        self.close(c"post failure");
    }

    /// Starts closing: queues the release, which disconnects.
    fn close(self: &Arc<Self>, why: &CStr) {
        Lifecycle::close(self.as_arc_borrow(), why);
    }
}

impl CmHandler for Connection {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        if event.kind() == CmEventKind::Established {
            pr_info!(
                "connection {} from {} established\n",
                this.number,
                this.peer
            );
        }
        Lifecycle::event(this, event);
    }
}

impl Accepted for Connection {
    type Link = Link;

    fn lifecycle(&self) -> &Lifecycle<Self, Link> {
        &self.lifecycle
    }

    fn id_of(link: &Link) -> &CmId<Self> {
        &link.id
    }

    fn build(
        this: &Arc<Self>,
        id: CmId<Self>,
        held: HandlerHeld<'_>,
    ) -> Result<Link, (Error, CmId<Self>)> {
        Self::build_link(this, id, held)
    }

    fn reject(&self, id: &CmId<Self>, error: Error) {
        pr_err!(
            "connection {}: setup failed: {:?}; rejecting\n",
            self.number,
            error
        );
        let _ = id.reject(&[]);
    }

    fn closing(&self, why: &CStr) {
        pr_info!(
            "connection {} closing ({})\n",
            self.number,
            why.to_str().unwrap_or("?")
        );
    }

    fn queue_release(this: Arc<Self>) {
        // (The queue lives in `shared`, which `this` holds: a clone goes to the queue.)
        let _ = this.shared.queue.enqueue(this.clone());
    }

    /// Releases everything: QP (drained), CQ, PD, buffers, the id; then leaves the list.
    fn tear_down(this: &Arc<Self>, link: Option<Link>, unlinked: Option<CmId<Self>>) {
        // The link is taken: a receive, which stores a PING buffer or a BENCH scratch MR
        // only while it finds the link, cannot store one that would outlive the id (and
        // with it the device).
        let ping = this.ping.lock().take();
        let scratch = this.scratch.lock().take();
        // MRs before their memory, and both before the id.
        if let Some((buf, mr)) = ping {
            drop(mr);
            drop(buf);
        }
        drop(scratch);
        drop(link);
        drop(unlinked);
        let mut list = this.shared.connections.lock();
        if let Some(index) = list.iter().position(|c| Arc::ptr_eq(c, this)) {
            let _ = list.remove(index);
            pr_info!("connection {} released\n", this.number);
        }
        drop(list);
        this.shared.emptied.notify_all();
    }
}

impl WorkItem for Connection {
    type Pointer = Arc<Connection>;

    /// Releases everything (see [`Accepted::tear_down`]).
    fn run(this: Arc<Connection>) {
        Lifecycle::release(this);
    }
}
