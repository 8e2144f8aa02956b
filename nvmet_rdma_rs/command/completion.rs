// SPDX-License-Identifier: GPL-2.0

//! The completions of a command's work requests (its receive, its RDMA READ, its RDMA
//! WRITEs with T10-PI, its response SEND) and `queue_response`, the nvmet core's
//! completion of the request. The queue's completion handlers (`dispatch`) find the
//! queue of a completion and call these.

#![forbid(unsafe_code)]

use super::{
    free_data, free_rw, handle_command, latency, no_status, Arrival, Connection, Io, RspOwner,
    RspSlot, RspState, Stamps, TransportError, Wrs,
};
use crate::nvmet::{trace::ReqStep, Request};
use crate::rdma::{cqe::Received, rw::TransferEnd, slot_post::Prepared, Stamp, WorkCompletion};
use crate::wire::COMMAND_SIZE;
use core::sync::atomic::Ordering::Relaxed;
use kernel::{prelude::*, sync::ArcBorrow};

/// Logs a failed work completion (flushes are teardown, quiet) and ends the queue.
fn failed(
    queue: ArcBorrow<'_, impl Connection>,
    what: &str,
    kind: TransportError,
    wc: &WorkCompletion,
) {
    if wc.is_flush() {
        return;
    }
    pr_err!(
        "{} failed: {} ({}); ending the queue\n",
        what,
        wc.status_name().to_str().unwrap_or("?"),
        wc.status
    );
    queue.fatal_error(kind);
}

/// Counts a post that failed with `error` as a transport error, unless posting was
/// closed (`ENOTCONN`: the queue is ending, and what it still completes is dropped);
/// whether it counted.
fn post_failed(queue: &impl Connection, error: Error) -> bool {
    let counted = error != crate::rdma::code::enotconn();
    if counted {
        queue.count_error(TransportError::Post);
    }
    counted
}

/// A receive of `queue` into receive slot `cmd` completed, giving its buffers back
/// (`received`; `None`, counted, for a completion of a receive that was not posted: a
/// provider's second completion of it).
pub(crate) fn recv_done(
    queue: ArcBorrow<'_, impl Connection>,
    cmd: u32,
    received: Option<Received>,
    wc: &WorkCompletion,
) {
    let Some(received) = received else {
        queue.stats().duplicate_completions.add(1);
        return;
    };
    let Some(io) = queue.io() else {
        return;
    };
    // A shared slot goes back to its SRQ whenever no command takes it.
    let give_back = |received| io.give_back_shared(cmd, received);
    if !wc.is_ok() {
        give_back(received);
        failed(queue, "RECV", TransportError::Recv, wc);
        return;
    }
    if (wc.byte_len as usize) < COMMAND_SIZE {
        give_back(received);
        pr_err!(
            "a capsule of {} bytes is shorter than a command; ending the queue\n",
            wc.byte_len
        );
        queue.fatal_error(TransportError::ShortCapsule);
        return;
    }
    if queue.is_disconnecting() {
        give_back(received);
        return;
    }
    let arrival = Arrival {
        cmd,
        len: wc.byte_len,
        at: latency::arrival(),
    };
    handle_command(queue, io, arrival, received);
}

/// The owner of a response slot, resumed by the completion of the work request it posted
/// (the layer's trampoline); `None`, counted, for a completion the slot does not wait for
/// (a provider's second completion of the same request).
fn resumed<'a>(queue: &impl Connection, owner: Option<RspOwner<'a>>) -> Option<RspOwner<'a>> {
    if owner.is_none() {
        queue.stats().duplicate_completions.add(1);
    }
    owner
}

/// The data path of a command whose RDMA transfer (its READ, or its WRITEs with T10-PI)
/// completed, with the transfer's send queue space given back.
fn transfer_completed<'a>(queue: &'a impl Connection, owner: &mut RspOwner<'_>) -> Option<&'a Io> {
    let io = queue.io()?;
    io.sq_wr_avail.fetch_add(owner.n_rdma as i32, Relaxed);
    io.pending.settled(&mut owner.out);
    Some(io)
}

/// An RDMA READ of a command's data on `queue`, posted by [`Io::execute`], completed.
pub(crate) fn read_done(
    queue: ArcBorrow<'_, impl Connection>,
    owner: Option<RspOwner<'_>>,
    wc: &WorkCompletion,
) {
    let Some(mut owner) = resumed(&*queue, owner) else {
        return;
    };
    let Some(io) = transfer_completed(&*queue, &mut owner) else {
        return;
    };
    if !wc.is_ok() {
        free_data(&mut owner, TransferEnd::Completed(wc));
        io.return_recv(&mut owner);
        // The request was started and has not completed; it never will now.
        owner.req.uninit();
        io.release(queue, owner, TransferEnd::Completed(wc));
        failed(queue, "RDMA READ", TransportError::RdmaRead, wc);
        return;
    }
    queue
        .stats()
        .read_bytes
        .add(owner.req.transfer_len() as u64);
    let pi_status = if owner.rw.is_signature() {
        io.pi_status(&owner)
    } else {
        0
    };
    free_rw(&mut owner, TransferEnd::Completed(wc));
    owner.trace(&*queue, ReqStep::Read, no_status);
    let stamps = &mut owner.stamps;
    Stamps::stamp(stamps.recv, &mut stamps.submit);
    if pi_status != 0 {
        Request::complete(owner, pi_status);
    } else {
        owner.trace(&*queue, ReqStep::Submit, no_status);
        Request::execute(owner);
    }
}

/// The response SEND of a slot's state, ready to post on the queue's QP.
fn prepared_send(state: &mut RspState) -> Result<Prepared<'_>> {
    // (every slot's SEND is prepared with the queue)
    Ok(state.send.as_mut().ok_or(EINVAL)?.prepare())
}

/// The RDMA WRITEs of a command's data with T10-PI, posted by [`queue_response`],
/// completed: the response goes out now, with the PI error the signature MR found, if any.
pub(crate) fn write_done(
    queue: ArcBorrow<'_, impl Connection>,
    rsp: &RspSlot,
    owner: Option<RspOwner<'_>>,
    wc: &WorkCompletion,
) {
    let Some(mut owner) = resumed(&*queue, owner) else {
        return;
    };
    let Some(io) = transfer_completed(&*queue, &mut owner) else {
        return;
    };
    let pi_status = if wc.is_ok() { io.pi_status(&owner) } else { 0 };
    free_rw(&mut owner, TransferEnd::Completed(wc));
    if !wc.is_ok() {
        // (the request completed already: only the slot is left to free)
        io.release(queue, owner, TransferEnd::Completed(wc));
        failed(queue, "RDMA WRITE", TransportError::RdmaWrite, wc);
        return;
    }
    if pi_status != 0 {
        // (the response is ours until its SEND is posted)
        owner.req.set_status(pi_status);
        io.response_to_device(rsp.index);
    }
    // (the SEND was prepared by `queue_response`)
    owner.count_post(1);
    io.pending.posted(&mut owner.out, Wrs::SEND);
    if let Err((e, owner)) = owner.post(&io.qp, prepared_send) {
        if post_failed(&*queue, e) {
            pr_err!("cannot post a response; ending the queue\n");
        }
        // (a SEND the provider queued although the post failed completes, flushed, through
        // `send_done`, which releases the slot)
        if let Some(owner) = owner {
            io.release(queue, owner, TransferEnd::Completed(wc));
        }
        queue.close(c"send post failure");
    }
}

/// A response SEND, posted by [`queue_response`], completed.
pub(crate) fn send_done(
    queue: ArcBorrow<'_, impl Connection>,
    owner: Option<RspOwner<'_>>,
    wc: &WorkCompletion,
) {
    let Some(owner) = resumed(&*queue, owner) else {
        return;
    };
    if wc.is_ok() {
        if owner.wrote != 0 {
            queue.stats().write_bytes.add(owner.wrote as u64);
            // (the WRITEs went before the SEND, on the same QP, or completed before it was
            // posted, with T10-PI: they are done)
            owner.trace(&*queue, ReqStep::Written, |state| state.req.status());
        }
        owner.trace(&*queue, ReqStep::Sent, |state| state.req.status());
        let stats = queue.stats();
        stats.send_wrs.add(owner.wrs.into());
        stats.send_posts.add(owner.posts.into());
        stats.recv_posts.add(owner.recv_reposted.into());
        if owner.req.status() != 0 {
            stats.error_status.add(1);
        }
        if owner.stamps.recv.is_set() {
            queue
                .latency()
                .record(owner.class, &owner.stamps, Stamp::now());
        }
    }
    if let Some(io) = queue.io() {
        io.release(queue, owner, TransferEnd::Completed(wc));
    }
    if !wc.is_ok() {
        failed(queue, "SEND", TransportError::Send, wc);
    }
}

/// `queue_response`: the nvmet core completed the request of `rsp` (passed to
/// `nvmet_req_init` by [`Io::start`] on `queue`) and gave its slot back (`owner`); send its
/// data and response.
pub(crate) fn queue_response(
    queue: ArcBorrow<'_, impl Connection>,
    rsp: &RspSlot,
    mut owner: RspOwner<'_>,
) {
    let Some(io) = queue.io() else {
        return;
    };
    let stamps = &mut owner.stamps;
    Stamps::stamp(stamps.recv, &mut stamps.done);
    owner.trace(&*queue, ReqStep::Complete, |state| state.req.status());
    let invalidate = owner.invalidate;
    let Some(send) = owner.send.as_mut() else {
        // (not expected: every slot's SEND is prepared with the queue)
        pr_err!("a response slot has no SEND; ending the queue\n");
        queue.count_error(TransportError::Post);
        queue.close(c"send post failure");
        return;
    };
    send.set_invalidate(invalidate);
    // (the request is ours again: the core completed it)
    let transfer_len = owner.req.transfer_len();
    let data_out = !owner.write && transfer_len > 0 && !owner.in_capsule;
    let with_data = data_out && owner.req.status() == 0 && owner.rw.is_mapped();
    // (counted when the SEND completes, in the completion context, where the counters
    // are taken)
    owner.wrote = if with_data { transfer_len } else { 0 };
    // One pass through the QP's posting gate for the step's posts: the receive's and the
    // response's (with its RDMA WRITEs).
    let open = io.qp.open();
    // The core is done with the command and its in-capsule data: the receive slot goes
    // back to the device (as the C transport's `nvmet_rdma_queue_response` does).
    if let Some(received) = owner.recv.take() {
        match io.repost_recv(open.as_ref(), &owner, received) {
            Ok(()) => owner.recv_reposted = true,
            Err(e) => {
                post_failed(&*queue, e);
                queue.close(c"receive post failure");
            }
        }
    }
    io.response_to_device(rsp.index);
    // (the response's SEND, after the WRITEs of its data, or the WRITEs alone with
    // T10-PI, whose completion posts the SEND)
    let (wrs, kinds) = match (with_data, owner.rw.is_signature()) {
        (false, _) => (1, Wrs::SEND),
        (true, false) => (owner.n_rdma + 1, Wrs::writes(owner.n_rdma).and(Wrs::SEND)),
        (true, true) => (owner.n_rdma, Wrs::writes(owner.n_rdma)),
    };
    owner.count_post(wrs);
    io.pending.posted(&mut owner.out, kinds);
    let posted = match &open {
        // (posting closed: the queue is ending)
        None => Err((crate::rdma::code::enotconn(), Some(owner))),
        Some(open) if !with_data => owner.post_under(open, prepared_send),
        // With PI the SEND waits for the WRITEs' completion (`write_done`), which tells
        // whether the PI was intact.
        Some(open) if owner.rw.is_signature() => {
            owner.post_under(open, |state| state.rw.as_mut().prepare_under(open))
        }
        Some(open) => owner.post_under(open, |state| {
            let send = state.send.as_mut().ok_or(EINVAL)?;
            state.rw.as_mut().prepare_before_under(send, open)
        }),
    };
    drop(open);
    if let Err((e, owner)) = posted {
        if post_failed(&*queue, e) {
            pr_err!("cannot post a response; ending the queue\n");
        }
        // Nothing posted: the send queue space goes back (atomically: any context); the
        // slot's data is reclaimed when the queue is released (the slot is left free but
        // `in_use`, which the claim of a free slot passes over). Requests the provider queued although the post failed complete, flushed,
        // and their completion releases the slot and its space.
        if let Some(mut owner) = owner {
            io.sq_wr_avail.fetch_add(owner.send_wrs(), Relaxed);
            io.pending.settled(&mut owner.out);
            owner.n_rdma = 0;
        }
        queue.close(c"send post failure");
    }
}
