// SPDX-License-Identifier: GPL-2.0

//! Completion entries (`struct ib_cqe`) embedded in the object a work request belongs to,
//! whose completions run that object's safe handler.
//!
//! The step from the `ib_cqe` a completion names back to the object that embeds it
//! (`container_of`) is written once, here, the way `kernel::workqueue` does it for work
//! items: an object embeds a [`Cqe<Self, ID>`], declares the field with
//! [`impl_has_cqe!`], and implements [`CqeHandler<ID>`]; an object with several kinds of
//! work requests embeds one `Cqe` per kind, told apart by `ID`.

use super::{bindings, WorkCompletion};
use core::marker::PhantomData;
use kernel::types::Opaque;

/// The handler of the completions of the work requests that carry an object's
/// [`Cqe<Self, ID>`].
pub(crate) trait CqeHandler<const ID: u64 = 0> {
    /// A work request that carried the object's `Cqe<Self, ID>` completed with `wc`.
    /// Runs in the CQ's poll context.
    fn done(&self, wc: &WorkCompletion);
}

/// An object that embeds a [`Cqe<Self, ID>`]; implemented with [`impl_has_cqe!`].
///
/// # Safety
///
/// `OFFSET` is the offset of a field of type `Cqe<Self, ID>` in `Self`.
pub(crate) unsafe trait HasCqe<const ID: u64 = 0> {
    /// The offset of the `Cqe<Self, ID>` field.
    const OFFSET: usize;
}

/// An `ib_cqe` embedded in a `T`: the completions of the work requests that carry it run
/// `T`'s [`CqeHandler<ID>`].
///
/// Whoever posts a work request with [`Cqe::as_raw`] as its `wr_cqe` uses the `Cqe` that
/// is `T`'s [`HasCqe<ID>`] field, and keeps the `T` alive and in place until the request's
/// completion has run (or the QP is drained).
///
/// # Invariants
///
/// `cqe.done` is [`Cqe::run`] for this `T` and `ID`.
#[repr(transparent)]
pub(crate) struct Cqe<T, const ID: u64 = 0> {
    cqe: Opaque<bindings::ib_cqe>,
    _owner: PhantomData<fn(&T)>,
}

// SAFETY: the entry holds only a function pointer, written once at creation; the RDMA
// core reads it from any CPU.
unsafe impl<T, const ID: u64> Send for Cqe<T, ID> {}
// SAFETY: as above.
unsafe impl<T, const ID: u64> Sync for Cqe<T, ID> {}

impl<T: HasCqe<ID> + CqeHandler<ID>, const ID: u64> Cqe<T, ID> {
    /// An entry whose completions run `T`'s handler `ID`.
    pub(crate) fn new() -> Self {
        // INVARIANT: `done` is `run` for `T` and `ID`.
        Self {
            cqe: Opaque::new(bindings::ib_cqe {
                done: Some(Self::run),
            }),
            _owner: PhantomData,
        }
    }

    /// The entry, for a work request's `wr_cqe` (see the type's documentation).
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_cqe {
        self.cqe.get()
    }

    /// The completion callback the RDMA core calls.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with a valid completion whose `wr_cqe` is the entry of a
    /// `Cqe<T, ID>` (its `done` is this function: type invariant), whose `T` is alive (the
    /// poster's promise, see the type's documentation).
    unsafe extern "C" fn run(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
        // SAFETY: the core passes a valid completion for the duration of the call; every
        // work request that reaches this callback was posted with a `wr_cqe`.
        let (wc, cqe) = unsafe { (&*wc, (*wc).__bindgen_anon_1.wr_cqe) };
        // SAFETY: `cqe` is the `Cqe<T, ID>` at `T::OFFSET` in a live `T` (the function's
        // safety section and `HasCqe`); `Cqe` and `Opaque` are transparent.
        let owner = unsafe { &*cqe.byte_sub(T::OFFSET).cast::<T>() };
        owner.done(&WorkCompletion::from_raw(wc));
    }
}

/// Declares that an object embeds a [`Cqe`] in the named field, for handler `ID` (0 if
/// left out).
///
/// ```ignore
/// impl_has_cqe!(CmdSlot, cqe);
/// impl_has_cqe!(RspSlot, read_cqe, 1);
/// ```
// (Not every module embeds completion entries.)
#[allow(unused_macros)]
macro_rules! impl_has_cqe {
    ($owner:ty, $field:ident) => {
        $crate::rdma::cqe::impl_has_cqe!($owner, $field, 0);
    };
    ($owner:ty, $field:ident, $id:literal) => {
        // SAFETY: `OFFSET` is the offset of `$field`, which the function below checks is a
        // `Cqe<$owner, $id>`.
        // (The layer's own `unsafe`, expanded in the module that embeds the field.)
        #[allow(unsafe_code)]
        unsafe impl $crate::rdma::cqe::HasCqe<$id> for $owner {
            const OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(*const $owner) -> *const $crate::rdma::cqe::Cqe<$owner, $id> =
                    // SAFETY: only the field's address is taken, nothing is read.
                    |owner| unsafe { &raw const (*owner).$field };
                ::core::mem::offset_of!($owner, $field)
            };
        }
    };
}
#[allow(unused_imports)]
pub(crate) use impl_has_cqe;
