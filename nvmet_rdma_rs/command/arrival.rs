// SPDX-License-Identifier: GPL-2.0

//! A command's arrival: what its receive's completion knows of it, and where it goes from
//! there (a free response slot, or the wait for one).

#![forbid(unsafe_code)]

use super::{lists::Parked, Connection, Io};
use crate::nvmet::SqCq;
use crate::rdma::{cqe::Received, Stamp};
use kernel::sync::ArcBorrow;

/// A command's arrival: its receive slot, the bytes received and when (if timed).
#[derive(Clone, Copy)]
pub(crate) struct Arrival {
    /// The receive slot.
    pub(crate) cmd: u32,
    /// Bytes received.
    pub(crate) len: u32,
    /// When its receive completed ([`Stamp::NONE`] if not timed).
    pub(crate) at: Stamp,
}

/// Starts the command that arrived (`arrival`, whose buffers `received` holds) on
/// `queue`, or gives its receive slot back if the queue is going.
pub(crate) fn handle_command(
    queue: ArcBorrow<'_, impl Connection>,
    io: &Io,
    arrival: Arrival,
    received: Received,
) {
    let give_back = |received| io.give_back_shared(arrival.cmd, received);
    // (checked again for a parked command, whose queue may have closed since)
    if queue.is_disconnecting() {
        give_back(received);
        return;
    }
    // The state may change right after its check: hold the sq until the command was
    // handed over, or the release's `nvmet_sq_destroy` may clear `sq->ctrl` and put the
    // controller while `nvmet_req_init` parses the command with them.
    let Some(entered) = SqCq::enter(&queue) else {
        give_back(received);
        return;
    };
    let (rsp, owner, received) = match queue.lists().take_free(queue, io) {
        Some((rsp, owner)) => (rsp, owner, received),
        None => match queue.lists().park_for_slot(queue, io, arrival, received) {
            Parked::Yes => return,
            Parked::SlotFreed(rsp, owner, received) => (rsp, owner, received),
            Parked::Full(received) => {
                give_back(received);
                return;
            }
        },
    };
    io.start(queue, &entered, arrival, rsp, owner, received);
}
