// SPDX-License-Identifier: GPL-2.0

//! Where a queue's commands wait besides their slots: the free response slots, the
//! commands waiting for send queue space, and the commands parked until a response slot
//! frees.

#![forbid(unsafe_code)]

use super::{handle_command, Connection, Io};
use crate::rdma::cqe::Received;
use crate::send_wait::SendWaitList;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use kernel::{
    alloc::kvec::PushError,
    new_spinlock,
    prelude::*,
    sync::{ArcBorrow, SpinLock},
};

/// What became of a command that found no free response slot.
pub(super) enum Parked {
    /// It waits for the next slot to free.
    Yes,
    /// A slot freed meanwhile: the command takes it, with its receive's token.
    SlotFreed(u32, Received),
    /// The host exceeded its depth; the queue is ending. The receive's token comes back.
    Full(Received),
}

/// A queue's lists of response slots and waiting commands, embedded in the queue.
///
/// # Invariants
///
/// Once [`SlotLists::fill`] ran, each list has room for every entry it can hold (every
/// response slot; one parked command per receive the host may have outstanding), so
/// completions never allocate.
#[pin_data]
pub(crate) struct SlotLists {
    /// Response slots not in use; each at most once.
    #[pin]
    pub(super) free: SpinLock<KVec<u32>>,
    /// Response slots waiting for send queue space.
    #[pin]
    pub(super) waiting: SpinLock<SendWaitList>,
    /// Commands that found every response slot busy, oldest first, as (receive slot,
    /// bytes received, the receive's token: the command holds its buffers): the next slot
    /// freed starts one; the release discards what is left.
    #[pin]
    parked: SpinLock<KVec<(u32, u32, Received)>>,
    /// Entries in `parked`, for a lock-free check when a slot frees.
    parked_n: AtomicU32,
    /// The host sent more commands than its depth allows (logged once).
    depth_exceeded: AtomicBool,
}

impl SlotLists {
    /// Empty lists, for a queue not set up yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            free <- new_spinlock!(KVec::new()),
            waiting <- new_spinlock!(SendWaitList::new()),
            parked <- new_spinlock!(KVec::new()),
            parked_n: AtomicU32::new(0),
            depth_exceeded: AtomicBool::new(false),
        })
    }

    /// Makes room for `slots` response slots, all free, and `recv` parked commands.
    pub(crate) fn fill(&self, slots: u32, recv: u32) -> Result {
        let mut free = KVec::with_capacity(slots as usize, GFP_KERNEL)?;
        for slot in (0..slots).rev() {
            free.push(slot, GFP_KERNEL)?;
        }
        let mut waiting = SendWaitList::with_capacity(slots as usize)?;
        let mut parked = KVec::with_capacity(recv as usize, GFP_KERNEL)?;
        // INVARIANT: the lists keep this capacity from now on.
        core::mem::swap(&mut *self.free.lock(), &mut free);
        core::mem::swap(&mut *self.waiting.lock(), &mut waiting);
        core::mem::swap(&mut *self.parked.lock(), &mut parked);
        Ok(())
    }

    /// Takes a free response slot; `slots` is how many the queue has (for the peak).
    pub(super) fn take_free(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        slots: u32,
    ) -> Option<u32> {
        let mut free = self.free.lock();
        let rsp = free.pop();
        let in_use = slots - free.len() as u32;
        // (a load first: the peak rarely moves, and a `fetch_max` is a locked loop)
        let peak = &queue.stats().rsp_peak;
        if in_use > peak.load(Relaxed) {
            peak.fetch_max(in_use, Relaxed);
        }
        rsp
    }

    /// Puts a response slot back on the free list. Never allocates (type invariant): only
    /// a second release of one slot can find it full (logged, the slot is not listed
    /// twice).
    pub(super) fn free_slot(&self, queue: ArcBorrow<'_, impl Connection>, index: u32) {
        if self.free.lock().push_within_capacity(index).is_err() {
            pr_err!(
                "queue {}: response slot {} released twice\n",
                queue.number(),
                index
            );
        }
    }

    /// Parks a command that found no free response slot, with its receive's token, unless
    /// one freed meanwhile.
    pub(super) fn park_for_slot(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        cmd: u32,
        len: u32,
        received: Received,
    ) -> Parked {
        let mut parked = self.parked.lock();
        // The capacity covers every receive the host may have outstanding.
        if let Err(PushError((_, _, received))) = parked.push_within_capacity((cmd, len, received))
        {
            drop(parked);
            if !self.depth_exceeded.swap(true, Relaxed) {
                queue.exceeded_depth();
            }
            return Parked::Full(received);
        }
        self.parked_n.fetch_add(1, Relaxed);
        // Slots free in completion callbacks, which usually run one at a time, but not
        // always (a direct poll of the shared CQ: see the module's doc). The free list's lock
        // orders this against a release (`start_parked`): either its push came first and
        // the pop below finds the slot, or this lock came first, and the count above
        // happened before the release's check, which sees the entry.
        let freed = self.free.lock().pop();
        if let Some(rsp) = freed {
            // (the entry pushed above, still the last one: the lock is held since)
            if let Some((_, _, received)) = parked.pop() {
                self.parked_n.fetch_sub(1, Relaxed);
                return Parked::SlotFreed(rsp, received);
            }
            // (not reached)
            self.free_slot(queue, rsp);
        }
        queue.stats().rsp_waits.add(1);
        Parked::Yes
    }

    /// A response slot was freed (pushed on the free list, whose lock orders this check
    /// against a command parking: see `park_for_slot`): starts the oldest parked command,
    /// if any.
    #[inline]
    pub(super) fn start_parked(&self, queue: ArcBorrow<'_, impl Connection>, io: &Io) {
        // (The check inline: every release makes it, and almost never finds a parked
        // command.)
        if self.parked_n.load(Relaxed) != 0 {
            self.start_oldest_parked(queue, io);
        }
    }

    fn start_oldest_parked(&self, queue: ArcBorrow<'_, impl Connection>, io: &Io) {
        let next = {
            let mut parked = self.parked.lock();
            if parked.is_empty() {
                return;
            }
            self.parked_n.fetch_sub(1, Relaxed);
            parked.remove(0).ok()
        };
        if let Some((cmd, len, received)) = next {
            handle_command(queue, io, cmd, len, received);
        }
    }

    /// Gives back the receive slots of commands that never started, after the QP was
    /// drained.
    pub(crate) fn discard_parked(&self, io: &Io) {
        loop {
            let next = {
                let mut parked = self.parked.lock();
                let next = parked.pop();
                if next.is_some() {
                    self.parked_n.fetch_sub(1, Relaxed);
                }
                next
            };
            let Some((cmd, _, received)) = next else {
                return;
            };
            io.give_back_shared(cmd, received);
        }
    }
}
