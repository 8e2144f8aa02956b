// SPDX-License-Identifier: GPL-2.0

//! Commands waiting for send queue space: a command whose work requests do not fit in
//! the send queue waits, in order, for the completions that return space.

#![forbid(unsafe_code)]

use super::{stats::raise_peak, Connection, Io, RspOwner, AWAIT_SQ_SPACE};
use core::sync::atomic::{
    fence,
    Ordering::{Relaxed, SeqCst},
};
use kernel::{prelude::*, sync::ArcBorrow};

impl Io {
    /// A command found the send queue full: it waits (its response slot `index` handed
    /// off to the list) for a completion to return space, or ends here if the queue's
    /// release already ended the waiting ones.
    pub(super) fn wait_for_space(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        index: u32,
        owner: RspOwner<'_>,
    ) {
        {
            let mut waiting = queue.lists().waiting.lock();
            // (the list has room for every slot: only a closed list refuses)
            if !waiting.push_back(index) {
                drop(waiting);
                self.abandon(owner);
                return;
            }
            // (handed off under the lock: whoever pops the slot finds it waiting)
            owner.hand_off(AWAIT_SQ_SPACE);
            // (counted under the lock: whoever pops it decrements after this)
            let waiting_now = self.waiters.fetch_add(1, Relaxed) + 1;
            raise_peak(&queue.stats().sq_wait_peak, waiting_now);
        }
        // Space may have come back between the failed try and the push, from a
        // completion that ran beside this one and saw no waiter: try again (see
        // `run_waiting`).
        self.run_waiting(queue);
    }

    /// The owner of a response slot taken off the wait list; `None`, logged, if the slot
    /// was not waiting (not expected).
    fn resume_waiting(&self, index: u32) -> Option<RspOwner<'_>> {
        let owner = self
            .rsps
            .get(index as usize)?
            .state
            .resume_local(AWAIT_SQ_SPACE);
        if owner.is_none() {
            pr_err!("response slot {index} was on the wait list without waiting; dropped\n");
        }
        owner
    }

    /// Starts waiting commands in order while the send queue has room: after a release
    /// returned send queue space (`sq_wr_avail`, acquire and release), or a command was
    /// listed.
    ///
    /// No fence: a command that found the queue full lists itself and counts itself in
    /// `waiters` before it tries again (its own call here), and that try is a read-modify-
    /// write of `sq_wr_avail` with release, as the release's return of space is one with
    /// acquire. If the try comes after the return (in the counter's order), it finds the
    /// space; if before, the return reads from it, so the count happened before this
    /// check, which sees the waiter. Completions usually run one at a time, but not
    /// always (a direct poll of the shared CQ beside its worker: see `command`'s doc).
    #[inline]
    pub(super) fn run_waiting(&self, queue: ArcBorrow<'_, impl Connection>) {
        // (the check inline, as every release makes it and almost never finds a waiter)
        if self.waiters.load(Relaxed) != 0 {
            self.run_waiting_slow(queue);
        }
    }

    fn run_waiting_slow(&self, queue: ArcBorrow<'_, impl Connection>) {
        loop {
            // Pairs with itself: a completion that returned space (`release`) and one that
            // added a waiter (`wait_for_space`) both fence between their write and this
            // read, so at least one of them sees the other's.
            fence(SeqCst);
            if self.waiters.load(Relaxed) == 0 {
                return;
            }
            let Some(index) = queue.lists().waiting.lock().pop_front() else {
                return;
            };
            let Some(owner) = self.resume_waiting(index) else {
                self.waiters.fetch_sub(1, Relaxed);
                continue;
            };
            let (needed, owner) = match self.execute(&*queue, owner) {
                Ok(()) => {
                    self.waiters.fetch_sub(1, Relaxed);
                    continue;
                }
                Err(waits) => waits,
            };
            // Still no room: back to the front, still counted in `waiters`.
            {
                let mut waiting = queue.lists().waiting.lock();
                if !waiting.push_front(index) {
                    drop(waiting);
                    self.waiters.fetch_sub(1, Relaxed);
                    self.abandon(owner);
                    return;
                }
                owner.hand_off(AWAIT_SQ_SPACE);
            }
            // A completion that returned space while the command was off the list found
            // the list empty and left; its space is visible now that the push took the
            // lock after it: look again.
            fence(SeqCst);
            if self.sq_wr_avail.load(Relaxed) < needed {
                return;
            }
        }
    }

    /// At release, before the nvmet core waits for the queue's requests: ends the commands
    /// still waiting for send queue space (nothing will free space for them any more) and
    /// closes the wait list, so that a command that would wait later ends at once.
    pub(crate) fn abandon_waiting(&self, queue: ArcBorrow<'_, impl Connection>) {
        loop {
            let next = queue.lists().waiting.lock().close_and_pop();
            let Some(index) = next else {
                return;
            };
            self.waiters.fetch_sub(1, Relaxed);
            if let Some(owner) = self.resume_waiting(index) {
                self.abandon(owner);
            }
        }
    }
}
