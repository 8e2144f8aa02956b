// SPDX-License-Identifier: GPL-2.0

//! The records of a QP's work requests: one per posted request, with its `ib_cqe`, its
//! completion closure and what the request touches, kept on the QP's list
//! ([`QpRecords`]) from posting until its first successful completion or the QP's end
//! (see the parent module for why), and the completion trampoline that runs the closure.

use super::{MrEffectKind, WorkCompletion};
use crate::rdma::{bindings, rw::RwCtx, sgl::BufSgl, DmaBuf, Mr};
use core::pin::Pin;
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        SpinLock,
    },
};

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
pub(super) struct RecordHeader {
    pub(super) cqe: bindings::ib_cqe,
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
pub(super) struct InFlight<F> {
    pub(super) header: RecordHeader,
    on_done: Option<F>,
    buf: Option<DmaBuf>,
    mr: Option<(Mr, MrEffectKind)>,
    /// The `rdma_rw` context of an RDMA READ or WRITE (holding the buffer it maps),
    /// destroyed by the request's first completion.
    pub(super) rw: Option<Pin<KBox<RwCtx<BufSgl>>>>,
}

/// Completion trampoline for work requests posted with closure type `F`.
///
/// # Safety
///
/// Called by the RDMA core with a completion whose `wr_cqe` is the `cqe` of an
/// `InFlight<F>` made by `in_flight` and posted, which is on its QP's [`QpRecords`]
/// (alive while completions of the QP run).
unsafe extern "C" fn done<F: FnOnce(&WorkCompletion) + Send + 'static>(
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
        // A provider may still walk the chain of requests it is completing (siw flushes
        // each request of a chain posted on a QP in error before it reads the next): the
        // context that holds them goes once the posts under way returned.
        while records.posting.load(Acquire) != 0 {
            kernel::processor::cpu_relax();
        }
        // SAFETY: the transfer's requests are done: this is the first completion of the
        // last one, the only one signaled (failed or flushed: done too). Unmapped before
        // the closure looks at what a READ brought.
        if let Some(lists) = unsafe { rw.as_mut().destroy_unchecked() } {
            lists.transferred();
        }
    }
    if let Some((mr, effect)) = mr {
        mr.complete(*effect, Some(&completion));
    }
    if let Some(on_done) = on_done.take() {
        on_done(&completion);
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
        drop(unsafe { rw.as_mut().destroy_unchecked() });
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
    /// The QP is drained (posting closed, its drain returned: `Verbs::drain`) and not
    /// destroyed yet.
    pub(in crate::rdma) unsafe fn end_transfers(&self) {
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
    pub(super) fn post(&self, post: impl FnOnce() -> Result) -> Result {
        self.posting.fetch_add(1, Full);
        let result = if self.closed.load(Relaxed) {
            Err(crate::rdma::code::enotconn())
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

/// Allocates the record of a work request about to be posted and puts it on the QP's
/// list, which owns it from then on: its completion, a refused post (`finish_post`) or
/// the QP's end frees it. Atomic allocation: posts may come from completion callbacks in
/// softirq context.
pub(super) fn in_flight<F: FnOnce(&WorkCompletion) + Send + 'static>(
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
pub(super) fn finish_post<F: FnOnce(&WorkCompletion) + Send + 'static>(
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
                mr.complete(*effect, None);
            }
            if let Some(rw) = (*record).rw.as_mut() {
                drop(rw.as_mut().destroy_unchecked());
            }
            records.remove_and_free(record.cast());
        }
    }
    Err(Error::from_errno(ret))
}
