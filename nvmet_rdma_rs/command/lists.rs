// SPDX-License-Identifier: GPL-2.0

//! Where a queue's commands wait besides their slots: the claim of a free response slot,
//! the commands waiting for send queue space, and the commands parked until a response
//! slot frees.
//!
//! A free response slot is found by a scan of the slots' states from where the last one
//! was taken ([`SlotLists::take_free`]), not by a list: [`Slot::claim`] decides, so a
//! slot is never taken twice, and a free is one store (an exchange, for the parked
//! commands' sake) instead of a list's lock. Slots free roughly in the order they were
//! taken, and a queue has twice the slots the host may keep busy, so the scan usually
//! finds the first slot it looks at free.
//!
//! [`Slot::claim`]: crate::rdma::kernel_gaps::slot::Slot::claim

#![forbid(unsafe_code)]

use super::{handle_command, stats::raise_peak, Arrival, Connection, Io, RspOwner};
use crate::rdma::cqe::Received;
use crate::send_wait::SendWaitList;
use core::sync::atomic::{
    AtomicBool, AtomicU32,
    Ordering::{Relaxed, SeqCst},
};
use kernel::{
    alloc::kvec::PushError,
    new_spinlock,
    prelude::*,
    sync::{ArcBorrow, SpinLock},
};

/// What became of a command that found no free response slot.
pub(super) enum Parked<'a> {
    /// It waits for the next slot to free.
    Yes,
    /// A slot freed meanwhile: the command takes it (its index and owner), with its
    /// receive's token.
    SlotFreed(u32, RspOwner<'a>, Received),
    /// The host exceeded its depth; the queue is ending. The receive's token comes back.
    Full(Received),
}

/// A queue's hint for the scan for free response slots, and its lists of waiting
/// commands, embedded in the queue.
///
/// # Invariants
///
/// Once [`SlotLists::fill`] ran, each list has room for every entry it can hold (every
/// response slot; one parked command per receive the host may have outstanding), so
/// completions never allocate.
#[pin_data]
pub(crate) struct SlotLists {
    /// Where the next scan for a free response slot starts: the one after the last slot
    /// taken, so that slots are used in turn, as the C transport's FIFO free list uses
    /// them. A hint: any value is safe (the claim decides), so it is a plain store.
    next: AtomicU32,
    /// Response slots taken by commands and not released yet, for the peak: counted by a
    /// load and a store (as [`super::stats::Counter`]), since commands are taken and
    /// released in the queue's completion context.
    busy: AtomicU32,
    /// Response slots waiting for send queue space.
    #[pin]
    pub(super) waiting: SpinLock<SendWaitList>,
    /// Commands that found every response slot busy, oldest first, with their receive's
    /// token (the command holds its buffers): the next slot freed starts one; the release
    /// discards what is left.
    #[pin]
    parked: SpinLock<KVec<(Arrival, Received)>>,
    /// Entries in `parked`, for a lock-free check when a slot frees: raised (sequentially
    /// consistent) before a parking command scans the slots again, loaded (sequentially
    /// consistent) after a release freed its slot with [`RspOwner::free_seqcst`], so that
    /// one of the two sees the other (`park_for_slot`).
    parked_n: AtomicU32,
    /// The host sent more commands than its depth allows (logged once).
    depth_exceeded: AtomicBool,
}

impl SlotLists {
    /// Empty lists, for a queue not set up yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            next: AtomicU32::new(0),
            busy: AtomicU32::new(0),
            waiting <- new_spinlock!(SendWaitList::new()),
            parked <- new_spinlock!(KVec::new()),
            parked_n: AtomicU32::new(0),
            depth_exceeded: AtomicBool::new(false),
        })
    }

    /// Makes room for `slots` response slots waiting for send queue space and `recv`
    /// parked commands.
    pub(crate) fn fill(&self, slots: u32, recv: u32) -> Result {
        let mut waiting = SendWaitList::with_capacity(slots as usize)?;
        let mut parked = KVec::with_capacity(recv as usize, GFP_KERNEL)?;
        // INVARIANT: the lists keep this capacity from now on.
        core::mem::swap(&mut *self.waiting.lock(), &mut waiting);
        core::mem::swap(&mut *self.parked.lock(), &mut parked);
        Ok(())
    }

    /// Takes a free response slot of `io`: its index and owner. A slot whose command still
    /// holds what it took (its response could not be posted, or its transfer's context
    /// could not be destroyed: the queue is ending, and the release reclaims it) is passed
    /// over.
    pub(super) fn take_free<'a>(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        io: &'a Io,
    ) -> Option<(u32, RspOwner<'a>)> {
        let slots = io.rsps.len() as u32;
        let mut index = self.next.load(Relaxed);
        for _ in 0..slots {
            if index >= slots {
                index = 0;
            }
            if let Some(owner) = io.rsps.get(index as usize).and_then(|rsp| {
                // (a load first: a busy slot costs no locked instruction)
                if rsp.state.is_free_seqcst() {
                    rsp.state
                        .claim()
                        .filter(|owner| !owner.in_use && !owner.rw.is_mapped())
                } else {
                    None
                }
            }) {
                self.next.store(index + 1, Relaxed);
                self.count_taken(queue, slots);
                return Some((index, owner));
            }
            index += 1;
        }
        None
    }

    /// Counts a response slot taken, of `slots`, for the peak.
    fn count_taken(&self, queue: ArcBorrow<'_, impl Connection>, slots: u32) {
        // (bounded: an add lost to a race is never corrected)
        let busy = self.busy.load(Relaxed).saturating_add(1).min(slots);
        self.busy.store(busy, Relaxed);
        raise_peak(&queue.stats().rsp_peak, busy);
    }

    /// Counts a response slot released (its owner freed it), for the peak.
    pub(super) fn count_released(&self) {
        self.busy
            .store(self.busy.load(Relaxed).saturating_sub(1), Relaxed);
    }

    /// Commands parked for a response slot now (a snapshot, for reports).
    pub(super) fn parked_for_slot(&self) -> u32 {
        self.parked_n.load(Relaxed)
    }

    /// Parks a command that found no free response slot, with its receive's token, unless
    /// one freed meanwhile.
    pub(super) fn park_for_slot<'a>(
        &self,
        queue: ArcBorrow<'_, impl Connection>,
        io: &'a Io,
        arrival: Arrival,
        received: Received,
    ) -> Parked<'a> {
        let mut parked = self.parked.lock();
        // The capacity covers every receive the host may have outstanding.
        if let Err(PushError((_, received))) = parked.push_within_capacity((arrival, received)) {
            drop(parked);
            if !self.depth_exceeded.swap(true, Relaxed) {
                queue.exceeded_depth();
            }
            return Parked::Full(received);
        }
        // Slots free in completion callbacks, which usually run one at a time, but not
        // always (a direct poll of the shared CQ: see the module's doc). A store-buffering
        // pair orders this against a release (`Io::release`): the count is raised before
        // the scan below loads the slots' states, and the release frees its slot before it
        // loads the count, all four sequentially consistent; so either the scan finds the
        // slot, or the release sees the entry and starts it (`start_parked`).
        self.parked_n.fetch_add(1, SeqCst);
        if let Some((rsp, owner)) = self.take_free(queue, io) {
            // (the entry pushed above, still the last one: the lock is held since)
            if let Some((_, received)) = parked.pop() {
                self.parked_n.fetch_sub(1, Relaxed);
                return Parked::SlotFreed(rsp, owner, received);
            }
            // (not reached)
            drop(owner);
            self.count_released();
        }
        let stats = queue.stats();
        stats.rsp_waits.add(1);
        raise_peak(&stats.slot_wait_peak, parked.len() as u32);
        Parked::Yes
    }

    /// A response slot was freed (with [`RspOwner::free_seqcst`], which orders this check
    /// against a command parking: see `park_for_slot`): starts the oldest parked command,
    /// if any.
    #[inline]
    pub(super) fn start_parked(&self, queue: ArcBorrow<'_, impl Connection>, io: &Io) {
        // (The check inline: every release makes it, and almost never finds a parked
        // command.)
        if self.parked_n.load(SeqCst) != 0 {
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
        if let Some((arrival, received)) = next {
            handle_command(queue, io, arrival, received);
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
            let Some((arrival, received)) = next else {
                return;
            };
            io.give_back_shared(arrival.cmd, received);
        }
    }
}
