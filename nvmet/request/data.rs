// SPDX-License-Identifier: GPL-2.0

//! A request's data: the in-capsule data it is pointed at, and the data buffers the core
//! allocates for a keyed transfer ([`DataSgls`]), which an `rdma_rw` context maps.

use super::{bindings, HasSqCq, Request};
use crate::rdma::{rw::SgLists, DmaBuf};
use core::{ptr::NonNull, sync::atomic::Ordering::Relaxed};
use kernel::{prelude::*, sync::ArcBorrow};

impl Request {
    /// Points the started request at the `len` bytes at `offset` of the buffer `place`
    /// finds in `queue` (the data that came in the command's capsule). `EINVAL` if the
    /// request is not started (or handed over) on `queue` (the queue its sq keeps, that
    /// very object: [`super::super::SqCq::keep`]), holds data already, `place` finds no
    /// buffer, or the bytes are not in the buffer or span more than [`IN_CAPSULE_PAGES`]
    /// pages.
    ///
    /// The request holds nothing for the buffer: the buffer lives in the queue, which the
    /// queue's sq keeps until the request ended ([`super::super::SqCq::keep`]), as for the
    /// command itself ([`Request::init`]).
    pub(crate) fn use_in_capsule<Q: HasSqCq + 'static>(
        &mut self,
        queue: ArcBorrow<'_, Q>,
        place: impl for<'x> FnOnce(&'x Q) -> Option<&'x DmaBuf>,
        offset: usize,
        len: usize,
    ) -> Result {
        let started_on = self.queue.load(Relaxed);
        if !self.is_started()
            || !queue.sq_cq().keeps(started_on, &*queue)
            || !self.fields().sg.is_null()
        {
            return Err(EINVAL);
        }
        let buf = place(&queue).ok_or(EINVAL)?;
        // SAFETY: the list is the request's own, and nobody else uses it: the core used
        // it only for an earlier command, which it ended before this one started (the
        // request is started and not handed over, so the core does not have it now).
        let (sg, count) = unsafe { self.in_capsule.fill(buf, offset, len)? };
        let fields = self.fields_mut();
        fields.sg = sg;
        fields.sg_cnt = count as i32;
        fields.transfer_len += len;
        Ok(())
    }

    /// Allocates the request's data buffers for its `transfer_len` and `metadata_len` (in
    /// a namespace's P2P memory where the request allows it).
    ///
    /// On failure the request holds no list: the core's `nvmet_req_alloc_sgls` leaves its
    /// data list pointing at the memory it freed when the second allocation fails, and a
    /// later `nvmet_req_free_sgls` would free it again (as the C transport's release does).
    pub(crate) fn alloc_sgls(&mut self) -> Result<DataSgls> {
        if !self.is_started() {
            return Err(EINVAL);
        }
        let req = self.raw();
        // (`nvmet_req_init` does not reset `p2p_dev`, which tells `nvmet_req_free_sgls`
        // how to free: the buffers of a leaked token must not leave it set.)
        self.fields_mut().p2p_dev = core::ptr::null_mut();
        // SAFETY: the request is started and the caller's: its namespace is looked up.
        let ret = unsafe { bindings::nvmet_req_alloc_sgls(req) };
        // (The fields are the core's results.)
        let fields = self.fields_mut();
        let sg = match NonNull::new(fields.sg) {
            Some(sg) if ret >= 0 => sg,
            _ => {
                fields.sg = core::ptr::null_mut();
                fields.sg_cnt = 0;
                fields.metadata_sg = core::ptr::null_mut();
                fields.metadata_sg_cnt = 0;
                return Err(ENOMEM);
            }
        };
        let (p2p_dev, sg_cnt, metadata_sg, metadata_sg_cnt) = (
            fields.p2p_dev,
            fields.sg_cnt,
            fields.metadata_sg,
            fields.metadata_sg_cnt,
        );
        // INVARIANT: the lists the core just allocated for the request.
        Ok(DataSgls {
            p2p_dev,
            sg,
            sg_cnt: sg_cnt as u32,
            metadata_sg,
            metadata_sg_cnt: metadata_sg_cnt as u32,
        })
    }

    /// Frees the request's data buffers `sgls` (`nvmet_req_free_sgls`). Buffers that are
    /// not the request's any more are leaked, with a warning, rather than freed on a
    /// request that does not own them.
    pub(crate) fn free_sgls(&mut self, sgls: DataSgls) {
        let req = self.raw();
        // SAFETY: the request is the caller's (`&mut self`).
        unsafe {
            if (*req).sg != sgls.sg.as_ptr()
                || (*req).metadata_sg != sgls.metadata_sg
                || (*req).p2p_dev != sgls.p2p_dev
            {
                pr_warn!("a request's data buffers are not its own any more; leaking them\n");
                return;
            }
            // (The token's lists are the request's, allocated by `nvmet_req_alloc_sgls`
            // and not freed: type invariant of `DataSgls`.)
            bindings::nvmet_req_free_sgls(req);
        }
    }
}

/// The data buffers of a request, which the core allocated for it
/// (`nvmet_req_alloc_sgls`): the data and, with T10-PI, the protection information. The
/// token owns them: only [`Request::free_sgls`] frees them, taking it back, so whoever holds it
/// (an `rdma_rw` context that maps them, see [`SgLists`]) keeps them alive. A token that
/// is dropped instead leaks the buffers.
///
/// # Invariants
///
/// `sg` (`sg_cnt` entries) and `metadata_sg` (`metadata_sg_cnt`, or null and 0) are the
/// lists `nvmet_req_alloc_sgls` allocated for a request (in `p2p_dev`'s memory if not null),
/// not freed yet.
pub(crate) struct DataSgls {
    /// The P2P device whose memory the lists are in (null: plain memory).
    p2p_dev: *mut bindings::pci_dev,
    sg: NonNull<bindings::scatterlist>,
    sg_cnt: u32,
    metadata_sg: *mut bindings::scatterlist,
    metadata_sg_cnt: u32,
}

// SAFETY: the lists are plain memory that any CPU may hand to the device or free.
unsafe impl Send for DataSgls {}

// SAFETY: the lists are valid and stay so while the token lives: nothing frees them
// without it (type invariant, and `free_sgls` takes it).
unsafe impl SgLists for DataSgls {
    fn data(&self) -> (*mut bindings::scatterlist, u32) {
        (self.sg.as_ptr(), self.sg_cnt)
    }

    fn metadata(&self) -> (*mut bindings::scatterlist, u32) {
        (self.metadata_sg, self.metadata_sg_cnt)
    }
}
