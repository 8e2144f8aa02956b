// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: posting work requests and running their completions.
//!
//! Every work request is signalled and carries a small heap record with its `ib_cqe`,
//! the caller's completion closure and clones of the buffers and MRs it touches; an RDMA
//! READ or WRITE carries the `rdma_rw` context it went through (see [`Qp::post_send`]). The
//! record is freed when the completion runs, so memory a work request uses cannot be
//! freed or unmapped while the device may still access it, and no completion is ever
//! silently lost (the seed demo's unsignalled REG_MR was).
//!
//! The QP keeps every record it has in flight on a list ([`QpRecords`]) until it is gone,
//! because providers do not always complete each request exactly once while a QP is torn
//! down, and a record's closure holds what its request needs (buffers, the connection):
//!
//! - siw (7.2) completes an RDMA READ twice when the QP is flushed between posting the
//!   READ and sending its request (the READ sits both in the ORQ and, still queued, in the
//!   transmit slot, and `siw_sq_flush` completes both). A failed request's record
//!   therefore stays on the list, emptied, and a second completion finds it marked
//!   completed and is ignored and counted, instead of freeing it a second time.
//! - siw also loses completions when a connection closes under in-flight requests (seen
//!   in a stress of dropped connections; the SQ is not always flushed on its way through
//!   CLOSING). The records those requests left are freed with the list, once the QP and
//!   its CQ are gone, which releases their buffers (and the device references the
//!   buffers hold) and counts them.
//! - Posting closes before the QP is drained: a request posted after the drain's marker
//!   would be flushed after it, into a CQ nobody polls any more.

use super::{
    bindings,
    qp_handle::QpHandle,
    rw::{Direction, Remote, RwCtx},
    sgl::BufSgl,
    DmaBuf, Mr, WorkCompletion,
};
use core::{pin::Pin, ptr::NonNull};
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        SpinLock,
    },
};

/// A local memory range for a work request's scatter/gather entry.
pub(crate) struct Local<'a> {
    /// The buffer.
    pub(crate) buf: &'a DmaBuf,
    /// Offset into the buffer.
    pub(crate) offset: usize,
    /// Length in bytes.
    pub(crate) len: u32,
    /// The lkey: the PD's `local_dma_lkey` or a registered MR's lkey.
    pub(crate) lkey: u32,
}

/// A peer's memory range, as it advertised it: address, length and rkey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemoteBuf {
    /// The address in the peer's key space (an MR's iova or a DMA address).
    pub(crate) addr: u64,
    /// The rkey that grants access.
    pub(crate) rkey: u32,
    /// Length in bytes.
    pub(crate) len: u32,
}

/// The send queue operations the layer offers.
pub(crate) enum SendOp<'a> {
    /// SEND `local`; with `invalidate`, SEND_WITH_INV of that peer rkey.
    Send {
        /// What to send.
        local: Local<'a>,
        /// A peer rkey to invalidate with the send.
        invalidate: Option<u32>,
    },
    /// RDMA WRITE `local` to `remote`, through an `rdma_rw` context (see [`Qp::post_send`]).
    Write {
        /// The source.
        local: Local<'a>,
        /// The target at the peer.
        remote: RemoteBuf,
    },
    /// RDMA READ `remote` into `local`, through an `rdma_rw` context (see [`Qp::post_send`]);
    /// with `invalidate`, RDMA_READ_WITH_INV of that local MR (iWARP devices only), posted
    /// as it is.
    Read {
        /// The sink.
        local: Local<'a>,
        /// The source at the peer.
        remote: RemoteBuf,
        /// A local MR to invalidate when the read completes.
        invalidate: Option<&'a Mr>,
    },
    /// Fast registration of `mr` (mapped with [`Mr::map`]) with `access` rights.
    Register {
        /// The MR.
        mr: &'a Mr,
        /// `IB_ACCESS_*` flags.
        access: u32,
    },
    /// Local invalidation of `mr`.
    Invalidate {
        /// The MR.
        mr: &'a Mr,
    },
}

/// The start of every record, whatever its closure type: what a completion needs to
/// tell a first completion from a duplicate, and what the QP's list needs to hold and
/// later free the record.
///
/// # Invariants
///
/// `completed` is false from posting until the record's first completion. From posting
/// until it is freed, the record is on its QP's list (`prev`, `next`, guarded by the
/// list's lock), which owns it; a successful first completion takes it off and frees it.
#[repr(C)]
struct RecordHeader {
    cqe: bindings::ib_cqe,
    completed: Atomic<bool>,
    prev: *mut RecordHeader,
    next: *mut RecordHeader,
    /// Frees the whole record (its closure type erased).
    free: unsafe fn(*mut RecordHeader),
    /// Destroys the record's `rdma_rw` context, if it still has one (its closure type
    /// erased).
    end_transfer: unsafe fn(*mut RecordHeader),
    /// The list the record is on: its QP's, which outlives every completion of the QP
    /// (see [`QpRecords`]).
    records: *const QpRecords,
}

/// The record that travels with a posted work request.
#[repr(C)]
struct InFlight<F> {
    header: RecordHeader,
    on_done: Option<F>,
    buf: Option<DmaBuf>,
    mr: Option<(Mr, MrEffectKind)>,
    /// The `rdma_rw` context of an RDMA READ or WRITE (holding the buffer it maps),
    /// destroyed by the request's first completion.
    rw: Option<Pin<KBox<RwCtx<BufSgl>>>>,
}

/// What a work request does to the MR it carries.
#[derive(Clone, Copy)]
pub(super) enum MrEffectKind {
    /// Registers it (REG_MR).
    Registered,
    /// Invalidates it (LOCAL_INV, READ_WITH_INV).
    Invalidated,
}

/// Completion trampoline for work requests posted with closure type `F`.
///
/// # Safety
///
/// Called by the RDMA core with a completion whose `wr_cqe` is the `cqe` of an
/// `InFlight<F>` made by `in_flight` and posted, which is on its QP's [`QpRecords`]
/// (alive while completions of the QP run).
unsafe extern "C" fn done<F: FnOnce(WorkCompletion) + Send + 'static>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the core passes a valid work completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: `wr_cqe` is the member in use: every request is posted with a `wr_cqe`.
    let cqe = unsafe { wc.__bindgen_anon_1.wr_cqe };
    let header = cqe.cast::<RecordHeader>();
    // SAFETY: `cqe` is the first field of a record's header (`#[repr(C)]`); the record is
    // on its QP's list, so allocated (see the function's safety section).
    let (records, completed) = unsafe { (&*(*header).records, &(*header).completed) };
    if completed.load(Acquire) {
        // A provider's second completion of the request: the first one ran.
        records.duplicates.add(1, Relaxed);
        return;
    }
    let completion = WorkCompletion::from_raw(wc);
    let ok = completion.is_ok();
    let record = cqe.cast::<InFlight<F>>();
    // INVARIANT: its first completion is running.
    completed.store(true, Release);
    // SAFETY: this is the record's first completion, the one step that uses its contents
    // (`on_done`, `buf`, `mr`, `rw`: the list only links the header and frees the record
    // after the QP's completions are over); a record of `F`.
    let (on_done, buf, mr, rw) = unsafe {
        (
            &mut (*record).on_done,
            &mut (*record).buf,
            &mut (*record).mr,
            &mut (*record).rw,
        )
    };
    if let Some(mut rw) = rw.take() {
        // SAFETY: the transfer's requests are done: this is the first completion of the
        // last one, the only one signaled (failed or flushed: done too). Unmapped before
        // the closure looks at what a READ brought.
        drop(unsafe { rw.as_mut().destroy() });
    }
    if let Some((mr, effect)) = mr {
        mr.complete(*effect, ok);
    }
    if let Some(on_done) = on_done.take() {
        on_done(completion);
    }
    *buf = None;
    *mr = None;
    if ok {
        // SAFETY: on the list (invariant), ours to take off after a successful
        // completion: no second one follows success.
        unsafe { records.remove_and_free(header) };
    }
    // A failed request stays on the list, emptied: a provider may complete it again.
}

/// Frees a record of closure type `F` (the header's `free`).
///
/// # Safety
///
/// `header` starts an `InFlight<F>` leaked from a `KBox`, owned by the caller.
unsafe fn free_record<F>(header: *mut RecordHeader) {
    // SAFETY: see the function's safety section.
    drop(unsafe { KBox::from_raw(header.cast::<InFlight<F>>()) });
}

/// Destroys the `rdma_rw` context of a record of closure type `F`, if it has one (the
/// header's `end_transfer`).
///
/// # Safety
///
/// `header` starts an `InFlight<F>` on its QP's list, whose QP is drained and not
/// destroyed yet, and whose completion does not run (the drain ran every completion the
/// provider delivers).
unsafe fn end_transfer_of<F>(header: *mut RecordHeader) {
    // SAFETY: a record of `F`, which nothing else uses now (see the function's safety
    // section).
    let rw = unsafe { (*header.cast::<InFlight<F>>()).rw.take() };
    if let Some(mut rw) = rw {
        // SAFETY: the QP is drained: the device is done with the transfer, whose
        // completion the provider never delivered; its QP (and the MR pool the context
        // took MRs from) is still there.
        drop(unsafe { rw.as_mut().destroy() });
    }
}

/// The list head of a QP's records.
struct RecordList {
    head: *mut RecordHeader,
}

/// A QP's bookkeeping of its work request records: every record from posting until its
/// successful completion (or the QP's end), the gate that closes posting before the QP is
/// drained, and counts of what providers did wrong (see the module documentation).
///
/// # Invariants
///
/// `list` holds records leaked from `KBox`es, which it owns. Its owner drops it only
/// after the QP's CQ is gone (no completion of the QP runs any more), and does not move
/// it while the QP exists. Once `closed` is set and `posting` seen at 0, no request is
/// posted any more.
#[pin_data(PinnedDrop)]
pub(crate) struct QpRecords {
    #[pin]
    list: SpinLock<RecordList>,
    duplicates: Atomic<u32>,
    closed: Atomic<bool>,
    /// Posts between their check of `closed` and the provider's return.
    posting: Atomic<u32>,
}

impl QpRecords {
    /// An empty list, open for posting.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            list <- new_spinlock!(RecordList { head: core::ptr::null_mut() }, "QpRecords::list"),
            duplicates: Atomic::new(0),
            closed: Atomic::new(false),
            posting: Atomic::new(0),
        })
    }

    /// Second completions of a request that the provider delivered and the layer ignored.
    pub(crate) fn duplicates(&self) -> u32 {
        self.duplicates.load(Relaxed)
    }

    /// Closes posting and waits for the posts under way: what is posted from now on fails
    /// with `ENOTCONN`, so the drain that follows completes every request there is.
    /// Process context.
    pub(crate) fn close(&self) {
        // Fully ordered on both sides (here and in `post`): either the post sees `closed`
        // or this sees its `posting`, and then waits for it to reach the provider.
        self.closed.xchg(true, Full);
        while self.posting.load(Acquire) != 0 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_micros(50));
        }
    }

    /// Once the QP is drained, before it is destroyed: destroys the `rdma_rw` contexts of
    /// requests whose completion the provider never delivered (siw loses some when a
    /// connection drops under them), so that their MRs go back to the QP's pool and their
    /// buffers are released with their records.
    ///
    /// # Safety
    ///
    /// The QP is drained (posting closed, `ib_drain_qp` returned) and not destroyed yet.
    pub(super) unsafe fn end_transfers(&self) {
        let list = self.list.lock();
        let mut next = list.head;
        while !next.is_null() {
            // SAFETY: a record on the list, whose links the lock guards; no completion of
            // the drained QP runs any more (the function's safety section).
            unsafe {
                let record = next;
                next = (*record).next;
                ((*record).end_transfer)(record);
            }
        }
    }

    /// Runs `post` unless posting is closed (`ENOTCONN`).
    fn post(&self, post: impl FnOnce() -> Result) -> Result {
        self.posting.fetch_add(1, Full);
        let result = if self.closed.load(Relaxed) {
            Err(super::code::enotconn())
        } else {
            post()
        };
        self.posting.fetch_sub(1, Release);
        result
    }

    /// Puts a new record on the list, which owns it from now on.
    ///
    /// # Safety
    ///
    /// `record` was leaked from a `KBox` and is owned by the caller; it is not on a list.
    unsafe fn insert(&self, record: *mut RecordHeader) {
        let mut list = self.list.lock();
        // SAFETY: the record is the caller's; the old head, if any, is on this list,
        // whose links the lock guards.
        unsafe {
            (*record).prev = core::ptr::null_mut();
            (*record).next = list.head;
            if !list.head.is_null() {
                (*list.head).prev = record;
            }
        }
        // INVARIANT: the record joins the list, which owns it.
        list.head = record;
    }

    /// Takes a record off the list and frees it.
    ///
    /// # Safety
    ///
    /// `record` is on this list, and nothing uses it any more.
    unsafe fn remove_and_free(&self, record: *mut RecordHeader) {
        let mut list = self.list.lock();
        // SAFETY: the record and its neighbours are on this list, whose links the lock
        // guards.
        unsafe {
            let (prev, next) = ((*record).prev, (*record).next);
            if prev.is_null() {
                list.head = next;
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
        }
        drop(list);
        // SAFETY: off the list, so the caller's now; unused (see the safety section).
        unsafe { ((*record).free)(record) };
    }
}

#[pinned_drop]
impl PinnedDrop for QpRecords {
    fn drop(self: Pin<&mut Self>) {
        let (mut lost, mut next) = (0u32, self.list.lock().head);
        while !next.is_null() {
            // SAFETY: a record on the list, owned by it (type invariant); the QP's
            // completions are over, so nothing else uses it.
            unsafe {
                let record = next;
                next = (*record).next;
                if !(*record).completed.load(Relaxed) {
                    lost += 1;
                }
                ((*record).free)(record);
            }
        }
        if lost != 0 {
            pr_warn!(
                "the device never completed {} work request(s); their buffers were released with the QP\n",
                lost
            );
        }
    }
}

// SAFETY: the list only holds records whose closures and buffers are `Send`.
unsafe impl Send for QpRecords {}
// SAFETY: the list's links are used under its lock; the rest is atomics.
unsafe impl Sync for QpRecords {}

/// A queue pair, borrowed from the [`super::CmId`] that owns it.
pub(crate) struct Qp<'a> {
    qp: NonNull<bindings::ib_qp>,
    port: u32,
    records: &'a QpRecords,
}

impl<'a> Qp<'a> {
    /// Wraps the QP of a live CM id.
    ///
    /// # Safety
    ///
    /// `qp`, of port `port`, stays live while the `Qp` exists, and is drained (all its
    /// work requests completed) before it is destroyed; `records` is its own, freed only
    /// once no completion of the QP runs any more.
    pub(crate) unsafe fn from_raw(
        qp: NonNull<bindings::ib_qp>,
        port: u32,
        records: &'a QpRecords,
    ) -> Self {
        Self { qp, port, records }
    }

    /// Posts a receive into `local`; `on_done` runs with its completion.
    pub(crate) fn post_recv<F>(&self, local: Local<'_>, on_done: F) -> Result
    where
        F: FnOnce(WorkCompletion) + Send + 'static,
    {
        check_range(&local)?;
        self.records.post(|| self.post_recv_open(local, on_done))
    }

    fn post_recv_open<F>(&self, local: Local<'_>, on_done: F) -> Result
    where
        F: FnOnce(WorkCompletion) + Send + 'static,
    {
        let mut sge = sge(&local);
        let record = in_flight(self.records, on_done, Some(local.buf.clone()), None, None)?;
        // SAFETY: all-zeroes is a valid, empty receive work request.
        let mut wr: bindings::ib_recv_wr = unsafe { core::mem::zeroed() };
        wr.__bindgen_anon_1.wr_cqe = record.cast();
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad: *const bindings::ib_recv_wr = core::ptr::null();
        // SAFETY: the QP is live (invariant of `from_raw`); the provider copies `wr` and
        // `sge` before returning (and may point `bad` at `wr`); the record keeps the
        // buffer mapped until completion.
        let ret = unsafe { bindings::rdma_rs_ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) };
        finish_post::<F>(self.records, ret, core::ptr::eq(bad, &wr), record)
    }

    /// Posts a send queue operation, signalled; `on_done` runs with its completion.
    /// `ENOTCONN` once the QP is being drained.
    ///
    /// An RDMA READ (without invalidate) or WRITE goes through an `rdma_rw` context, as a
    /// kernel ULP's does: the RDMA core reaches `local` through the PD's local DMA lkey, or
    /// registers it through MRs from the QP's pool where the device needs that (iWARP
    /// READs: `QpCaps::rdma_ctxs`), and may post several requests, the last one signaled;
    /// `local.lkey` is not used. The context is destroyed when that one completes.
    pub(crate) fn post_send<F>(&self, op: SendOp<'_>, on_done: F) -> Result
    where
        F: FnOnce(WorkCompletion) + Send + 'static,
    {
        self.records.post(|| self.post_send_open(op, on_done))
    }

    fn post_send_open<F>(&self, op: SendOp<'_>, on_done: F) -> Result
    where
        F: FnOnce(WorkCompletion) + Send + 'static,
    {
        // SAFETY: all-zeroes is a valid, empty work request of each kind.
        let mut rdma: bindings::ib_rdma_wr = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        let mut reg: bindings::ib_reg_wr = unsafe { core::mem::zeroed() };
        let mut sge = bindings::ib_sge::default();
        let mut use_reg = false;
        let (buf, mr) = match op {
            SendOp::Write { local, remote } => {
                return self.post_rw(local, remote, Direction::ToRemote, on_done);
            }
            SendOp::Read {
                local,
                remote,
                invalidate: None,
            } => return self.post_rw(local, remote, Direction::FromRemote, on_done),
            SendOp::Send { local, invalidate } => {
                fill_sge(&mut rdma.wr, &mut sge, &local)?;
                match invalidate {
                    Some(rkey) => {
                        rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV;
                        rdma.wr.ex.invalidate_rkey = rkey;
                    }
                    None => rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND,
                }
                (Some(local.buf.clone()), None)
            }
            SendOp::Read {
                local,
                remote,
                invalidate: Some(mr),
            } => {
                fill_sge(&mut rdma.wr, &mut sge, &local)?;
                rdma.remote_addr = remote.addr;
                rdma.rkey = remote.rkey;
                rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV;
                rdma.wr.ex.invalidate_rkey = mr.lkey();
                (
                    Some(local.buf.clone()),
                    Some((mr.clone(), MrEffectKind::Invalidated)),
                )
            }
            SendOp::Register { mr, access } => {
                use_reg = true;
                reg.wr.opcode = bindings::ib_wr_opcode_IB_WR_REG_MR;
                reg.mr = mr.as_raw();
                reg.key = mr.rkey();
                reg.access = i32::try_from(access).map_err(|_| EINVAL)?;
                (None, Some((mr.clone(), MrEffectKind::Registered)))
            }
            SendOp::Invalidate { mr } => {
                rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_LOCAL_INV;
                rdma.wr.ex.invalidate_rkey = mr.rkey();
                (None, Some((mr.clone(), MrEffectKind::Invalidated)))
            }
        };
        if let Some((mr, effect)) = &mr {
            mr.begin(*effect)?;
        }
        let record = match in_flight(self.records, on_done, buf, mr.clone(), None) {
            Ok(record) => record,
            Err(e) => {
                if let Some((mr, effect)) = &mr {
                    mr.complete(*effect, false);
                }
                return Err(e);
            }
        };
        let wr = if use_reg { &mut reg.wr } else { &mut rdma.wr };
        wr.__bindgen_anon_1.wr_cqe = record.cast();
        wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // SAFETY: the QP is live (invariant of `from_raw`); the provider copies the request
        // and its SGE before returning (and may point `bad` at it); the record keeps
        // buffers and MRs alive until the completion, which is signalled, runs.
        let ret = unsafe { bindings::rdma_rs_ib_post_send(self.qp.as_ptr(), wr, &mut bad) };
        finish_post::<F>(self.records, ret, core::ptr::eq(bad, wr), record)
    }
}

impl Qp<'_> {
    /// RDMA READ (`dir` from the remote) or WRITE of `local` with `remote`, through an
    /// `rdma_rw` context that the request's record owns (see [`Qp::post_send`]).
    fn post_rw<F>(&self, local: Local<'_>, remote: RemoteBuf, dir: Direction, on_done: F) -> Result
    where
        F: FnOnce(WorkCompletion) + Send + 'static,
    {
        check_range(&local)?;
        let lists = BufSgl::new(local.buf, local.offset, local.len)?;
        let ctx = KBox::pin_init(RwCtx::new(), GFP_KERNEL)?;
        // SAFETY: the QP is live while this `Qp` exists and until its drain, which runs
        // every completion first (invariant of `from_raw`); the context mapped through
        // this handle is destroyed by its request's first completion, or, never
        // completed, leaked with its record at the QP's end (`RwCtx`'s `Drop`).
        let qp = unsafe { QpHandle::new(self.qp, self.port) };
        let remote = Remote {
            addr: remote.addr,
            rkey: remote.rkey,
        };
        self.records.post(|| {
            // (the record first: once mapped, the context is only dropped through it)
            let record = in_flight(self.records, on_done, None, None, Some(ctx))?;
            // SAFETY: the record was just made, with its context, and nothing else uses
            // it until it is posted below; its `cqe` is the entry its completion runs.
            let (cqe, rw) = unsafe { (&raw mut (*record).header.cqe, (*record).rw.as_mut()) };
            let prepared = match rw {
                Some(rw) => rw
                    .as_mut()
                    .init(&qp, lists, remote, dir, None)
                    .map_err(|(e, _)| e)
                    .and_then(|_| rw.as_mut().wrs(cqe, core::ptr::null_mut())),
                None => Err(EINVAL),
            };
            let first = match prepared {
                Ok((first, _)) => first,
                // Nothing posted: the record goes, and its context with what it mapped.
                Err(e) => return finish_post::<F>(self.records, e.to_errno(), true, record),
            };
            let mut bad: *const bindings::ib_send_wr = core::ptr::null();
            // SAFETY: the QP is live; `first` heads the context's requests, which the
            // provider copies before it returns; the last carries the record's entry, and
            // the record (with the context and the buffer it maps) lives until that
            // completion ran or the QP ended (`in_flight`).
            let ret = unsafe { bindings::rdma_rs_ib_post_send(self.qp.as_ptr(), first, &mut bad) };
            finish_post::<F>(self.records, ret, core::ptr::eq(bad, first), record)
        })
    }
}

/// Points `wr` at a single SGE describing `local`.
fn fill_sge(
    wr: &mut bindings::ib_send_wr,
    sge: &mut bindings::ib_sge,
    local: &Local<'_>,
) -> Result {
    check_range(local)?;
    *sge = self::sge(local);
    wr.sg_list = sge;
    wr.num_sge = 1;
    Ok(())
}

fn check_range(local: &Local<'_>) -> Result {
    let end = local.offset.checked_add(local.len as usize).ok_or(EINVAL)?;
    if end > local.buf.len() || local.len == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

fn sge(local: &Local<'_>) -> bindings::ib_sge {
    bindings::ib_sge {
        addr: local.buf.dma_addr(local.offset),
        length: local.len,
        lkey: local.lkey,
    }
}

/// Allocates the record of a work request about to be posted and puts it on the QP's
/// list, which owns it from then on: its completion, a refused post (`finish_post`) or
/// the QP's end frees it. Atomic allocation: posts may come from completion callbacks in
/// softirq context.
fn in_flight<F: FnOnce(WorkCompletion) + Send + 'static>(
    records: &QpRecords,
    on_done: F,
    buf: Option<DmaBuf>,
    mr: Option<(Mr, MrEffectKind)>,
    rw: Option<Pin<KBox<RwCtx<BufSgl>>>>,
) -> Result<*mut InFlight<F>> {
    let record = KBox::new(
        InFlight {
            // INVARIANT: not completed; put on the QP's own list below, which outlives its
            // completions (invariant of `Qp::from_raw`).
            header: RecordHeader {
                cqe: bindings::ib_cqe {
                    done: Some(done::<F>),
                },
                completed: Atomic::new(false),
                prev: core::ptr::null_mut(),
                next: core::ptr::null_mut(),
                free: free_record::<F>,
                end_transfer: end_transfer_of::<F>,
                records,
            },
            on_done: Some(on_done),
            buf,
            mr,
            rw,
        },
        GFP_ATOMIC,
    )?;
    let record = KBox::into_raw(record);
    // SAFETY: just leaked, ours.
    unsafe { records.insert(record.cast()) };
    Ok(record)
}

/// Takes the record back if the post failed and the provider says it did not take the
/// request (`refused`: the request is the provider's `bad_wr`): no completion will run for
/// it. A provider may also fail a post whose request it queued anyway (siw, when it
/// cannot start a READ: the request stays in its send queue and is flushed later), so
/// without that word the record stays on the list, for its completion or the QP's end.
fn finish_post<F: FnOnce(WorkCompletion) + Send + 'static>(
    records: &QpRecords,
    ret: c_int,
    refused: bool,
    record: *mut InFlight<F>,
) -> Result {
    if ret == 0 {
        return Ok(());
    }
    if refused {
        // SAFETY: the provider did not take the request (the first of its chain), so no
        // completion will use the record, and an `rdma_rw` context in it posted nothing;
        // `in_flight` put it on this list.
        unsafe {
            if let Some((mr, effect)) = &(*record).mr {
                mr.complete(*effect, false);
            }
            if let Some(rw) = (*record).rw.as_mut() {
                drop(rw.as_mut().destroy());
            }
            records.remove_and_free(record.cast());
        }
    }
    Err(Error::from_errno(ret))
}
