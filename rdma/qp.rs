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
    qp_handle::{QpGate, QpHandle},
    rw::{Direction, Remote, RwBinding, RwCtx},
    sgl::BufSgl,
    DmaBuf, Mr, Pd, WorkCompletion,
};
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

mod records;

pub(crate) use records::QpRecords;
use records::{finish_post, in_flight};

/// A local memory range for a work request's scatter/gather entry, with the lkey it is
/// reached through: a PD's local DMA lkey ([`Local::dma`]) or an MR's ([`Local::registered`]).
/// A [`Qp`] posts it only if the buffer is mapped for its device and the key is of its PD.
///
/// # Invariants
///
/// `lkey` is the local DMA lkey of `pd`, or the lkey of an MR on it.
pub(crate) struct Local<'a> {
    buf: &'a DmaBuf,
    offset: usize,
    len: u32,
    lkey: u32,
    /// The PD the key is of (borrowed: it lives, and no other takes its address).
    pd: &'a Pd,
}

impl<'a> Local<'a> {
    /// `len` bytes of `buf` at `offset`, reached through `pd`'s local DMA lkey.
    pub(crate) fn dma(pd: &'a Pd, buf: &'a DmaBuf, offset: usize, len: u32) -> Self {
        // INVARIANT: `pd`'s own key.
        Self {
            buf,
            offset,
            len,
            lkey: pd.local_dma_lkey(),
            pd,
        }
    }

    /// `len` bytes of `buf` at `offset`, reached through `mr`'s (current) lkey: the MR
    /// must map them, which the device checks.
    pub(crate) fn registered(mr: &'a Mr, buf: &'a DmaBuf, offset: usize, len: u32) -> Self {
        // INVARIANT: the key of an MR on its PD.
        Self {
            buf,
            offset,
            len,
            lkey: mr.lkey(),
            pd: mr.pd(),
        }
    }
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

/// What a work request does to the MR it carries.
#[derive(Clone, Copy)]
pub(super) enum MrEffectKind {
    /// Registers it (REG_MR).
    Registered,
    /// Invalidates it (LOCAL_INV, READ_WITH_INV).
    Invalidated,
}

/// A queue pair, borrowed from the [`super::CmId`] that owns it.
pub(crate) struct Qp<'a> {
    qp: NonNull<bindings::ib_qp>,
    port: u32,
    /// The QP's device and PD (addresses, only compared).
    device: usize,
    pd: usize,
    records: &'a QpRecords,
    /// The gate of the QP's handles, for the `rdma_rw` contexts of its records.
    gate: &'a Arc<QpGate>,
}

impl<'a> Qp<'a> {
    /// Wraps the QP of a live CM id.
    ///
    /// # Safety
    ///
    /// `qp`, of port `port`, stays live while the `Qp` exists, and is drained (all its
    /// work requests completed) before it is destroyed; `records` is its own, freed only
    /// once no completion of the QP runs any more; `gate` is the QP's.
    pub(in crate::rdma) unsafe fn from_raw(
        qp: NonNull<bindings::ib_qp>,
        port: u32,
        records: &'a QpRecords,
        gate: &'a Arc<QpGate>,
    ) -> Self {
        // SAFETY: the QP is live (the function's safety section); its device and PD are
        // set at creation and never change.
        let (device, pd) = unsafe { ((*qp.as_ptr()).device, (*qp.as_ptr()).pd) };
        Self {
            qp,
            port,
            device: device as usize,
            pd: pd as usize,
            records,
            gate,
        }
    }

    /// The QP's address (only compared).
    pub(in crate::rdma) fn address(&self) -> usize {
        self.qp.as_ptr() as usize
    }

    /// Posts a receive into `local`; `on_done` runs with its completion, which it is only
    /// lent for the call (no completion outlives its handler: see [`WorkCompletion`]).
    pub(crate) fn post_recv<F>(&self, local: Local<'_>, on_done: F) -> Result
    where
        F: FnOnce(&WorkCompletion) + Send + 'static,
    {
        self.check_local(&local)?;
        self.records.post(|| self.post_recv_open(local, on_done))
    }

    fn post_recv_open<F>(&self, local: Local<'_>, on_done: F) -> Result
    where
        F: FnOnce(&WorkCompletion) + Send + 'static,
    {
        let mut sge = sge(&local);
        let record = in_flight(self.records, on_done, Some(local.buf.clone()), None, None)?;
        let mut wr: bindings::ib_recv_wr = pin_init::zeroed();
        wr.__bindgen_anon_1.wr_cqe = record.cast();
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        // SAFETY: the provider copies `wr` and `sge` before returning; the record (the
        // request's entry) keeps the buffer mapped until completion or the QP's end.
        let (ret, refused) = posted(unsafe { self.gate.post_recv(&wr) });
        finish_post::<F>(self.records, ret, refused, record)
    }

    /// Posts a send queue operation, signalled; `on_done` runs with its completion, lent
    /// for the call as in [`Qp::post_recv`]. `ENOTCONN` once the QP is being drained.
    ///
    /// An RDMA READ (without invalidate) or WRITE goes through an `rdma_rw` context, as a
    /// kernel ULP's does: the RDMA core reaches `local` through the PD's local DMA lkey, or
    /// registers it through MRs from the QP's pool where the device needs that (iWARP
    /// READs: `QpCaps::rdma_ctxs`), and may post several requests, the last one signaled;
    /// `local.lkey` is not used. The context is destroyed when that one completes.
    pub(crate) fn post_send<F>(&self, op: SendOp<'_>, on_done: F) -> Result
    where
        F: FnOnce(&WorkCompletion) + Send + 'static,
    {
        self.records.post(|| self.post_send_open(op, on_done))
    }

    fn post_send_open<F>(&self, op: SendOp<'_>, on_done: F) -> Result
    where
        F: FnOnce(&WorkCompletion) + Send + 'static,
    {
        let mut rdma: bindings::ib_rdma_wr = pin_init::zeroed();
        let mut reg: bindings::ib_reg_wr = pin_init::zeroed();
        let mut sge = bindings::ib_sge::default();
        let mut use_reg = false;
        if let SendOp::Register { mr, .. }
        | SendOp::Invalidate { mr }
        | SendOp::Read {
            invalidate: Some(mr),
            ..
        } = &op
        {
            self.check_mr(mr)?;
        }
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
                self.check_local(&local)?;
                fill_sge(&mut rdma.wr, &mut sge, &local);
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
                self.check_local(&local)?;
                fill_sge(&mut rdma.wr, &mut sge, &local);
                rdma.remote_addr = remote.addr;
                rdma.rkey = remote.rkey;
                rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV;
                (
                    Some(local.buf.clone()),
                    Some((mr.clone(), MrEffectKind::Invalidated)),
                )
            }
            SendOp::Register { mr, access } => {
                use_reg = true;
                reg.wr.opcode = bindings::ib_wr_opcode_IB_WR_REG_MR;
                reg.mr = mr.as_raw();
                reg.access = i32::try_from(access).map_err(|_| EINVAL)?;
                (None, Some((mr.clone(), MrEffectKind::Registered)))
            }
            SendOp::Invalidate { mr } => {
                rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_LOCAL_INV;
                (None, Some((mr.clone(), MrEffectKind::Invalidated)))
            }
        };
        if let Some((mr, effect)) = &mr {
            mr.begin(*effect)?;
            // The keys, read once `begin` took the MR: no `map` changes them until the
            // request completed.
            if use_reg {
                reg.key = mr.rkey();
            } else if rdma.wr.opcode == bindings::ib_wr_opcode_IB_WR_LOCAL_INV {
                rdma.wr.ex.invalidate_rkey = mr.rkey();
            } else {
                rdma.wr.ex.invalidate_rkey = mr.lkey();
            }
        }
        let record = match in_flight(self.records, on_done, buf, mr.clone(), None) {
            Ok(record) => record,
            Err(e) => {
                if let Some((mr, effect)) = &mr {
                    mr.complete(*effect, None);
                }
                return Err(e);
            }
        };
        let wr = if use_reg { &mut reg.wr } else { &mut rdma.wr };
        wr.__bindgen_anon_1.wr_cqe = record.cast();
        wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        // SAFETY: the provider copies the request and its SGE before returning; the record
        // (the request's entry) keeps buffers and MRs alive until the completion, which is
        // signalled, runs, or the QP ends.
        let (ret, refused) = posted(unsafe { self.gate.post_send(wr) });
        finish_post::<F>(self.records, ret, refused, record)
    }
}

impl Qp<'_> {
    /// RDMA READ (`dir` from the remote) or WRITE of `local` with `remote`, through an
    /// `rdma_rw` context that the request's record owns (see [`Qp::post_send`]).
    fn post_rw<F>(&self, local: Local<'_>, remote: RemoteBuf, dir: Direction, on_done: F) -> Result
    where
        F: FnOnce(&WorkCompletion) + Send + 'static,
    {
        self.check_local(&local)?;
        let lists = BufSgl::new(local.buf, local.offset, local.len)?;
        let mut ctx = KBox::pin_init(RwCtx::new(), GFP_KERNEL)?;
        // (The context is destroyed by its request's first completion, or, never
        // completed, by the drain's `end_transfers`, before the QP goes.)
        ctx.as_mut()
            .bind(RwBinding::without_completions(QpHandle::new(
                self.gate.clone(),
            )))?;
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
                    .init(lists, remote, dir, None)
                    .map_err(|(e, _)| e)
                    .and_then(|_| {
                        rw.as_mut()
                            .wrs(cqe, core::ptr::null_mut(), cqe as usize, None)
                    }),
                None => Err(EINVAL),
            };
            let (first, open) = match prepared {
                // (lent none: the pass is its own)
                Ok((first, _, Some(open), _)) => (first, open),
                Ok(_) => return finish_post::<F>(self.records, EINVAL.to_errno(), true, record),
                // Nothing posted: the record goes, and its context with what it mapped.
                Err(e) => return finish_post::<F>(self.records, e.to_errno(), true, record),
            };
            // SAFETY: `first` heads the context's requests, which the provider copies
            // before it returns; the last carries the record's entry, and the record (with
            // the context and the buffer it maps) lives until that completion ran or the
            // QP ended (`in_flight`). (`open` is the pass of this QP, whose handle the
            // context was bound to above.)
            let (ret, refused) = posted(unsafe { open.post_send(first) });
            drop(open);
            finish_post::<F>(self.records, ret, refused, record)
        })
    }
}

/// A post's result as [`finish_post`] takes it: the errno (0 on success) and whether
/// nothing was posted.
fn posted(result: Result<(), (Error, bool)>) -> (core::ffi::c_int, bool) {
    match result {
        Ok(()) => (0, false),
        Err((e, refused)) => (e.to_errno(), refused),
    }
}

impl Qp<'_> {
    /// `EINVAL` unless `local` lies in its buffer, the buffer is mapped for the QP's device
    /// and the lkey is of the QP's PD (a key of another PD or device names other memory).
    fn check_local(&self, local: &Local<'_>) -> Result {
        let end = local.offset.checked_add(local.len as usize).ok_or(EINVAL)?;
        if end > local.buf.len() || local.len == 0 {
            return Err(EINVAL);
        }
        if local.buf.device().as_raw() as usize != self.device {
            pr_warn!(
                "rdma: refused to post a buffer mapped for {} on a QP of another device\n",
                local.buf.device().name().to_str().unwrap_or("?")
            );
            return Err(EINVAL);
        }
        if local.pd.as_raw() as usize != self.pd {
            pr_warn!("rdma: refused to post an lkey of another PD than the QP's\n");
            return Err(EINVAL);
        }
        Ok(())
    }

    /// `EINVAL` unless `mr` is on the QP's PD.
    fn check_mr(&self, mr: &Mr) -> Result {
        if mr.pd().as_raw() as usize != self.pd {
            pr_warn!("rdma: refused to post an MR of another PD than the QP's\n");
            return Err(EINVAL);
        }
        Ok(())
    }
}

/// Points `wr` at a single SGE describing `local` (checked: [`Qp::check_local`]).
fn fill_sge(wr: &mut bindings::ib_send_wr, sge: &mut bindings::ib_sge, local: &Local<'_>) {
    *sge = self::sge(local);
    wr.sg_list = sge;
    wr.num_sge = 1;
}

fn sge(local: &Local<'_>) -> bindings::ib_sge {
    bindings::ib_sge {
        addr: local.buf.dma_addr(local.offset),
        length: local.len,
        lkey: local.lkey,
    }
}
