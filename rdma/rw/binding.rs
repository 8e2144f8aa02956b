// SPDX-License-Identifier: GPL-2.0

//! The QP an `rdma_rw` context maps its transfers for, and the completion entries its
//! transfers end on ([`RwBinding`]).

use super::super::{
    bindings,
    qp_handle::{Entry, QpHandle},
    slot_post::Resumes,
};

/// The QP a context maps its transfers for, and the completion entries of the transfers
/// it posts alone there, by direction; made by the CM id that owns the QP
/// ([`super::super::CmId::rw_binding`]).
///
/// # Invariants
///
/// The owners of the entries (if any) stay alive and in place as long as the QP can
/// complete requests (until it was drained), and live in the handler of the id that owns
/// the QP (they are [`super::super::cqe::SlotCqe`]s, whose completions find it).
pub(crate) struct RwBinding {
    pub(super) qp: QpHandle,
    pub(super) completions: Option<(*mut bindings::ib_cqe, *mut bindings::ib_cqe)>,
    /// What the completions on the two entries resume.
    pub(super) resumes: (Option<Resumes>, Option<Resumes>),
}

impl RwBinding {
    /// A binding to `qp`, whose transfers posted alone complete on `from_remote` (READs)
    /// and `to_remote` (WRITEs).
    ///
    /// # Safety
    ///
    /// Both entries are [`super::super::cqe::SlotCqe`]s ([`Entry::of_slot`]) of objects
    /// that stay alive and in place as long as `qp` can complete requests (until it was
    /// drained), in the handler of the CM id that owns `qp`, which their completions find.
    pub(in crate::rdma) unsafe fn new(qp: QpHandle, from_remote: Entry, to_remote: Entry) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            qp,
            completions: Some((from_remote.cqe(), to_remote.cqe())),
            resumes: (from_remote.resumes(), to_remote.resumes()),
        }
    }

    /// A binding to `qp` for a context that only posts through [`super::RwCtx::wrs`], with the
    /// caller's entries (the layer's records).
    pub(in crate::rdma) fn without_completions(qp: QpHandle) -> Self {
        // INVARIANT: no entries.
        Self {
            qp,
            completions: None,
            resumes: (None, None),
        }
    }
}
