// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: posting work requests and running their completions.
//!
//! Every work request is signalled and carries a small heap record with its `ib_cqe`,
//! the caller's completion closure and clones of the buffers and MRs it touches. The
//! record is freed when the completion runs (successful or flushed), so memory a work
//! request uses cannot be freed or unmapped while the device may still access it, and
//! no completion is ever silently lost (the seed demo's unsignalled REG_MR was).

use super::{bindings, DmaBuf, Mr};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::prelude::*;

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
    /// RDMA WRITE `local` to `remote`.
    Write {
        /// The source.
        local: Local<'a>,
        /// The target at the peer.
        remote: RemoteBuf,
    },
    /// RDMA READ `remote` into `local`; with `invalidate`, RDMA_READ_WITH_INV of that local
    /// MR (iWARP devices only).
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

/// What a completed work request reports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkCompletion {
    /// `IB_WC_*` status.
    pub(crate) status: u32,
    /// `IB_WC_*` opcode (valid on success only).
    pub(crate) opcode: u32,
    /// Bytes received (receives only).
    pub(crate) byte_len: u32,
    /// The local rkey the peer invalidated with SEND_WITH_INV, if it did.
    pub(crate) invalidated_rkey: Option<u32>,
}

impl WorkCompletion {
    /// Whether the request succeeded.
    pub(crate) fn is_ok(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }

    /// Whether the request was flushed by a QP in the error state (teardown).
    pub(crate) fn is_flush(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    /// The status as the RDMA core names it, e.g. `remote access error`.
    pub(crate) fn status_name(&self) -> &'static CStr {
        // SAFETY: `ib_wc_status_msg` returns a static string for any value.
        unsafe { CStr::from_char_ptr(bindings::ib_wc_status_msg(self.status)) }
    }
}

/// The record that travels with a posted work request.
#[repr(C)]
struct InFlight<F> {
    cqe: bindings::ib_cqe,
    on_done: Option<F>,
    buf: Option<DmaBuf>,
    mr: Option<(Mr, MrEffectKind)>,
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
/// `InFlight<F>` leaked by `in_flight`.
unsafe extern "C" fn done<F: FnOnce(WorkCompletion) + Send + 'static>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the core passes a valid work completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: `wr_cqe` is the member in use: every request is posted with a `wr_cqe`.
    let cqe = unsafe { wc.__bindgen_anon_1.wr_cqe };
    // SAFETY: `cqe` is the first field of a `#[repr(C)]` `InFlight<F>` leaked from a `KBox`;
    // each work request completes exactly once, so ownership returns exactly once.
    let mut record = unsafe { KBox::from_raw(cqe.cast::<InFlight<F>>()) };
    let ok = wc.status == bindings::ib_wc_status_IB_WC_SUCCESS;
    let invalidated = wc.wc_flags & bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32 != 0;
    let invalidated_rkey = if ok && invalidated {
        // SAFETY: `IB_WC_WITH_INVALIDATE` says `ex` holds the invalidated rkey.
        Some(unsafe { wc.ex.invalidate_rkey })
    } else {
        None
    };
    let completion = WorkCompletion {
        status: wc.status,
        opcode: if ok { wc.opcode } else { 0 },
        byte_len: if ok { wc.byte_len } else { 0 },
        invalidated_rkey,
    };
    if let Some((mr, effect)) = &record.mr {
        mr.complete(*effect, ok);
    }
    if let Some(on_done) = record.on_done.take() {
        on_done(completion);
    }
}

/// A queue pair, borrowed from the [`super::CmId`] that owns it.
pub(crate) struct Qp<'a> {
    qp: NonNull<bindings::ib_qp>,
    _owner: PhantomData<&'a ()>,
}

impl Qp<'_> {
    /// Wraps the QP of a live CM id.
    ///
    /// # Safety
    ///
    /// `qp` stays live while the `Qp` exists, and is drained (all its work requests
    /// completed) before it is destroyed.
    pub(crate) unsafe fn from_raw(qp: NonNull<bindings::ib_qp>) -> Self {
        Self {
            qp,
            _owner: PhantomData,
        }
    }

    /// Posts a receive into `local`; `on_done` runs with its completion.
    pub(crate) fn post_recv<F>(&self, local: Local<'_>, on_done: F) -> Result
    where
        F: FnOnce(WorkCompletion) + Send + 'static,
    {
        check_range(&local)?;
        let mut sge = sge(&local);
        let record = in_flight(on_done, Some(local.buf.clone()), None)?;
        // SAFETY: all-zeroes is a valid, empty receive work request.
        let mut wr: bindings::ib_recv_wr = unsafe { core::mem::zeroed() };
        wr.__bindgen_anon_1.wr_cqe = record.cast();
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        // SAFETY: the QP is live (invariant of `from_raw`); the provider copies `wr` and
        // `sge` before returning; the record keeps the buffer mapped until completion.
        let ret =
            unsafe { bindings::rdma_rs_ib_post_recv(self.qp.as_ptr(), &wr, core::ptr::null_mut()) };
        finish_post::<F>(ret, record)
    }

    /// Posts a send queue operation, signalled; `on_done` runs with its completion.
    pub(crate) fn post_send<F>(&self, op: SendOp<'_>, on_done: F) -> Result
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
            SendOp::Write { local, remote } => {
                fill_sge(&mut rdma.wr, &mut sge, &local)?;
                rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE;
                rdma.remote_addr = remote.addr;
                rdma.rkey = remote.rkey;
                (Some(local.buf.clone()), None)
            }
            SendOp::Read {
                local,
                remote,
                invalidate,
            } => {
                fill_sge(&mut rdma.wr, &mut sge, &local)?;
                rdma.remote_addr = remote.addr;
                rdma.rkey = remote.rkey;
                let mr = match invalidate {
                    Some(mr) => {
                        rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV;
                        rdma.wr.ex.invalidate_rkey = mr.lkey();
                        Some((mr.clone(), MrEffectKind::Invalidated))
                    }
                    None => {
                        rdma.wr.opcode = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
                        None
                    }
                };
                (Some(local.buf.clone()), mr)
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
        let record = match in_flight(on_done, buf, mr.clone()) {
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
        // SAFETY: the QP is live (invariant of `from_raw`); the provider copies the request
        // and its SGE before returning; the record keeps buffers and MRs alive until the
        // completion, which is signalled, runs.
        let ret =
            unsafe { bindings::rdma_rs_ib_post_send(self.qp.as_ptr(), wr, core::ptr::null_mut()) };
        finish_post::<F>(ret, record)
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

/// Leaks a new record for a work request about to be posted. Atomic allocation: posts
/// may come from completion callbacks in softirq context.
fn in_flight<F: FnOnce(WorkCompletion) + Send + 'static>(
    on_done: F,
    buf: Option<DmaBuf>,
    mr: Option<(Mr, MrEffectKind)>,
) -> Result<*mut InFlight<F>> {
    let record = KBox::new(
        InFlight {
            cqe: bindings::ib_cqe {
                done: Some(done::<F>),
            },
            on_done: Some(on_done),
            buf,
            mr,
        },
        GFP_ATOMIC,
    )?;
    Ok(KBox::into_raw(record))
}

/// Takes the record back if the post failed: no completion will run for it.
fn finish_post<F: FnOnce(WorkCompletion) + Send + 'static>(
    ret: c_int,
    record: *mut InFlight<F>,
) -> Result {
    if ret == 0 {
        return Ok(());
    }
    // SAFETY: the post failed, so the provider did not take the request: the record is
    // still exclusively ours, leaked from a `KBox` by `in_flight`.
    let record = unsafe { KBox::from_raw(record) };
    if let Some((mr, effect)) = &record.mr {
        mr.complete(*effect, false);
    }
    Err(Error::from_errno(ret))
}
