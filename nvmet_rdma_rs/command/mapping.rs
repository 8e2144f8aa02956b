// SPDX-License-Identifier: GPL-2.0

//! Where a command's data goes: checked in-capsule data, or the host's memory by RDMA
//! READ/WRITE through an `rdma_rw` context (a signature context with T10-PI), and that
//! context's end.

#![forbid(unsafe_code)]

use super::{Connection, Io, RspState};
use crate::nvmet::{request::DataSgls, Request};
use crate::rdma::rw::{Direction, Remote, TransferEnd};
use crate::wire::{self, status, COMMAND_SIZE};
use crate::{pi, protection};
use kernel::{prelude::*, sync::ArcBorrow};

impl Io {
    /// Points the request at the in-capsule data, after checking it.
    pub(super) fn map_in_capsule(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        state: &mut RspState,
        command: &[u8; COMMAND_SIZE],
        offset: u64,
        len: u32,
        received: u32,
    ) -> Result<(), wire::CommandError> {
        let data_received = received - COMMAND_SIZE as u32;
        wire::check_in_capsule(command, offset, len, self.inline_size, data_received)?;
        if state.req.metadata_len() != 0 {
            // The PI would need a signature MR: hosts send such data keyed (the C
            // transport would hand the backend no PI buffer here).
            return Err(wire::CommandError {
                status: status::INVALID_FIELD | status::DNR,
                error_loc: 24,
            });
        }
        if len == 0 {
            return Ok(());
        }
        let bad_offset = wire::CommandError {
            status: status::SGL_INVALID_OFFSET | status::DNR,
            error_loc: 24,
        };
        let cmd = state.cmd;
        let data = self.recv.inline_data(cmd).ok_or(bad_offset)?;
        let (offset, len) = (offset as usize, len as usize);
        data.sync_range_for_cpu(offset, len);
        state.data_taken = true;
        // (The data lies within the in-capsule size, checked: at most `IN_CAPSULE_PAGES`.
        // The buffer is found again in the queue, where the request may rely on it.)
        state
            .req
            .use_in_capsule(
                queue,
                |queue| queue.io()?.recv.inline_data(cmd),
                offset,
                len,
            )
            .map_err(|_| bad_offset)?;
        state.in_capsule = true;
        let stats = queue.stats();
        stats.in_capsule.add(1);
        stats.in_capsule_bytes.add(len as u64);
        Ok(())
    }

    /// Allocates the request's data buffer and an `rdma_rw` context for host memory at
    /// `addr`/`key`: a signature one if the command carries T10-PI.
    pub(super) fn map_keyed(
        &self,
        state: &mut RspState,
        command: &[u8; COMMAND_SIZE],
        addr: u64,
        len: u32,
        key: u32,
        invalidate: bool,
    ) -> Result<(), wire::CommandError> {
        let internal = wire::CommandError {
            status: status::INTERNAL,
            error_loc: u16::MAX,
        };
        let req = &mut state.req;
        req.set_transfer_len(len as usize);
        if len == 0 {
            return Ok(());
        }
        let mut sig_attrs = None;
        let metadata_len = req.metadata_len();
        if metadata_len != 0 {
            let Some(signature) = self.signature(req, command) else {
                req.set_transfer_len(0);
                return Err(internal);
            };
            if signature.data_len(len as usize, metadata_len).is_none() {
                // (the nvmet core would allocate a zero-length data buffer)
                req.set_transfer_len(0);
                return Err(wire::CommandError {
                    status: status::INVALID_FIELD | status::DNR,
                    error_loc: 24,
                });
            }
            if signature.hca_generates_pi {
                req.set_transfer_len(len as usize + metadata_len);
            }
            req.set_rw_control(signature.control);
            sig_attrs = Some(pi::sig_attrs(&signature));
        }
        let Ok(data) = req.alloc_sgls() else {
            req.set_transfer_len(0);
            return Err(internal);
        };
        let remote = Remote { addr, rkey: key };
        let dir = if state.write {
            Direction::FromRemote
        } else {
            Direction::ToRemote
        };
        match state
            .rw
            .as_mut()
            .init(data, remote, dir, sig_attrs.as_mut())
        {
            Ok(wrs) => state.n_rdma = wrs,
            Err((_, data)) => {
                // (freed with the slot's release)
                keep_data(state, data);
                state.req.set_transfer_len(0);
                return Err(internal);
            }
        }
        if invalidate {
            state.invalidate = Some(key);
        }
        Ok(())
    }

    /// The T10-PI signature of a read or write command on a namespace with PI; `None` if
    /// the QP cannot offload PI or the namespace's device has no usable integrity profile.
    fn signature(
        &self,
        req: &Request,
        command: &[u8; COMMAND_SIZE],
    ) -> Option<protection::Signature> {
        if !self.integrity {
            return None;
        }
        let (pi_type, interval_exp) = req.ns_integrity()?;
        protection::signature(command, pi_type, interval_exp)
    }

    /// The NVMe status of the PI checks of a command's signature context (0: passed), once
    /// its transfer completed.
    pub(super) fn pi_status(&self, state: &RspState) -> u16 {
        pi::status(state.rw.sig_error())
    }
}

/// Destroys the command's `rdma_rw` context once `end` shows its transfer done, and gives
/// back the data it mapped, if any. A posted transfer `end` does not show done stays
/// mapped, with its data, until the queue's release destroys it after the drain.
fn destroy_rw(state: &mut RspState, end: TransferEnd<'_>) -> Option<DataSgls> {
    state.n_rdma = 0;
    state.rw.as_mut().destroy(end).unwrap_or_else(|_| {
        pr_warn!("an RDMA transfer not known to be done is kept mapped until the drain\n");
        None
    })
}

/// Destroys the command's `rdma_rw` context once `end` shows its transfer done, keeping
/// the data (see [`destroy_rw`]).
pub(super) fn free_rw(state: &mut RspState, end: TransferEnd<'_>) {
    if let Some(data) = destroy_rw(state, end) {
        keep_data(state, data);
    }
}

/// Keeps the command's data buffers in its state until its release frees them.
fn keep_data(state: &mut RspState, data: DataSgls) {
    if let Some(old) = state.data.replace(data) {
        // (not expected: a command maps its buffers once)
        pr_warn!("a command's data buffers were replaced; freeing the old ones\n");
        state.req.free_sgls(old);
    }
}

/// Destroys the command's `rdma_rw` context once `end` shows its transfer done, and frees
/// the data buffers it does not map (those it maps stay with it while the transfer may
/// still run).
pub(super) fn free_data(state: &mut RspState, end: TransferEnd<'_>) {
    let mapped = destroy_rw(state, end);
    if mapped.is_some() && state.data.is_some() {
        // (not expected: a command maps its buffers once)
        pr_warn!("a command held two sets of data buffers; freeing both\n");
    }
    // (one by one: an iterator over the two is an out-of-line loop at -Os)
    if let Some(data) = mapped {
        state.req.free_sgls(data);
    }
    if let Some(data) = state.data.take() {
        state.req.free_sgls(data);
    }
}
