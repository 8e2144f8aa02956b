// SPDX-License-Identifier: GPL-2.0

//! The completions of a command's work requests (its receive, its RDMA READ, its RDMA
//! WRITEs with T10-PI, its response SEND) and `queue_response`, the nvmet core's
//! completion of the request. The queue's completion handlers (`dispatch`) find the
//! queue of a completion and call these.

// Still holds `unsafe`: slot-ownership promises the binding layers cannot check yet
// (issue 15; Documentation/nvmet-rdma-rs.md, "Where `unsafe` lives").
#![allow(unsafe_code)]

use super::{free_data, free_rw, handle_command, Connection, Io, RspSlot, RspState};
use crate::rdma::WorkCompletion;
use crate::wire::COMMAND_SIZE;
use core::sync::atomic::Ordering::Relaxed;
use kernel::prelude::*;

/// Logs a failed work completion (flushes are teardown, quiet) and ends the queue.
fn failed(queue: &impl Connection, what: &str, wc: &WorkCompletion) {
    if wc.is_flush() {
        return;
    }
    pr_err!(
        "{} failed: {} ({}); ending the queue\n",
        what,
        wc.status_name().to_str().unwrap_or("?"),
        wc.status
    );
    queue.fatal_error();
}

/// A receive of `queue` into receive slot `cmd` completed.
pub(crate) fn recv_done(queue: &impl Connection, cmd: u32, wc: &WorkCompletion) {
    let Some(io) = queue.io() else {
        return;
    };
    // A shared slot goes back to its SRQ whenever no command takes it.
    let give_back = || io.give_back_shared(cmd);
    if !wc.is_ok() {
        give_back();
        failed(queue, "RECV", wc);
        return;
    }
    if (wc.byte_len as usize) < COMMAND_SIZE {
        give_back();
        pr_err!(
            "a capsule of {} bytes is shorter than a command; ending the queue\n",
            wc.byte_len
        );
        queue.fatal_error();
        return;
    }
    if queue.is_disconnecting() {
        give_back();
        return;
    }
    handle_command(queue, io, cmd, wc.byte_len);
}

/// The data path of a command whose RDMA transfer (its READ, or its WRITEs with T10-PI)
/// completed, and the command's state, with the transfer's send queue space given back.
// (The state is the slot's, lent to the completion that owns the slot, as in
// `RspSlot::state`.)
#[allow(clippy::mut_from_ref)]
fn transfer_completed<'a>(
    queue: &'a impl Connection,
    rsp: &'a RspSlot,
) -> Option<(&'a Io, &'a mut RspState)> {
    let io = queue.io()?;
    // SAFETY: the transfer was the command's step in progress: it owns the slot.
    let state = unsafe { rsp.state() };
    io.sq_wr_avail.fetch_add(state.n_rdma as i32, Relaxed);
    Some((io, state))
}

/// An RDMA READ of a command's data on `queue`, posted by [`Io::execute`], completed.
pub(crate) fn read_done(queue: &impl Connection, rsp: &RspSlot, wc: &WorkCompletion) {
    if !rsp.read_posted.swap(false, Relaxed) {
        // A provider's second completion of the same READ: the first one ran already.
        queue.stats().duplicate_completions.fetch_add(1, Relaxed);
        return;
    }
    let Some((io, state)) = transfer_completed(queue, rsp) else {
        return;
    };
    if !wc.is_ok() {
        free_data(state);
        io.return_recv(state);
        // The request was started and has not completed; it never will now.
        state.req.uninit();
        io.release(queue, rsp);
        failed(queue, "RDMA READ", wc);
        return;
    }
    queue
        .stats()
        .read_bytes
        .fetch_add(state.req.transfer_len() as u64, Relaxed);
    let pi_status = if state.rw.is_signature() {
        io.pi_status(state)
    } else {
        0
    };
    free_rw(state);
    if pi_status != 0 {
        state.req.complete(pi_status);
    } else {
        state.req.execute();
    }
}

/// The RDMA WRITEs of a command's data with T10-PI, posted by [`queue_response`],
/// completed: the response goes out now, with the PI error the signature MR found, if any.
pub(crate) fn write_done(queue: &impl Connection, rsp: &RspSlot, wc: &WorkCompletion) {
    let Some((io, state)) = transfer_completed(queue, rsp) else {
        return;
    };
    let pi_status = if wc.is_ok() { io.pi_status(state) } else { 0 };
    free_rw(state);
    if !wc.is_ok() {
        // (the request completed already: only the slot is left to free)
        io.release(queue, rsp);
        failed(queue, "RDMA WRITE", wc);
        return;
    }
    if pi_status != 0 {
        // (the response is ours until its SEND is posted)
        state.req.set_status(pi_status);
        io.response_to_device(rsp);
    }
    // (the SEND was prepared by `queue_response`)
    let posted = match state.send.as_mut() {
        Some(send) => io.qp.post(send),
        None => Err(EINVAL),
    };
    if posted.is_err() {
        pr_err!("cannot post a response; ending the queue\n");
        io.release(queue, rsp);
        queue.close(c"send post failure");
    }
}

/// A response SEND, posted by [`queue_response`], completed.
pub(crate) fn send_done(queue: &impl Connection, rsp: &RspSlot, wc: &WorkCompletion) {
    if let Some(io) = queue.io() {
        io.release(queue, rsp);
    }
    if !wc.is_ok() {
        failed(queue, "SEND", wc);
    }
}

/// `queue_response`: the nvmet core completed the request of `rsp` (passed to
/// `nvmet_req_init` by [`Io::start`] on `queue`); send its data and response.
pub(crate) fn queue_response(queue: &impl Connection, rsp: &RspSlot) {
    let Some(io) = queue.io() else {
        return;
    };
    // SAFETY: completing the request hands the slot back to this command's last steps.
    let state = unsafe { rsp.state() };
    let Some(send) = state.send.as_mut() else {
        // (not expected: every slot's SEND is prepared with the queue)
        pr_err!("a response slot has no SEND; ending the queue\n");
        queue.close(c"send post failure");
        return;
    };
    send.set_invalidate(state.invalidate);
    // (the request is ours again: the core completed it)
    let transfer_len = state.req.transfer_len();
    let data_out = !state.write && transfer_len > 0 && !state.in_capsule;
    let with_data = data_out && state.req.status() == 0 && state.rw.is_mapped();
    if with_data {
        queue
            .stats()
            .write_bytes
            .fetch_add(transfer_len as u64, Relaxed);
    }
    state.recv_owed = false;
    if io.post_recv(state.cmd).is_err() {
        queue.close(c"receive post failure");
    }
    io.response_to_device(rsp);
    let posted = if !with_data {
        io.qp.post(send)
    } else if state.rw.is_signature() {
        // With PI the SEND waits for the WRITEs' completion (`write_done`), which tells
        // whether the PI was intact.
        state.rw.as_mut().post()
    } else {
        state.rw.as_mut().post_before(send)
    };
    if posted.is_err() {
        pr_err!("cannot post a response; ending the queue\n");
        // The send queue space goes back (atomically: any context); the slot's data is
        // reclaimed when the queue is released.
        io.sq_wr_avail.fetch_add(state.send_wrs(), Relaxed);
        state.n_rdma = 0;
        queue.close(c"send post failure");
    }
}
