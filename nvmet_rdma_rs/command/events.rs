// SPDX-License-Identifier: GPL-2.0

//! A command's trace events (`nvmet/trace.rs`): who it is, for each step.

#![forbid(unsafe_code)]

use super::{Connection, RspState};
use crate::nvmet::trace::{self, ReqId, ReqStep};

impl RspState {
    /// Fires the trace event of the command's `step` on `queue`, with `status` (computed
    /// only if the event is enabled).
    #[inline(always)]
    pub(super) fn trace(
        &self,
        queue: &impl Connection,
        step: ReqStep,
        status: impl FnOnce(&Self) -> u16,
    ) {
        trace::req(step, || {
            let (number, qid) = queue.trace_id();
            let id = ReqId {
                queue: number,
                qid,
                cid: self.cid,
                slot: self.slot,
                opcode: self.opcode,
            };
            (id, status(self))
        });
    }
}

/// No status yet (a step before the core completed the command).
pub(super) fn no_status(_: &RspState) -> u16 {
    0
}
