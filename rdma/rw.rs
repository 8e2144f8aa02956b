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
//! The context's binding to its QP and entries is in `rw/binding.rs`; what shows a
//! transfer over (its completion, or a drained QP) in `rw/end.rs`.
//!
//! C header: [`include/rdma/rw.h`].
//!
//! [`include/rdma/rw.h`]: srctree/include/rdma/rw.h

use super::{
    bindings,
    qp_handle::{OpenQp, QpSerial, SendWr},
    signature::{SigAttrs, SigError},
    slot_post::{Prepared, Resumes},
    Device,
};
use core::{pin::Pin, ptr};
use kernel::{dma::DataDirection, prelude::*, types::Opaque};

mod binding;
mod end;

pub(crate) use binding::RwBinding;
pub(crate) use end::{Drained, TransferEnd};

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

/// What a mapped context was initialised on; its destroy takes the same (and its QP).
struct Mapping<S> {
    lists: S,
    dir: Direction,
    signature: bool,
}

/// An `rdma_rw_ctx`: one transfer between local scatterlists and a remote buffer.
///
/// Pinned: a context of one SGE points into itself once initialised. Made once per slot
/// with [`RwCtx::new`], bound to its QP and completion entries once ([`RwCtx::bind`]),
/// and used for one transfer after another.
///
/// # Invariants
///
/// - `mapping` is `Some` exactly while `ctx` is initialised: by `rdma_rw_ctx_init` on
///   `mapping.lists.data()`, or by `rdma_rw_ctx_signature_init` on both of its lists when
///   `mapping.signature`, for the QP of `binding` and `mapping.dir`. It then owes the
///   matching destroy, with the same arguments (see [`RwCtx::destroy`]); `binding` does
///   not change while it is mapped.
/// - `posted` is true once the mapped transfer's work requests were posted: they are
///   posted at most once per mapping. `ends_with` is then the completion entry (address)
///   of the last request of that post: the transfer's own last one, or the SEND it was
///   chained before; its completion shows the transfer done.
/// - Its requests are posted only on the QP of `binding` (whose invariant keeps the
///   entries it names).
#[pin_data(PinnedDrop)]
pub(crate) struct RwCtx<S: SgLists> {
    #[pin]
    ctx: Opaque<bindings::rdma_rw_ctx>,
    mapping: Option<Mapping<S>>,
    posted: bool,
    ends_with: usize,
    binding: Option<RwBinding>,
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
            binding: None,
        })
    }

    /// Binds the context to a QP and the completion entries of the transfers it posts
    /// alone there ([`RwCtx::prepare`]). `EBUSY` while a transfer is mapped.
    pub(crate) fn bind(self: Pin<&mut Self>, binding: RwBinding) -> Result {
        // SAFETY: `binding` is not structurally pinned; `ctx` is not moved.
        let this = unsafe { self.get_unchecked_mut() };
        if this.mapping.is_some() {
            return Err(EBUSY);
        }
        // INVARIANT: nothing is mapped.
        this.binding = Some(binding);
        Ok(())
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

    /// Maps `lists` on the bound QP for a transfer `dir` with `remote`; with `sig_attrs`,
    /// as a signature transfer whose PI the HCA checks or generates. Returns the number of
    /// work requests the transfer posts (the send queue space it needs besides any SEND it
    /// is chained before). On failure, if lists are mapped already (`EBUSY`), if the
    /// context is not bound (`EINVAL`) or its QP's drain began (`ENOTCONN`), `lists` come
    /// back with the error.
    pub(crate) fn init(
        self: Pin<&mut Self>,
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
        let Some(binding) = &this.binding else {
            return Err((EINVAL, lists));
        };
        let (sg, sg_cnt) = lists.data();
        let signature = sig_attrs.is_some();
        let port = binding.qp.port_num();
        let ctx = this.ctx.get();
        // SAFETY: the context is pinned and not initialised (`mapping` is `None`: type
        // invariant); the QP is live while the handle lets the call through; the lists are
        // valid while `lists` lives (`SgLists`), which the mapping keeps until the context
        // is destroyed.
        // (Only while posting is open: a context mapped after the drain could outlive the
        // QP's end, its MRs never going back to the pool.)
        let ret = binding.qp.with_open_qp(|qp| unsafe {
            Ok(match sig_attrs {
                Some(attrs) => {
                    let (prot_sg, prot_cnt) = lists.metadata();
                    bindings::rdma_rw_ctx_signature_init(
                        ctx,
                        qp,
                        port,
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
                    ctx,
                    qp,
                    port,
                    sg,
                    sg_cnt,
                    0,
                    remote.addr,
                    remote.rkey,
                    dir.dma().into(),
                ),
            })
        });
        let ret = match ret {
            Ok(ret) if ret >= 0 => ret,
            Ok(ret) => return Err((Error::from_errno(ret), lists)),
            Err(e) => return Err((e, lists)),
        };
        // INVARIANT: the context was initialised on `lists` for the bound QP and `dir`,
        // and is not posted yet.
        this.mapping = Some(Mapping {
            lists,
            dir,
            signature,
        });
        this.posted = false;
        Ok(ret as u32)
    }

    /// The completion entry the binding names for the mapped transfer's direction.
    /// `EINVAL` if nothing is mapped or no entries were named.
    fn completion(&self) -> Result<(*mut bindings::ib_cqe, Option<Resumes>)> {
        let mapping = self.mapping.as_ref().ok_or(EINVAL)?;
        let binding = self.binding.as_ref().ok_or(EINVAL)?;
        let (from_remote, to_remote) = binding.completions.ok_or(EINVAL)?;
        Ok(match mapping.dir {
            Direction::FromRemote => (from_remote, binding.resumes.0),
            Direction::ToRemote => (to_remote, binding.resumes.1),
        })
    }

    /// The first of the mapped transfer's work requests, linked to `chain` (null: none),
    /// the last one carrying `cqe` (null: unsignaled); marks the transfer posted. `EINVAL`
    /// if nothing is mapped, `EBUSY` if the transfer was posted already.
    ///
    /// The caller posts them at once, on the QP it returns (an `unsafe` post, whose caller
    /// promises that `cqe`'s owner outlives the requests, until their completion ran or
    /// their QP was drained), under `lent`, a pass of the binding's QP it holds, or else
    /// under the pass this returns (a `lent` pass of another QP is not used).
    /// `ENOTCONN` once posting closed.
    pub(super) fn wrs(
        self: Pin<&mut Self>,
        cqe: *mut bindings::ib_cqe,
        chain: *mut bindings::ib_send_wr,
        ends_with: usize,
        lent: Option<&OpenQp<'_>>,
    ) -> Result<(
        *mut bindings::ib_send_wr,
        QpSerial,
        Option<OpenQp<'_>>,
        &mut bool,
    )> {
        // SAFETY: `posted` is not structurally pinned; `ctx` is not moved.
        let this = unsafe { self.get_unchecked_mut() };
        if this.mapping.is_none() {
            return Err(EINVAL);
        }
        let qp = &this.binding.as_ref().ok_or(EINVAL)?.qp;
        if this.posted {
            return Err(EBUSY);
        }
        let ctx = this.ctx.get();
        // (one pass for the requests and their post: the caller's, if it lends one of this
        // QP, else one the caller posts through)
        let (own, lent) = match lent {
            Some(lent) if lent.serial() == qp.serial() => (None, Some(lent)),
            _ => match qp.open() {
                Some(own) => (Some(own), None),
                None => return Err(super::code::enotconn()),
            },
        };
        let open = own.as_ref().or(lent).ok_or(EINVAL)?;
        // SAFETY: the context is initialised for the bound QP (type invariant) and pinned;
        // the QP (the pass's: its identity is the binding's) is live while the pass is
        // held; it links the context's own work requests and `chain`, which the caller
        // posts at once, under the pass.
        let first =
            unsafe { bindings::rdma_rw_ctx_wrs(ctx, open.raw(), open.port_num(), cqe, chain) };
        // INVARIANT: the caller posts them now (`Prepared`). (A failed post may have posted
        // part of the chain: the context is not posted again, and is destroyed once its QP
        // is drained.)
        this.posted = true;
        this.ends_with = ends_with;
        Ok((first, qp.serial(), own, &mut this.posted))
    }

    /// The mapped transfer alone, ready to post ([`super::slot_post::Owner::post`]); its
    /// completion runs the handler of the entry the binding names for its direction. `EINVAL` if nothing is mapped or no entries were named, `EBUSY` if the
    /// transfer was posted already.
    pub(crate) fn prepare(self: Pin<&mut Self>) -> Result<Prepared<'_>> {
        self.prepare_lent(None)
    }

    /// As [`RwCtx::prepare`], under `open`, a pass of the QP the caller holds and posts
    /// through ([`super::slot_post::Owner::post_under`]).
    pub(crate) fn prepare_under<'a>(
        self: Pin<&'a mut Self>,
        open: &OpenQp<'_>,
    ) -> Result<Prepared<'a>> {
        self.prepare_lent(Some(open))
    }

    fn prepare_lent<'a>(
        self: Pin<&'a mut Self>,
        lent: Option<&OpenQp<'_>>,
    ) -> Result<Prepared<'a>> {
        let (cqe, resumes) = self.completion()?;
        let (first, qp, open, posted) = self.wrs(cqe, ptr::null_mut(), cqe as usize, lent)?;
        // SAFETY: `first` heads the context's own work requests, for the binding's QP (which
        // `qp` names, and the context was initialised for: type invariant), which live in
        // the context `self` borrows (and in what `rdma_rw` allocated for it) until it is
        // destroyed; the last carries `cqe`, whose completion resumes what the binding
        // says.
        Ok(unsafe { Prepared::new(first, qp, resumes) }
            .with_posted_flag(posted)
            .with_own_pass(open))
    }

    /// The mapped transfer, unsignaled, followed by `send` in one chain, ready to post:
    /// the SEND's completion also tells that the transfer is done. `EINVAL` if nothing is
    /// mapped or `send` is for another QP, `EBUSY` if the transfer was posted already.
    pub(crate) fn prepare_before<'a>(
        self: Pin<&'a mut Self>,
        send: &'a mut SendWr,
    ) -> Result<Prepared<'a>> {
        self.prepare_before_lent(send, None)
    }

    /// As [`RwCtx::prepare_before`], under `open`, a pass of the QP the caller holds and
    /// posts through ([`super::slot_post::Owner::post_under`]).
    pub(crate) fn prepare_before_under<'a>(
        self: Pin<&'a mut Self>,
        send: &'a mut SendWr,
        open: &OpenQp<'_>,
    ) -> Result<Prepared<'a>> {
        self.prepare_before_lent(send, Some(open))
    }

    fn prepare_before_lent<'a>(
        self: Pin<&'a mut Self>,
        send: &'a mut SendWr,
        lent: Option<&OpenQp<'_>>,
    ) -> Result<Prepared<'a>> {
        let bound = self.binding.as_ref().ok_or(EINVAL)?;
        if bound.qp.serial() != send.qp() {
            return Err(EINVAL);
        }
        let ends_with = send.completion_key();
        let resumes = send.resumes();
        let (first, qp, open, posted) =
            self.wrs(ptr::null_mut(), send.as_ptr(), ends_with, lent)?;
        // SAFETY: `first` heads the context's work requests and then `send`, all in what
        // `'a` borrows and all for the QP `qp` names (the binding's, which the context was
        // initialised for and `send` was made for: checked above); the SEND is the last,
        // whose completion resumes what it says.
        Ok(unsafe { Prepared::new(first, qp, resumes) }
            .with_posted_flag(posted)
            .with_own_pass(open))
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
    /// drain of its QP. (A completion is lent by the layer's completion trampolines, the
    /// slots' and `qp/records.rs`'s, for its handler's call.)
    pub(crate) fn destroy(self: Pin<&mut Self>, end: TransferEnd<'_>) -> Result<Option<S>> {
        if self.mapping.is_none() {
            return Ok(None);
        }
        // (bound while mapped: type invariant)
        let Some(binding) = self.binding.as_ref() else {
            return Err(EINVAL);
        };
        let qp = binding.qp.address();
        let done = !self.posted
            || match &end {
                TransferEnd::NotPosted => false,
                TransferEnd::Completed(wc) => wc.completes(self.ends_with, qp),
                TransferEnd::Drained(drained) => drained.qp == qp,
            };
        if !done {
            return Err(EBUSY);
        }
        // (the common case, a transfer's own completion, needs no pass through the gate)
        if let Some(raw_qp) = binding.qp.shown_live(&end) {
            // SAFETY: the transfer was not posted, or its requests are done (checked
            // above); `raw_qp` is the context's QP, alive while `end` is borrowed
            // (`shown_live`), that is for this call.
            return Ok(unsafe { self.destroy_on(raw_qp) });
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
    ///
    /// A context whose QP is gone already cannot be destroyed: its lists are leaked (not
    /// freed while the device may reach them), and this returns `None`.
    pub(super) unsafe fn destroy_unchecked(self: Pin<&mut Self>) -> Option<S> {
        // SAFETY: `mapping` and `posted` are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let mapping = this.mapping.take()?;
        this.posted = false;
        let ctx = this.ctx.get();
        let Some(binding) = &this.binding else {
            // (not reached: bound while mapped, type invariant)
            core::mem::forget(mapping.lists);
            return None;
        };
        let port = binding.qp.port_num();
        let destroyed = binding.qp.with_qp(|qp| {
            // SAFETY: the context was initialised with `mapping`'s arguments on the QP of
            // its binding (type invariant), live while the handle lets the call through;
            // its work requests are done (the caller's promise).
            unsafe { destroy_mapped(ctx, qp, port, &mapping) };
            Ok(())
        });
        if destroyed.is_err() {
            pr_warn!("an rdma_rw context outlived its QP; leaking its lists\n");
            core::mem::forget(mapping.lists);
            return None;
        }
        // INVARIANT: destroyed; `mapping` is `None`.
        Some(mapping.lists)
    }

    /// Unmaps the transfer on `qp`, without passing the QP's gate, and gives its lists
    /// back; `None` if nothing was mapped.
    ///
    /// # Safety
    ///
    /// If the transfer was posted, its work requests are done; `qp` is the QP of the
    /// context's binding, live for the call.
    unsafe fn destroy_on(self: Pin<&mut Self>, qp: *mut bindings::ib_qp) -> Option<S> {
        // SAFETY: `mapping` and `posted` are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let mapping = this.mapping.take()?;
        this.posted = false;
        let port = this
            .binding
            .as_ref()
            .map_or(0, |binding| binding.qp.port_num());
        // SAFETY: the context was initialised with `mapping`'s arguments on the QP of its
        // binding (type invariant), which is `qp`, live; its work requests are done (the
        // caller's promise).
        unsafe { destroy_mapped(this.ctx.get(), qp, port, &mapping) };
        // INVARIANT: destroyed; `mapping` is `None`.
        Some(mapping.lists)
    }
}

/// `rdma_rw_ctx_destroy` (or its signature form) of `ctx`, initialised as `mapping` says.
///
/// # Safety
///
/// `ctx` was initialised with `mapping`'s arguments on `qp` of port `port`, is not
/// destroyed yet, and its work requests (if posted) are done; nothing else uses it during
/// the call; `qp` is live for the call.
unsafe fn destroy_mapped<S: SgLists>(
    ctx: *mut bindings::rdma_rw_ctx,
    qp: *mut bindings::ib_qp,
    port: u32,
    mapping: &Mapping<S>,
) {
    let (sg, sg_cnt) = mapping.lists.data();
    // SAFETY: the caller's promise.
    unsafe {
        if mapping.signature {
            let (prot_sg, prot_cnt) = mapping.lists.metadata();
            bindings::rdma_rw_ctx_destroy_signature(
                ctx,
                qp,
                port,
                sg,
                sg_cnt,
                prot_sg,
                prot_cnt,
                mapping.dir.dma().into(),
            );
        } else {
            bindings::rdma_rw_ctx_destroy(ctx, qp, port, sg, sg_cnt, mapping.dir.dma().into());
        }
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
