// SPDX-License-Identifier: GPL-2.0

//! Where a command's data goes: checked in-capsule data, or the host's memory by RDMA
//! READ/WRITE through an `rdma_rw` context (a signature context with T10-PI), and that
//! context's end.

// Still holds `unsafe` that belongs in the binding layers (`rdma/`, `nvmet/`): moving
// it there is under way (issue 15).
#![allow(unsafe_code)]

use super::{Io, RspSlot, RspState};
use crate::nvmet::request;
use crate::queue::Queue;
use crate::rdma::{
    bindings,
    rw::{Direction, Remote},
};
use crate::recv::MAX_INLINE_PAGES;
use crate::wire::{self, status, COMMAND_SIZE};
use crate::{pi, protection};
use core::sync::atomic::Ordering::Relaxed;
use kernel::{page::PAGE_SIZE, prelude::*};

impl Io {
    /// Points the request at the in-capsule data, after checking it.
    pub(super) fn map_in_capsule(
        &self,
        queue: &Queue,
        rsp: &RspSlot,
        command: &[u8; COMMAND_SIZE],
        offset: u64,
        len: u32,
        received: u32,
    ) -> Result<(), wire::CommandError> {
        // SAFETY: this command owns the slot.
        let state = unsafe { rsp.state() };
        let data_received = received - COMMAND_SIZE as u32;
        wire::check_in_capsule(command, offset, len, self.inline_size, data_received)?;
        // SAFETY: the request is initialised and ours.
        if unsafe { (*rsp.req()).metadata_len } != 0 {
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
        let cmd = self.recv.slot(state.cmd);
        let data = self.recv.inline_data(state.cmd).ok_or(wire::CommandError {
            status: status::SGL_INVALID_OFFSET | status::DNR,
            error_loc: 24,
        })?;
        let offset = offset as usize;
        let (first_page, page_offset) = (offset / PAGE_SIZE, offset % PAGE_SIZE);
        let count = (page_offset + len as usize).div_ceil(PAGE_SIZE);
        data.sync_range_for_cpu(offset, len as usize);
        let sg = cmd.sg.get().cast::<bindings::scatterlist>();
        let mut pieces = [(core::ptr::null_mut::<u8>(), 0u32); MAX_INLINE_PAGES];
        let mut left = len as usize;
        for (i, piece) in pieces.iter_mut().enumerate().take(count) {
            let start = if i == 0 { page_offset } else { 0 };
            let chunk = left.min(PAGE_SIZE - start);
            let at = (first_page + i) * PAGE_SIZE + start;
            let cpu = data.cpu_ptr(at).map_err(|_| wire::CommandError {
                status: status::SGL_INVALID_OFFSET | status::DNR,
                error_loc: 24,
            })?;
            *piece = (cpu, chunk as u32);
            left -= chunk;
        }
        // SAFETY: `count <= MAX_INLINE_PAGES`, since the data lies within the in-capsule
        // size (checked), at most 16 KiB; the receive slot's scatterlist is this command's
        // until the response re-posts the receive; the pages are the slot's buffer.
        unsafe {
            bindings::sg_init_table(sg, count as u32);
            for (i, &(cpu, chunk)) in pieces.iter().enumerate().take(count) {
                bindings::rdma_rs_sg_set_buf(sg.add(i), cpu.cast(), chunk);
            }
            let req = rsp.req();
            (*req).sg = sg;
            (*req).sg_cnt = count as i32;
            (*req).transfer_len += len as usize;
        }
        state.in_capsule = true;
        queue.stats.in_capsule.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Allocates the request's data buffer and an `rdma_rw` context for host memory at
    /// `addr`/`key`: a signature one if the command carries T10-PI.
    pub(super) fn map_keyed(
        &self,
        rsp: &RspSlot,
        command: &[u8; COMMAND_SIZE],
        addr: u64,
        len: u32,
        key: u32,
        invalidate: bool,
    ) -> Result<(), wire::CommandError> {
        // SAFETY: this command owns the slot.
        let state = unsafe { rsp.state() };
        let req = rsp.req();
        let internal = wire::CommandError {
            status: status::INTERNAL,
            error_loc: u16::MAX,
        };
        // SAFETY: the request is initialised and ours, its namespace looked up and its
        // buffers not allocated yet; the capsule is the request's until its response.
        let (data, mut sig_attrs) = unsafe {
            (*req).transfer_len = len as usize;
            if len == 0 {
                return Ok(());
            }
            let mut sig_attrs = None;
            if (*req).metadata_len != 0 {
                let Some(signature) = self.signature(req, command) else {
                    (*req).transfer_len = 0;
                    return Err(internal);
                };
                if signature
                    .data_len(len as usize, (*req).metadata_len)
                    .is_none()
                {
                    // (the nvmet core would allocate a zero-length data buffer)
                    (*req).transfer_len = 0;
                    return Err(wire::CommandError {
                        status: status::INVALID_FIELD | status::DNR,
                        error_loc: 24,
                    });
                }
                if signature.hca_generates_pi {
                    (*req).transfer_len += (*req).metadata_len;
                }
                (*(*req).cmd).__bindgen_anon_1.rw.control = signature.control.to_le();
                sig_attrs = Some(pi::sig_attrs(&signature));
            }
            let Ok(data) = request::alloc_sgls(req) else {
                (*req).transfer_len = 0;
                return Err(internal);
            };
            (data, sig_attrs)
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
            .init(&self.qp, data, remote, dir, sig_attrs.as_mut())
        {
            Ok(wrs) => state.n_rdma = wrs,
            Err((_, data)) => {
                // (freed with the slot's release)
                state.data = Some(data);
                // SAFETY: as above.
                unsafe { (*req).transfer_len = 0 };
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
    ///
    /// # Safety
    ///
    /// `req` is initialised (its namespace looked up) and `command` is its capsule.
    unsafe fn signature(
        &self,
        req: *mut bindings::nvmet_req,
        command: &[u8; COMMAND_SIZE],
    ) -> Option<protection::Signature> {
        if !self.integrity {
            return None;
        }
        // SAFETY: a command with metadata has a block device namespace (the nvmet core
        // sets `metadata_len` only for those), held by the request.
        let (pi_type, integrity) = unsafe {
            let ns = (*req).ns;
            if ns.is_null() || (*ns).bdev.is_null() {
                return None;
            }
            (
                (*ns).pi_type,
                bindings::rdma_rs_bdev_get_integrity((*ns).bdev),
            )
        };
        // SAFETY: the profile, if any, lives as long as the namespace's device.
        let interval_exp = unsafe { integrity.as_ref() }?.interval_exp;
        protection::signature(command, u8::try_from(pi_type).ok()?, interval_exp)
    }

    /// The NVMe status of the PI checks of a command's signature context (0: passed), once
    /// its transfer completed.
    pub(super) fn pi_status(&self, state: &RspState) -> u16 {
        pi::status(state.rw.sig_error())
    }
}

/// Destroys the command's `rdma_rw` context (its transfer is done), keeping the data.
pub(super) fn free_rw(state: &mut RspState) {
    if let Some(data) = state.rw.as_mut().destroy() {
        state.data = Some(data);
    }
    state.n_rdma = 0;
}
