// SPDX-License-Identifier: GPL-2.0

//! The step from the `nvmet_req` the core completes back to the transport's object that
//! embeds it.

use super::bindings;

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
