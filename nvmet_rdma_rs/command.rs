// SPDX-License-Identifier: GPL-2.0

//! The data path: command capsules in, data by RDMA READ/WRITE, responses out.
//!
//! Commands land in receive slots ([`CmdSlot`], see `recv`): one per command the host may
//! send, the queue's own or an SRQ's. A queue has receive-queue-size plus
//! send-queue-size response slots ([`RspSlot`]), each with the `ib_cqe`s, work requests,
//! `rdma_rw` context and `struct nvmet_req` of one command in flight. They are allocated
//! with the queue and never move, so the C side can point into them; completions run
//! the slot's [`CqeHandler`] (one per kind of work request: SEND, READ, WRITE). A command
//! goes:
//!
//! 1. receive completes → take a free response slot, `nvmet_req_init`, map the data
//!    (in-capsule, or keyed through `rdma_rw_ctx_init`; with T10-PI, through
//!    `rdma_rw_ctx_signature_init`, the HCA checking or generating the PI);
//! 2. reserve send queue space for the response and the RDMA work requests (or wait in
//!    line until a completion frees some); for a write, RDMA READ the data first;
//! 3. `req->execute`; the nvmet core calls [`queue_response`] when the backend is done;
//! 4. for a read, the RDMA WRITEs are chained before the response SEND (with invalidate if
//!    the host asked), the receive is posted again with the token its completion gave,
//!    which the command held while the core read its capsule and data (a command that ends
//!    without a response gives an SRQ's slot back at once), the SEND goes out; with T10-PI
//!    the WRITEs go alone, and the SEND follows once their completion showed the PI intact;
//! 5. the SEND completes → the slot's resources are released and the slot is free again.
//!
//! A queue's CQ callbacks run on the RDMA core's workqueue, one at a time unless something
//! polls the shared CQ directly beside the worker (the core's SRQ drain did, before the
//! layer drained SRQ QPs itself; a module from outside the tree could): the lists slots
//! pass through are locked and the lock-free checks fenced for that.
//! [`queue_response`] may run elsewhere too (a backend's completion interrupt), so it
//! takes no lock.

#![forbid(unsafe_code)]

use crate::nvmet::{
    request::{impl_has_request, DataSgls, Request},
    sq::SqEntered,
    trace::ReqStep,
    HasSqCq, OpsRef, Transport,
};
use crate::rdma::{
    cqe::{impl_has_slot_cqe, QpRecvHandler, QpSlotHandler, Received, SlotCqe},
    kernel_gaps::slot::{Owner, Slot, Tag},
    qp_handle::{OpenQp, QpHandle, SendWr},
    rw::{Drained, RwCtx, TransferEnd},
    CmHandler, CmId, DmaBuf,
};
use crate::recv::{CmdSlot, RecvSlots, SharedSlots};
use crate::wire::{self, status, DataPointer, COMMAND_SIZE};
use core::{
    pin::Pin,
    sync::atomic::{
        AtomicI32, AtomicU32,
        Ordering::{AcqRel, Relaxed},
    },
};
use kernel::{
    prelude::*,
    sync::{Arc, ArcBorrow},
};
mod arrival;
mod completion;
mod events;
mod in_flight;
pub(crate) mod latency;
mod lists;
mod mapping;
mod pending;
mod stats;
mod waiting;

pub(crate) use arrival::{handle_command, Arrival};
pub(crate) use completion::{queue_response, read_done, recv_done, send_done, write_done};
use events::no_status;
pub(crate) use in_flight::InFlight;
pub(crate) use latency::QueueLatency;
use latency::Stamps;
pub(crate) use lists::SlotLists;
use mapping::{free_data, free_rw};
pub(crate) use pending::{pending_of, PendingWrs, Wrs};
pub(crate) use stats::{QueueStats, TransportError, TRANSPORT_ERRORS, TRANSPORT_ERROR_NAMES};

/// What the data path needs from the connection (the queue) it serves.
///
/// The queue embeds the [`SlotLists`] and [`QueueStats`] and holds the [`Io`]; the data
/// path reaches them through this trait, so that it does not depend on the queue's type.
pub(crate) trait Connection: HasSqCq + Sync + Sized + 'static {
    /// The nvmet transport whose queue this is.
    type Transport: Transport<Queue = Self, Request = RspSlot>;
    /// The queue's buffers and slots, once set up.
    fn io(&self) -> Option<&Io>;
    /// The queue's slot lists.
    fn lists(&self) -> &SlotLists;
    /// The queue's counters.
    fn stats(&self) -> &QueueStats;
    /// The queue's latency histograms.
    fn latency(&self) -> &QueueLatency;
    /// The queue's number and NVMe queue id, for trace events.
    fn trace_id(&self) -> (u32, u16);
    /// The transport's ops table, for its requests.
    fn ops(&self) -> OpsRef<Self::Transport>;
    /// Whether the queue is being torn down (commands are dropped).
    fn is_disconnecting(&self) -> bool;
    /// Starts the queue's teardown (any context).
    fn close(self: ArcBorrow<'_, Self>, why: &CStr);
    /// Counts a transport error of kind `kind` for the queue and its port (any context).
    fn count_error(&self, kind: TransportError);
    /// A fatal transport error of kind `kind`: counts it and ends the queue's controller,
    /// or the queue (any context).
    fn fatal_error(self: ArcBorrow<'_, Self>, kind: TransportError);
    /// The host sent more commands than its queue depth allows (called once): logs it and
    /// ends the queue.
    fn exceeded_depth(self: ArcBorrow<'_, Self>);
}

/// Bytes of an NVMe completion queue entry.
pub(crate) const RESPONSE_SIZE: usize = 16;

/// What a response slot knows about its command, and what the command holds; touched only
/// by the slot's current owner (see [`RspSlot`]).
pub(crate) struct RspState {
    in_use: bool,
    /// The receive slot the command arrived in.
    cmd: u32,
    /// The receive slot's buffers (its capsule, which the request's command points into,
    /// and its in-capsule data, which its data list may point at), while the command holds
    /// them: the token its receive's completion gave, which posts it again
    /// (`queue_response`, or a give-back of an SRQ's slot when the command ends without a
    /// response).
    recv: Option<Received>,
    /// Host-to-controller command.
    write: bool,
    /// The command's class, for its latency histograms.
    class: wire::Class,
    /// When its phases ended, if it is timed.
    stamps: Stamps,
    /// The command's opcode and identifier, for its trace events.
    opcode: u8,
    cid: u16,
    /// The response slot's index.
    slot: u32,
    /// The data came in the capsule.
    in_capsule: bool,
    /// The CPU took the receive slot's in-capsule data buffer (synced it): the slot's
    /// repost hands it back to the device.
    data_taken: bool,
    /// RDMA work requests the context posts (send queue space reserved for them).
    n_rdma: u32,
    /// Bytes the response's RDMA WRITEs carry to the host (0 without them): counted once
    /// its SEND completed.
    wrote: usize,
    /// Posts of send work requests for the command so far (its READ, its response, a
    /// SEND after WRITEs with T10-PI), the requests they carried, and whether its
    /// receive was posted again: counted once its SEND completed, as `wrote` is.
    posts: u8,
    wrs: u32,
    recv_reposted: bool,
    /// Its work requests posted and not completed yet, counted in the queue's
    /// [`Io::pending`] until they complete (or their post fails) and the count settles.
    out: Wrs,
    /// The host's rkey to invalidate with the response.
    invalidate: Option<u32>,
    /// The data buffers the core allocated for a keyed transfer, while `rw` does not map
    /// them (before the mapping, after the READ, or when the mapping failed).
    data: Option<DataSgls>,
    /// The RDMA READ or WRITE of keyed data: maps `data` while the host's memory is
    /// transferred (a signature context with T10-PI), and gives it back when destroyed.
    rw: Pin<KBox<RwCtx<DataSgls>>>,
    /// The response SEND, pointed at the slot's response buffer and SEND completion entry
    /// once the slot is in place (`Io::new`).
    send: Option<SendWr>,
    /// The nvmet core's request for the command.
    req: Request,
}

impl RspState {
    /// Send queue entries the command takes: its RDMA work requests and its response.
    fn send_wrs(&self) -> i32 {
        1 + self.n_rdma as i32
    }

    /// Counts a post of `wrs` send work requests for the command, before it is made (the
    /// state is the device's once it is); [`RspState::uncount_post`] takes it back if
    /// nothing was posted.
    fn count_post(&mut self, wrs: u32) {
        self.posts += 1;
        self.wrs += wrs;
    }

    fn uncount_post(&mut self, wrs: u32) {
        self.posts -= 1;
        self.wrs -= wrs;
    }
}

/// The owner of a response slot's state: the step of its command that runs.
pub(crate) type RspOwner<'a> = Owner<'a, RspState>;

/// A response slot: one command in flight.
///
/// Its state has one owner at a time ([`Slot`]): the command's start claims it free
/// (`SlotLists::take_free`), then each step hands it off to what runs next and that resumes it: the
/// completion of the work request it posted (the layer's trampoline of its entry
/// [`SEND`], [`READ`] or [`WRITE`] resumes it and passes the owner to the handler), the
/// nvmet core that executes the request (the nvmet binding's `queue_response` resumes
/// it), the wait for send queue space ([`AWAIT_SQ_SPACE`], the queue's own list). A
/// completion the slot does not wait for finds nothing to resume: siw completes a READ
/// twice when the QP is flushed before the READ's request went out (see `rdma/qp.rs`),
/// and the second completion is counted and ignored.
#[repr(C)]
pub(crate) struct RspSlot {
    send_cqe: SlotCqe<RspSlot, SEND>,
    read_cqe: SlotCqe<RspSlot, READ>,
    write_cqe: SlotCqe<RspSlot, WRITE>,
    state: Slot<RspState>,
    index: u32,
}

impl_has_request!(RspSlot, state: RspState, req);

/// A response slot parked on the list of commands waiting for send queue space.
const AWAIT_SQ_SPACE: Tag = 0;

/// The handler of a response slot's SEND completions.
pub(crate) const SEND: u64 = 0;
/// ... of its RDMA READ completions.
pub(crate) const READ: u64 = 1;
/// ... of its RDMA WRITE completions (with T10-PI).
pub(crate) const WRITE: u64 = 2;

impl_has_slot_cqe!(RspSlot, send_cqe, 0);
impl_has_slot_cqe!(RspSlot, read_cqe, 1);
impl_has_slot_cqe!(RspSlot, write_cqe, 2);

/// A queue's buffers and slots, and its send queue accounting.
///
/// # Invariants
///
/// `qp` is the QP of the queue's CM id, which outlives this value's use: the release
/// drains it and reclaims the slots before destroying it. Slots never move, and outlive
/// the QP's completions.
pub(crate) struct Io {
    qp: QpHandle,
    /// Where commands arrive: the queue's own receive slots, or an SRQ's.
    recv: RecvSlots,
    responses: DmaBuf,
    /// In-capsule data the queue accepts per command (0 on the admin queue).
    inline_size: u32,
    /// The QP offloads T10-PI (signature MRs).
    integrity: bool,
    /// Responses go out as inline sends: the device copies the 16 bytes when the SEND is
    /// posted, instead of reading them through the local DMA lkey when it transmits. Only
    /// where the QP takes inline data, on SEND_WITH_INV too (not on siw).
    inline_responses: bool,
    /// (`kvmalloc`ed: at the larger queue sizes, more than a few pages.)
    rsps: KVVec<RspSlot>,
    /// Send queue entries not reserved.
    sq_wr_avail: AtomicI32,
    /// Work requests posted and not completed, by kind, and their peaks.
    pub(crate) pending: PendingWrs,
    /// Commands on the queue's wait list: lets a release skip the list's lock when none
    /// waits (the common case), as the C transport's unlocked emptiness check does.
    waiters: AtomicU32,
}

fn new_rsp(index: u32) -> Result<RspSlot> {
    Ok(RspSlot {
        send_cqe: SlotCqe::new(),
        read_cqe: SlotCqe::new(),
        write_cqe: SlotCqe::new(),
        state: Slot::new(RspState {
            in_use: false,
            cmd: 0,
            recv: None,
            write: false,
            class: wire::Class::Other,
            stamps: Stamps::default(),
            opcode: 0,
            cid: 0,
            slot: index,
            in_capsule: false,
            data_taken: false,
            n_rdma: 0,
            wrote: 0,
            posts: 0,
            wrs: 0,
            out: Wrs::default(),
            recv_reposted: false,
            invalidate: None,
            data: None,
            rw: KBox::pin_init(RwCtx::new(), GFP_KERNEL)?,
            send: None,
            req: Request::new(),
        }),
        index,
    })
}

impl Io {
    /// Allocates and maps the buffers of a queue of depth `recv`/`send` (the host's
    /// receive and send queue sizes) and its slots, whose work requests [`Io::prepare`]
    /// makes once the queue holds it; `sq_depth` is the send queue depth the QP got,
    /// `integrity` whether it offloads T10-PI. Commands arrive in `shared` (an SRQ's
    /// slots) if given, else in receive slots of the queue's own.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new<H: CmHandler>(
        id: &CmId<H>,
        recv: u32,
        send: u32,
        inline_size: u32,
        sq_depth: u32,
        integrity: bool,
        shared: Option<Arc<SharedSlots>>,
    ) -> Result<Self> {
        let device = id.device().ok_or(ENODEV)?;
        // A response slot is busy from its command's arrival until its SEND is
        // acknowledged: `recv` commands the host awaits plus responses it has that we
        // have not seen acknowledged, which a slow completion path can let grow past
        // `send`. A command that finds no slot waits, parked, for the next one to free
        // (`handle_command`): it is served, as the C transport serves it from a separate
        // allocation, but without one. (C allocates `2 * recv` slots.)
        let nr_rsps = recv + send;
        let recv_slots = match shared {
            Some(shared) => RecvSlots::Shared(shared),
            None => RecvSlots::own(device, recv, inline_size)?,
        };
        let responses = DmaBuf::new(device, nr_rsps as usize * RESPONSE_SIZE)?;
        let mut rsps = KVVec::with_capacity(nr_rsps as usize, GFP_KERNEL)?;
        for index in 0..nr_rsps {
            rsps.push(new_rsp(index)?, GFP_KERNEL)?;
        }
        let qp = id.qp_handle().ok_or(ENODEV)?;
        let io = Self {
            qp,
            recv: recv_slots,
            responses,
            inline_size,
            integrity,
            inline_responses: id.max_inline_data() >= RESPONSE_SIZE as u32
                && device.inline_send_with_invalidate(),
            rsps,
            sq_wr_avail: AtomicI32::new(sq_depth as i32),
            pending: PendingWrs::default(),
            waiters: AtomicU32::new(0),
        };
        Ok(io)
    }

    /// Makes the work requests of the queue's slots, once the queue holds this `Io` where
    /// `find` finds it: the response SENDs and the `rdma_rw` contexts on the QP of `id`,
    /// the receives of its own receive slots (posted); and points the requests at their
    /// responses.
    /// (The completion entries live in the queue, the handler of `id`, so the QP's
    /// completions always find them.)
    pub(crate) fn prepare<Q>(
        &self,
        id: &CmId<Q>,
        find: impl for<'a> Fn(&'a Q) -> Option<&'a Io>,
    ) -> Result
    where
        Q: CmHandler,
        RspSlot: QpSlotHandler<SEND, Connection = Q>
            + QpSlotHandler<READ, Connection = Q>
            + QpSlotHandler<WRITE, Connection = Q>,
        CmdSlot: QpRecvHandler<Connection = Q>,
    {
        for (index, rsp) in self.rsps.iter().enumerate() {
            let offset = index * RESPONSE_SIZE;
            let mut state = rsp.state.claim().ok_or(EBUSY)?;
            let len = RESPONSE_SIZE as u32;
            let send = id.send_wr::<_, SEND>(
                |queue| {
                    let io = find(queue)?;
                    Some((io.rsps.get(index)?, &io.responses))
                },
                offset,
                len,
                self.inline_responses,
            )?;
            state.send = Some(send);
            let binding = id.rw_binding::<_, READ, WRITE>(|queue| find(queue)?.rsps.get(index))?;
            state.rw.as_mut().bind(binding)?;
            // (with the device as a PCI peer-to-peer client: lets the nvmet core place
            // keyed data in a namespace's P2P memory, `use_p2pmem`, as the C transport
            // allows)
            state.req.set_response(&self.responses, offset, true)?;
        }
        self.recv
            .prepare_on_qp(id, &self.qp, |queue| find(queue).map(|io| &io.recv))?;
        Ok(())
    }

    /// Response slots of the queue.
    pub(crate) fn response_slots(&self) -> u32 {
        self.rsps.len() as u32
    }

    /// Gives a shared receive slot whose command ends without a response back to its SRQ,
    /// with `received`, its token, so that the SRQ never runs dry (a queue's own slots stay
    /// unposted: the queue is ending).
    pub(crate) fn give_back_shared(&self, cmd: u32, received: Received) {
        if self.uses_srq() {
            let _ = self.recv.post(None, cmd, true, received);
        }
    }

    /// Posts the receive slot of the command `state` held again, with `received`, its
    /// token, once the command is done with it, through `open`, a pass of the queue's QP
    /// (an SRQ's slot needs none): its in-capsule data buffer is synced for the device
    /// only if the CPU took it (as the capsule always is).
    fn repost_recv(
        &self,
        open: Option<&OpenQp<'_>>,
        state: &RspState,
        received: Received,
    ) -> Result {
        self.recv.post(open, state.cmd, state.data_taken, received)
    }

    /// Whether responses go out as inline sends.
    pub(crate) fn inline_responses(&self) -> bool {
        self.inline_responses
    }

    /// Hands the slot's response to the device before its SEND is posted; an inline SEND
    /// needs nothing (the driver copies the response when it is posted).
    fn response_to_device(&self, index: u32) {
        if !self.inline_responses {
            self.responses
                .sync_range_for_device(index as usize * RESPONSE_SIZE, RESPONSE_SIZE);
        }
    }

    /// Whether the queue takes its commands from an SRQ.
    pub(crate) fn uses_srq(&self) -> bool {
        self.recv.is_shared()
    }

    /// Gives a command's receive slot back to the SRQ if the command still holds it (it
    /// ends without a response). A queue's own slots need nothing: the queue is going.
    fn return_recv(&self, state: &mut RspState) {
        if let Some(received) = state.recv.take() {
            if self.recv.is_shared() {
                let _ = self.repost_recv(None, state, received);
            }
        }
    }

    /// A command arrived (`arrival`; its buffers `token` holds): runs it on response slot
    /// `rsp_index`, which `owner` took, while `sq` is entered.
    fn start(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        sq: &SqEntered<'_>,
        arrival: Arrival,
        rsp_index: u32,
        mut owner: RspOwner<'_>,
        token: Received,
    ) {
        let Arrival {
            cmd: cmd_index,
            len: received,
            at,
        } = arrival;
        let offset = cmd_index as usize * COMMAND_SIZE;
        // (The receive completed and is not posted again before the command is done with
        // it: `token` posts it, which the command holds until then.)
        let Ok(command) = self.recv.capsules().read_64(offset) else {
            pr_err!("receive slot {cmd_index} lies outside its buffer; ending the queue\n");
            self.give_back_shared(cmd_index, token);
            drop(owner);
            queue.lists().count_released();
            queue.close(c"receive slot outside its buffer");
            return;
        };
        // (The last command released its data and context: `free_data`; the claim passes
        // over a slot whose command still holds them.)
        owner.in_use = true;
        owner.cmd = cmd_index;
        owner.recv = Some(token);
        owner.write = wire::is_write(&command);
        owner.class = wire::class(&command);
        owner.stamps = Stamps::arrived(at);
        (owner.opcode, owner.cid) = wire::opcode_and_id(&command);
        owner.trace(&*queue, ReqStep::Recv, no_status);
        owner.in_capsule = false;
        owner.data_taken = false;
        owner.n_rdma = 0;
        owner.wrote = 0;
        owner.posts = 0;
        owner.wrs = 0;
        owner.recv_reposted = false;
        owner.invalidate = None;
        let started = Request::init(
            owner,
            queue,
            |queue| {
                let io = queue.io()?;
                Some((io.rsps.get(rsp_index as usize)?, io.recv.capsules()))
            },
            offset,
            sq,
            queue.ops(),
        );
        queue.stats().commands.add(1);
        let mut owner = match started {
            Ok(Some(owner)) => owner,
            // The core completed the request already (through `queue_response`).
            Ok(None) => return,
            Err(mut owner) => {
                // (not expected: the capsule was read above)
                pr_err!("cannot start the command in receive slot {cmd_index}; ending the queue\n");
                self.return_recv(&mut owner);
                owner.in_use = false;
                drop(owner);
                queue.lists().count_released();
                queue.close(c"command start failure");
                return;
            }
        };
        let mapped = wire::data_pointer(&command).and_then(|pointer| match pointer {
            DataPointer::InCapsule { offset, len } => {
                self.map_in_capsule(queue, &mut owner, &command, offset, len, received)
            }
            DataPointer::Keyed {
                addr,
                len,
                key,
                invalidate,
            } => self
                .map_keyed(&mut owner, &command, addr, len, key, invalidate)
                .inspect(|()| {
                    if len > 0 {
                        queue.stats().keyed.add(1);
                    }
                }),
        });
        if let Err(error) = mapped {
            Request::fail(owner, error.status, error.error_loc);
            return;
        }
        if let Err((_, owner)) = self.execute(&*queue, owner) {
            queue.stats().sq_full_waits.add(1);
            self.wait_for_space(queue, rsp_index, owner);
        }
    }

    /// Reserves send queue space for the command's work requests and starts it: RDMA READ
    /// of its data, or the nvmet core's execution. If the send queue is full, the entries
    /// the command needs, and its slot back.
    fn execute<'a>(
        &self,
        queue: &impl Connection,
        mut owner: RspOwner<'a>,
    ) -> Result<(), (i32, RspOwner<'a>)> {
        let needed = owner.send_wrs();
        // (acquire and release: see `run_waiting`)
        if self.sq_wr_avail.fetch_sub(needed, AcqRel) < needed {
            self.sq_wr_avail.fetch_add(needed, Relaxed);
            return Err((needed, owner));
        }
        let stamps = &mut owner.stamps;
        Stamps::stamp(stamps.recv, &mut stamps.ready);
        if owner.write && owner.req.transfer_len() > 0 && !owner.in_capsule {
            // (the context was initialised by `map_keyed`; a READ chain the provider queued
            // whole although the post failed completes, flushed, through `read_done`. A
            // chain it took only in part, its last, signalled request not among what it
            // took, would leave the slot waiting until the queue's release reclaims it
            // after the drain: not seen with rxe or siw, whose valid chains fail whole.)
            let wrs = owner.n_rdma;
            owner.count_post(wrs);
            self.pending.posted(&mut owner.out, Wrs::reads(wrs));
            if let Err((_, Some(mut owner))) =
                owner.post(&self.qp, |state| state.rw.as_mut().prepare())
            {
                owner.uncount_post(wrs);
                self.pending.settled(&mut owner.out);
                // (no RDMA READ phase: the core's completion follows at once)
                owner.stamps.submit = owner.stamps.ready;
                Request::complete(owner, status::DATA_XFER_ERROR);
            }
        } else {
            owner.stamps.submit = owner.stamps.ready;
            owner.trace(queue, ReqStep::Submit, no_status);
            Request::execute(owner);
        }
        Ok(())
    }

    /// Undoes what the command of `owner`'s response slot holds and frees the slot; then
    /// retries waiting commands.
    /// `end` is what shows the command's transfer done, if it was posted.
    fn release(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        mut owner: RspOwner<'_>,
        end: TransferEnd<'_>,
    ) {
        owner.trace(&*queue, ReqStep::Free, |state| state.req.status());
        // (acquire and release: see `run_waiting`, which this release ends with)
        self.sq_wr_avail.fetch_add(owner.send_wrs(), AcqRel);
        self.pending.settled(&mut owner.out);
        free_data(&mut owner, end);
        owner.in_use = false;
        // (sequentially consistent: a command parking for a slot sees it free, or
        // `start_parked` below sees that command)
        owner.free_seqcst();
        queue.lists().count_released();
        self.run_waiting(queue);
        queue.lists().start_parked(queue, self);
    }

    /// Ends a command that was mapped but never executed, on a queue that is going.
    fn abandon(&self, mut owner: RspOwner<'_>) {
        free_data(&mut owner, TransferEnd::NotPosted);
        self.return_recv(&mut owner);
        owner.in_use = false;
        // The request was started and never executed: it ends here. (Last: it may drop the
        // SQ's last reference, after which the release can reclaim the slots.)
        owner.req.uninit();
    }

    /// After the queue's QP was drained (`drained`): frees what commands that never
    /// completed still hold. (The queue's sq is destroyed first: the core has given every
    /// request back.)
    pub(crate) fn reclaim(&self, drained: &Drained<'_>) {
        let qp_ended = drained.ended();
        for rsp in &self.rsps {
            // Every slot is free again (a command whose response could not be posted left
            // its slot free with what it held), unless what it waited for never came (a
            // provider loses completions when a connection drops under it).
            let owner = rsp.state.claim().or_else(|| {
                let taken = qp_ended
                    .as_ref()
                    .and_then(|ended| rsp.state.take_after(ended));
                match &taken {
                    Some(_) => pr_warn!(
                        "response slot {} never got the completion it waited for; reclaimed after the drain\n",
                        rsp.index
                    ),
                    None => pr_warn!(
                        "response slot {} is still handed off after the drain; what it holds is leaked\n",
                        rsp.index
                    ),
                }
                taken
            });
            let Some(mut owner) = owner else {
                continue;
            };
            if owner.in_use || owner.rw.is_mapped() {
                free_data(&mut owner, TransferEnd::Drained(drained));
                self.return_recv(&mut owner);
                owner.in_use = false;
            }
        }
    }
}
