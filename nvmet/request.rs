// SPDX-License-Identifier: GPL-2.0

//! Requests (`struct nvmet_req`): the step from the request the core completes back to
//! the transport's object that embeds it, and the ownership of a request's data buffers.

use super::bindings;
use crate::rdma::rw::SgLists;
use core::ptr::NonNull;
use kernel::prelude::*;

/// A transport object that embeds an `nvmet_req`; implemented with [`impl_has_request!`].
///
/// # Safety
///
/// `OFFSET` is the offset of a field of type `Opaque<bindings::nvmet_req>` in `Self`.
pub(crate) unsafe trait HasRequest {
    /// The offset of the request field.
    const OFFSET: usize;

    /// The object whose request is `req`.
    ///
    /// # Safety
    ///
    /// `req` is the request field of a live `Self`, which stays alive for `'a`.
    unsafe fn from_req<'a>(req: *mut bindings::nvmet_req) -> &'a Self
    where
        Self: Sized,
    {
        // SAFETY: `req` is at `OFFSET` from the start of a live `Self` (trait and function
        // safety sections); `Opaque` is transparent.
        unsafe { &*req.byte_sub(Self::OFFSET).cast::<Self>() }
    }
}

/// Declares that a transport object embeds its `nvmet_req` in the named field.
///
/// ```ignore
/// impl_has_request!(RspSlot, req);
/// ```
macro_rules! impl_has_request {
    ($container:ty, $field:ident) => {
        // SAFETY: `OFFSET` is the offset of `$field`, which the function below checks is
        // an `Opaque<nvmet_req>`.
        // (The layer's own `unsafe`, expanded in the module that embeds the field.)
        #[allow(unsafe_code)]
        unsafe impl $crate::nvmet::HasRequest for $container {
            const OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(
                    *const $container,
                ) -> *const ::kernel::types::Opaque<$crate::rdma::bindings::nvmet_req> =
                    // SAFETY: only the field's address is taken, nothing is read.
                    |container| unsafe { &raw const (*container).$field };
                ::core::mem::offset_of!($container, $field)
            };
        }
    };
}
pub(crate) use impl_has_request;

/// The data buffers of a request, which the core allocated for it
/// (`nvmet_req_alloc_sgls`): the data and, with T10-PI, the protection information. The
/// token owns them: only [`free_sgls`] frees them, taking it back, so whoever holds it
/// (an `rdma_rw` context that maps them, see [`SgLists`]) keeps them alive. A token that
/// is dropped instead leaks the buffers.
///
/// # Invariants
///
/// `sg` (`sg_cnt` entries) and `metadata_sg` (`metadata_sg_cnt`, or null and 0) are the
/// lists `nvmet_req_alloc_sgls` allocated for a request, not freed yet.
pub(crate) struct DataSgls {
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

/// Allocates the data buffers of `req` for its `transfer_len` and `metadata_len` (in a
/// namespace's P2P memory where the request allows it).
///
/// On failure the request holds no list: the core's `nvmet_req_alloc_sgls` leaves its data
/// list pointing at the memory it freed when the second allocation fails, and a later
/// `nvmet_req_free_sgls` would free it again (as the C transport's release does).
///
/// # Safety
///
/// `req` is initialised, its buffers not allocated, and the caller owns it: the core is
/// not processing it.
pub(crate) unsafe fn alloc_sgls(req: *mut bindings::nvmet_req) -> Result<DataSgls> {
    // SAFETY: the request is the caller's and initialised (function's safety section).
    let ret = unsafe { bindings::nvmet_req_alloc_sgls(req) };
    // SAFETY: as above; the fields are the core's results.
    let (sg, sg_cnt, metadata_sg, metadata_sg_cnt) = unsafe {
        if ret < 0 {
            (*req).sg = core::ptr::null_mut();
            (*req).sg_cnt = 0;
            (*req).metadata_sg = core::ptr::null_mut();
            (*req).metadata_sg_cnt = 0;
            return Err(ENOMEM);
        }
        (
            (*req).sg,
            (*req).sg_cnt,
            (*req).metadata_sg,
            (*req).metadata_sg_cnt,
        )
    };
    let sg = NonNull::new(sg).ok_or(ENOMEM)?;
    // INVARIANT: the lists the core just allocated for `req`.
    Ok(DataSgls {
        sg,
        sg_cnt: sg_cnt as u32,
        metadata_sg,
        metadata_sg_cnt: metadata_sg_cnt as u32,
    })
}

/// Frees the data buffers `sgls` of `req` (`nvmet_req_free_sgls`). Buffers that are not
/// the request's any more (it was started again since) are leaked, with a warning, rather
/// than freed on a request that does not own them.
///
/// # Safety
///
/// The caller owns `req`: the core is not processing it.
pub(crate) unsafe fn free_sgls(req: *mut bindings::nvmet_req, sgls: DataSgls) {
    // SAFETY: the request is the caller's (function's safety section).
    unsafe {
        if (*req).sg != sgls.sg.as_ptr() || (*req).metadata_sg != sgls.metadata_sg {
            pr_warn!("a request's data buffers are not its own any more; leaking them\n");
            return;
        }
        // (The token's lists are the request's, allocated by `nvmet_req_alloc_sgls` and
        // not freed: type invariant.)
        bindings::nvmet_req_free_sgls(req);
    }
}
