// SPDX-License-Identifier: GPL-2.0

//! RDMA READ and WRITE between local scatterlists and a remote buffer, through the RDMA
//! core's `rdma_rw` API: an [`RwCtx`] maps the lists for a QP's device (registering them
//! through MRs where the device needs that, or through a signature MR with T10-PI), posts
//! the transfer's work requests alone or chained before a SEND, and unmaps them again.
//!
//! The lists stay the caller's but are lent to the context while it is mapped: [`RwCtx::init`]
//! takes them (any [`SgLists`] owner, such as the nvmet core's request data) and
//! [`RwCtx::destroy`] gives them back, so they cannot be freed while the device may still
//! reach them.
//!
//! C header: [`include/rdma/rw.h`].
//!
//! [`include/rdma/rw.h`]: srctree/include/rdma/rw.h

use super::{
    bindings,
    cqe::Cqe,
    qp_handle::{QpHandle, SendWr},
    signature::{SigAttrs, SigError},
    slot::Prepared,
    Device, WorkCompletion,
};
use core::{marker::PhantomData, pin::Pin, ptr};
use kernel::{dma::DataDirection, prelude::*, types::Opaque};

/// Scatterlists a transfer maps: its data and, for a transfer with T10-PI, the protection
/// information.
///
/// # Safety
///
/// The lists that [`SgLists::data`] and [`SgLists::metadata`] return are valid
/// scatterlists of the given numbers of entries, the same on every call, and stay valid
/// and unchanged while the value lives, wherever it is moved.
pub(crate) unsafe trait SgLists {
    /// The data's scatterlist and its number of entries.
    fn data(&self) -> (*mut bindings::scatterlist, u32);
    /// The protection information's scatterlist and its number of entries (null and 0
    /// when there is none).
    fn metadata(&self) -> (*mut bindings::scatterlist, u32);
}

/// The MRs an `rdma_rw` transfer of up to `max_pages` pages needs on `port` of `device`
/// (`rdma_rw_mr_factor`): what a QP's `rdma_rw` resources are sized by.
pub(crate) fn mr_factor(device: &Device, port: u32, max_pages: u32) -> u32 {
    // SAFETY: the device is registered (`Device`'s invariant); the call only reads its
    // capabilities.
    unsafe { bindings::rdma_rw_mr_factor(device.as_raw(), port, max_pages) }
}

/// Which way a transfer moves its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// RDMA READ: the remote buffer into the local lists.
    FromRemote,
    /// RDMA WRITE: the local lists to the remote buffer.
    ToRemote,
}

impl Direction {
    /// The `dma_data_direction` of the local lists.
    fn dma(self) -> DataDirection {
        match self {
            // (the device writes the local memory)
            Self::FromRemote => DataDirection::FromDevice,
            Self::ToRemote => DataDirection::ToDevice,
        }
    }
}

/// The remote buffer of a transfer: the peer's address and the key it registered it with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Remote {
    /// Address in the peer's memory.
    pub(crate) addr: u64,
    /// The peer's rkey for it.
    pub(crate) rkey: u32,
}

/// What a mapped context was initialised on; its destroy takes the same.
struct Mapping<S> {
    lists: S,
    qp: QpHandle,
    dir: Direction,
    signature: bool,
}

/// The completion entries of the transfers a context posts alone, by direction.
struct Completions {
    from_remote: *mut bindings::ib_cqe,
    to_remote: *mut bindings::ib_cqe,
}

/// An `rdma_rw_ctx`: one transfer between local scatterlists and a remote buffer.
///
/// Pinned: a context of one SGE points into itself once initialised. Made once per slot
/// with [`RwCtx::new`], given its completion entries once ([`RwCtx::set_completions`]),
/// and used for one transfer after another.
///
/// # Invariants
///
/// - `mapping` is `Some` exactly while `ctx` is initialised: by `rdma_rw_ctx_init` on
///   `mapping.lists.data()`, or by `rdma_rw_ctx_signature_init` on both of its lists when
///   `mapping.signature`, for `mapping.qp` and `mapping.dir`. It then owes the matching
///   destroy, with the same arguments (see [`RwCtx::destroy`]).
/// - `posted` is true once the mapped transfer's work requests were posted: they are
///   posted at most once per mapping. `ends_with` is then the completion entry (address)
///   of the last request of that post: the transfer's own last one, or the SEND it was
///   chained before; its completion shows the transfer done.
/// - `completions` names entries whose owners stay alive and in place while the context
///   is used, until the completions of its posts ran or their QP was drained (the promise
///   of [`RwCtx::set_completions`]'s caller).
#[pin_data(PinnedDrop)]
pub(crate) struct RwCtx<S: SgLists> {
    #[pin]
    ctx: Opaque<bindings::rdma_rw_ctx>,
    mapping: Option<Mapping<S>>,
    posted: bool,
    ends_with: usize,
    completions: Option<Completions>,
}

/// What shows that a mapped transfer's work requests are done, for [`RwCtx::destroy`].
pub(crate) enum TransferEnd<'a> {
    /// The transfer was not posted.
    NotPosted,
    /// A completion of the entry the context's post ended with, on its QP: the
    /// transfer's own completion, or that of the SEND it was chained before. (Requests on
    /// a send queue complete in order, so all of the post's are done.) It names the entry,
    /// not the post: the caller passes the completion that resumed the slot for this post
    /// (`Slot::resume` with the post's tag), which a completion of an earlier post cannot.
    Completed(&'a WorkCompletion),
    /// The transfer's QP was drained.
    Drained(&'a Drained<'a>),
}

/// Shows that a QP was drained ([`super::CmId::shut_down`]): every work request posted on
/// it before is done. It borrows the id, so it cannot outlive the QP (and name another QP
/// made later at the same address).
pub(crate) struct Drained<'a> {
    /// The QP's address (only compared); 0 if the id had none.
    qp: usize,
    _id: PhantomData<&'a ()>,
}

impl Drained<'_> {
    /// The drain of the QP at `qp`, which the caller completed.
    pub(super) fn new(qp: usize) -> Self {
        Self {
            qp,
            _id: PhantomData,
        }
    }
}

// SAFETY: the context is used only through `&mut` (or `Drop`); the C side touches it only
// in the calls made here, on whichever CPU the owner runs. `S` moves with it.
unsafe impl<S: SgLists + Send> Send for RwCtx<S> {}

impl<S: SgLists> RwCtx<S> {
    /// A context with nothing mapped.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: nothing is initialised, and `mapping` is `None`.
        pin_init!(Self {
            ctx: Opaque::zeroed(),
            mapping: None,
            posted: false,
            ends_with: 0,
            completions: None,
        })
    }

    /// Names the completion entries of the transfers [`RwCtx::post`] posts alone: an RDMA
    /// READ's completion runs `T`'s handler `R`, RDMA WRITEs' `U`'s handler `W`.
    ///
    /// # Safety
    ///
    /// The objects that embed both entries stay alive and in place while the context is
    /// used, until the completions of its posts ran or their QP was drained; entries made
    /// with [`Cqe::on_qp`] are posted only on QPs of their connection type.
    pub(crate) unsafe fn set_completions<T, const R: u64, U, const W: u64>(
        self: Pin<&mut Self>,
        from_remote: &Cqe<T, R>,
        to_remote: &Cqe<U, W>,
    ) {
        // SAFETY: `completions` is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // INVARIANT: the caller's promise.
        this.completions = Some(Completions {
            from_remote: from_remote.as_raw(),
            to_remote: to_remote.as_raw(),
        });
    }

    /// Whether lists are mapped (the context owes a [`RwCtx::destroy`]).
    pub(crate) fn is_mapped(&self) -> bool {
        self.mapping.is_some()
    }

    /// Whether the mapped transfer carries T10-PI (a signature context).
    pub(crate) fn is_signature(&self) -> bool {
        self.mapping
            .as_ref()
            .is_some_and(|mapping| mapping.signature)
    }

    /// Maps `lists` on `qp` for a transfer `dir` with `remote`; with `sig_attrs`, as a
    /// signature transfer whose PI the HCA checks or generates. Returns the number of work
    /// requests the transfer posts (the send queue space it needs besides any SEND it is
    /// chained before). On failure, or if lists are mapped already (`EBUSY`), `lists` come
    /// back with the error.
    pub(crate) fn init(
        self: Pin<&mut Self>,
        qp: &QpHandle,
        lists: S,
        remote: Remote,
        dir: Direction,
        sig_attrs: Option<&mut SigAttrs>,
    ) -> Result<u32, (Error, S)> {
        // SAFETY: `mapping` is not structurally pinned; only `ctx` is.
        let this = unsafe { self.get_unchecked_mut() };
        if this.mapping.is_some() {
            return Err((EBUSY, lists));
        }
        let (sg, sg_cnt) = lists.data();
        let signature = sig_attrs.is_some();
        // SAFETY: the context is pinned and not initialised (`mapping` is `None`: type
        // invariant); the QP is live (`QpHandle`); the lists are valid while `lists` lives
        // (`SgLists`), which the mapping keeps until the context is destroyed.
        let ret = unsafe {
            match sig_attrs {
                Some(attrs) => {
                    let (prot_sg, prot_cnt) = lists.metadata();
                    bindings::rdma_rw_ctx_signature_init(
                        this.ctx.get(),
                        qp.as_raw(),
                        qp.port_num(),
                        sg,
                        sg_cnt,
                        prot_sg,
                        prot_cnt,
                        attrs.as_mut_ptr(),
                        remote.addr,
                        remote.rkey,
                        dir.dma().into(),
                    )
                }
                None => bindings::rdma_rw_ctx_init(
                    this.ctx.get(),
                    qp.as_raw(),
                    qp.port_num(),
                    sg,
                    sg_cnt,
                    0,
                    remote.addr,
                    remote.rkey,
                    dir.dma().into(),
                ),
            }
        };
        if ret < 0 {
            return Err((Error::from_errno(ret), lists));
        }
        // INVARIANT: the context was initialised on `lists` for `qp` and `dir`, and is not
        // posted yet.
        this.mapping = Some(Mapping {
            lists,
            qp: qp.clone(),
            dir,
            signature,
        });
        this.posted = false;
        Ok(ret as u32)
    }

    /// The completion entry [`RwCtx::set_completions`] named for the mapped transfer's
    /// direction. `EINVAL` if nothing is mapped or no entries were named.
    fn completion(&self) -> Result<*mut bindings::ib_cqe> {
        let mapping = self.mapping.as_ref().ok_or(EINVAL)?;
        let completions = self.completions.as_ref().ok_or(EINVAL)?;
        Ok(match mapping.dir {
            Direction::FromRemote => completions.from_remote,
            Direction::ToRemote => completions.to_remote,
        })
    }

    /// The first of the mapped transfer's work requests, linked to `chain` (null: none),
    /// the last one carrying `cqe` (null: unsignaled); marks the transfer posted. `EINVAL`
    /// if nothing is mapped, `EBUSY` if the transfer was posted already.
    ///
    /// The caller posts them at once (an `unsafe` post, whose caller promises that `cqe`'s
    /// owner outlives the requests, until their completion ran or their QP was drained).
    pub(super) fn wrs(
        self: Pin<&mut Self>,
        cqe: *mut bindings::ib_cqe,
        chain: *mut bindings::ib_send_wr,
        ends_with: usize,
    ) -> Result<(*mut bindings::ib_send_wr, QpHandle, &mut bool)> {
        // SAFETY: `posted` is not structurally pinned; `ctx` is not moved.
        let this = unsafe { self.get_unchecked_mut() };
        let mapping = this.mapping.as_ref().ok_or(EINVAL)?;
        if this.posted {
            return Err(EBUSY);
        }
        let qp = mapping.qp.clone();
        // SAFETY: the context is initialised for `qp` (type invariant) and pinned; it
        // links its own work requests and `chain`, which the caller posts at once.
        let first = unsafe {
            bindings::rdma_rw_ctx_wrs(this.ctx.get(), qp.as_raw(), qp.port_num(), cqe, chain)
        };
        // INVARIANT: the caller posts them now (`Prepared`). (A failed post may have posted
        // part of the chain: the context is not posted again, and is destroyed once its QP
        // is drained.)
        this.posted = true;
        this.ends_with = ends_with;
        Ok((first, qp, &mut this.posted))
    }

    /// The mapped transfer alone, ready to post ([`super::slot::Owner::post`]); its
    /// completion runs the handler of the entry [`RwCtx::set_completions`] named for its
    /// direction. `EINVAL` if nothing is mapped or no entries were named, `EBUSY` if the
    /// transfer was posted already.
    pub(crate) fn prepare(self: Pin<&mut Self>) -> Result<Prepared<'_>> {
        let cqe = self.completion()?;
        let (first, qp, posted) = self.wrs(cqe, ptr::null_mut(), cqe as usize)?;
        // SAFETY: `first` heads the context's own work requests, which live in the
        // context `self` borrows (and in what `rdma_rw` allocated for it) until it is
        // destroyed.
        Ok(unsafe { Prepared::new(first, qp) }.with_posted_flag(posted))
    }

    /// The mapped transfer, unsignaled, followed by `send` in one chain, ready to post:
    /// the SEND's completion also tells that the transfer is done. `EINVAL` if nothing is
    /// mapped, `EBUSY` if the transfer was posted already.
    pub(crate) fn prepare_before<'a>(
        self: Pin<&'a mut Self>,
        send: &'a mut SendWr,
    ) -> Result<Prepared<'a>> {
        let ends_with = send.completion_key();
        let (first, qp, posted) = self.wrs(ptr::null_mut(), send.as_ptr(), ends_with)?;
        // SAFETY: `first` heads the context's work requests and then `send`, all in what
        // `'a` borrows.
        Ok(unsafe { Prepared::new(first, qp) }.with_posted_flag(posted))
    }

    /// What the signature MR's PI checks found once the transfer completed: `None` if they
    /// passed. `EINVAL` unless a signature transfer is mapped.
    pub(crate) fn sig_error(&self) -> Result<Option<SigError>> {
        if !self.is_signature() {
            return Err(EINVAL);
        }
        let mut status = bindings::ib_mr_status::default();
        // SAFETY: a signature context (type invariant: initialised, not destroyed)
        // registers through one `reg` entry whose `mr` is the signature MR; `status` is
        // valid for the call.
        let ret = unsafe {
            let mr = (*(*self.ctx.get()).__bindgen_anon_1.reg).mr;
            bindings::ib_check_mr_status(
                mr,
                bindings::ib_mr_status_check_IB_MR_CHECK_SIG_STATUS,
                &mut status,
            )
        };
        kernel::error::to_result(ret)?;
        if status.fail_status & bindings::ib_mr_status_check_IB_MR_CHECK_SIG_STATUS == 0 {
            return Ok(None);
        }
        let err = status.sig_err;
        Ok(Some(SigError {
            err_type: err.err_type,
            expected: err.expected,
            actual: err.actual,
            offset: err.sig_err_offset,
        }))
    }

    /// Unmaps the transfer and gives its lists back, once `end` shows its work requests
    /// are done; `Ok(None)` if nothing was mapped. `EBUSY`, with the transfer still
    /// mapped, if it was posted and `end` does not show that: not its completion, not a
    /// drain of its QP.
    pub(crate) fn destroy(self: Pin<&mut Self>, end: TransferEnd<'_>) -> Result<Option<S>> {
        let Some(mapping) = &self.mapping else {
            return Ok(None);
        };
        let qp = mapping.qp.as_raw() as usize;
        let done = !self.posted
            || match end {
                TransferEnd::NotPosted => false,
                TransferEnd::Completed(wc) => wc.completes(self.ends_with, qp),
                TransferEnd::Drained(drained) => drained.qp == qp,
            };
        if !done {
            return Err(EBUSY);
        }
        // SAFETY: the transfer was not posted, or its requests are done (checked above).
        Ok(unsafe { self.destroy_unchecked() })
    }

    /// Unmaps the transfer and gives its lists back; `None` if nothing was mapped.
    ///
    /// # Safety
    ///
    /// If the transfer was posted, its work requests are done: their completion (or that
    /// of the SEND they were chained before) ran, or their QP was drained.
    pub(super) unsafe fn destroy_unchecked(self: Pin<&mut Self>) -> Option<S> {
        // SAFETY: `mapping` and `posted` are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let mapping = this.mapping.take()?;
        this.posted = false;
        let (sg, sg_cnt) = mapping.lists.data();
        let qp = &mapping.qp;
        // SAFETY: the context was initialised with exactly these arguments (type
        // invariant) and its work requests are done (function's safety section); the QP is
        // live (`QpHandle`).
        unsafe {
            if mapping.signature {
                let (prot_sg, prot_cnt) = mapping.lists.metadata();
                bindings::rdma_rw_ctx_destroy_signature(
                    this.ctx.get(),
                    qp.as_raw(),
                    qp.port_num(),
                    sg,
                    sg_cnt,
                    prot_sg,
                    prot_cnt,
                    mapping.dir.dma().into(),
                );
            } else {
                bindings::rdma_rw_ctx_destroy(
                    this.ctx.get(),
                    qp.as_raw(),
                    qp.port_num(),
                    sg,
                    sg_cnt,
                    mapping.dir.dma().into(),
                );
            }
        }
        // INVARIANT: destroyed; `mapping` is `None`.
        Some(mapping.lists)
    }
}

#[pinned_drop]
impl<S: SgLists> PinnedDrop for RwCtx<S> {
    fn drop(self: Pin<&mut Self>) {
        // A context still mapped when its owner goes cannot be destroyed here: its QP may be
        // gone already, and its transfer may not be done. Its lists are leaked, not freed
        // while the device may reach them.
        // SAFETY: `mapping` is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(mapping) = this.mapping.take() {
            pr_warn!("an rdma_rw context was dropped while mapped; leaking its lists\n");
            core::mem::forget(mapping.lists);
        }
    }
}
