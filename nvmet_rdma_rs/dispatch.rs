// SPDX-License-Identifier: GPL-2.0

//! Completion dispatch: the completion handlers of a queue's slots, which the RDMA layer
//! gives the queue a work completion belongs to (the handler of the `CmId<Queue>` whose QP
//! it completed on: `SlotCqe`, `RecvCqe`), run the data path's step for it. (Not `#[inline]`:
//! inlined into the trampolines, they made the compiler take a command's start, its
//! command read and its in-capsule list out of `handle_command`, for about 200 more
//! instructions per I/O: Documentation/bench.md, "The eighth step".)

#![forbid(unsafe_code)]

use crate::command::{self, Connection, RspOwner, RspSlot, READ, SEND, WRITE};
use crate::queue::Queue;
use crate::rdma::{
    cqe::{QpRecvHandler, QpSlotHandler, Received},
    WorkCompletion,
};
use crate::recv::CmdSlot;
use kernel::sync::ArcBorrow;

impl QpRecvHandler for CmdSlot {
    type Connection = Queue;

    fn done(&self, queue: ArcBorrow<'_, Queue>, received: Option<Received>, wc: &WorkCompletion) {
        queue.stats().count_completion(wc);
        command::recv_done(queue, self.index, received, wc);
    }
}

impl QpSlotHandler<SEND> for RspSlot {
    type Connection = Queue;

    fn done(&self, queue: ArcBorrow<'_, Queue>, owner: Option<RspOwner<'_>>, wc: &WorkCompletion) {
        queue.stats().count_completion(wc);
        command::send_done(queue, owner, wc);
    }
}

impl QpSlotHandler<READ> for RspSlot {
    type Connection = Queue;

    fn done(&self, queue: ArcBorrow<'_, Queue>, owner: Option<RspOwner<'_>>, wc: &WorkCompletion) {
        queue.stats().count_completion(wc);
        command::read_done(queue, owner, wc);
    }
}

impl QpSlotHandler<WRITE> for RspSlot {
    type Connection = Queue;

    fn done(&self, queue: ArcBorrow<'_, Queue>, owner: Option<RspOwner<'_>>, wc: &WorkCompletion) {
        queue.stats().count_completion(wc);
        command::write_done(queue, self, owner, wc);
    }
}
