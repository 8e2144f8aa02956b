// SPDX-License-Identifier: GPL-2.0

//! What shows that a mapped transfer's work requests are done, so that its context may
//! give its scatterlists back ([`super::RwCtx::destroy`]): its own completion, or the
//! drain of its QP.

use super::super::{kernel_gaps::slot::Ended, WorkCompletion};
use core::marker::PhantomData;

/// What shows that a mapped transfer's work requests are done, for [`RwCtx::destroy`].
pub(crate) enum TransferEnd<'a> {
    /// The transfer was not posted.
    NotPosted,
    /// A completion of the entry the context's post ended with, on its QP: the
    /// transfer's own completion, or that of the SEND it was chained before. (Requests on
    /// a send queue complete in order, so all of the post's are done.) The completion
    /// names the entry, not the post; what ties it to the post is that nothing else can
    /// reach a posted context: a context is posted only from a slot's state
    /// ([`super::super::slot_post::Owner::post`], whose requests resume only that slot), and that
    /// state is reached again only through the owner the post's own completion resumes
    /// ([`super::super::cqe::QpSlotHandler`]); a [`WorkCompletion`] is lent to its handler call
    /// only. So a completion presented here with a context still in flight is never the
    /// context's own, and the check refuses it.
    Completed(&'a WorkCompletion),
    /// The transfer's QP was drained.
    Drained(&'a Drained<'a>),
}

/// Shows that a QP was drained ([`super::super::CmId::shut_down`]): every work request posted on
/// it before is done. It borrows the id, so it cannot outlive the QP (and name another QP
/// made later at the same address).
///
/// # Invariants
///
/// `qp` is 0, or the address of a QP that was drained and lives for `'a`.
pub(crate) struct Drained<'a> {
    /// The QP's address (only compared); 0 if the id had none.
    pub(super) qp: usize,
    _id: PhantomData<&'a ()>,
}

impl<'a> Drained<'a> {
    /// The drain of the QP at `qp`.
    ///
    /// # Safety
    ///
    /// The QP at `qp` was drained (every request posted on it completed, and posting on
    /// it is closed), and it lives for `'a`.
    pub(in crate::rdma) unsafe fn new(qp: usize) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            qp,
            _id: PhantomData,
        }
    }

    /// The drained QP's address (only compared; 0 if the id had none).
    pub(in crate::rdma) fn qp_address(&self) -> usize {
        self.qp
    }

    /// The drain of an id without a QP: it shows nothing over.
    pub(in crate::rdma) fn no_qp() -> Self {
        Self {
            qp: 0,
            _id: PhantomData,
        }
    }

    /// What the drain shows over: the QP's completions, which resumed the slots whose
    /// requests were posted on it ([`super::super::slot_post::Owner::post`]); `None` if the id had no
    /// QP.
    pub(crate) fn ended(&self) -> Option<Ended<'a>> {
        // SAFETY: the QP was drained: every request posted on it completed (flushed if need
        // be), and nothing is posted on it any more (its gate is closed), while the id it
        // borrows lives.
        unsafe { Ended::new(self.qp) }
    }
}
