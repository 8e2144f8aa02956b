// SPDX-License-Identifier: GPL-2.0

//! Completion dispatch: the completion handlers of a queue's slots find the queue a work
//! completion belongs to, through its QP, and run the data path's step for it.

// Still holds `unsafe`: the promise that a completion's QP is a live queue's, which the
// RDMA layer cannot check yet (issue 15; Documentation/nvmet-rdma-rs.md, "Where `unsafe`
// lives").
#![allow(unsafe_code)]

use crate::command::{self, RspSlot, READ, SEND, WRITE};
use crate::queue::Queue;
use crate::rdma::{CmId, CqeHandler, WorkCompletion};
use crate::recv::CmdSlot;

/// The queue whose QP `wc` completed on.
fn queue_of(wc: &WorkCompletion) -> &Queue {
    // SAFETY: every work request that carries a response or receive slot's completion
    // entry is posted on a queue's QP, made by `create_qp` or `create_qp_on_srq` on the
    // queue's `CmId<Queue>`; an SRQ's receives complete on the QP that took them. The
    // queue and its QP live until the QP is drained, which processes this completion
    // first.
    unsafe { CmId::<Queue>::handler_of_qp(wc.qp()) }
}

impl CqeHandler for CmdSlot {
    fn done(&self, wc: &WorkCompletion) {
        command::recv_done(queue_of(wc), self.index, wc);
    }
}

impl CqeHandler<SEND> for RspSlot {
    fn done(&self, wc: &WorkCompletion) {
        command::send_done(queue_of(wc), self, wc);
    }
}

impl CqeHandler<READ> for RspSlot {
    fn done(&self, wc: &WorkCompletion) {
        command::read_done(queue_of(wc), self, wc);
    }
}

impl CqeHandler<WRITE> for RspSlot {
    fn done(&self, wc: &WorkCompletion) {
        command::write_done(queue_of(wc), self, wc);
    }
}
