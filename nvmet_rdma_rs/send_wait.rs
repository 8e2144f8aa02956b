// SPDX-License-Identifier: GPL-2.0

//! The commands of a queue that wait for send queue space.
//!
//! A command whose data transfer and response do not fit in the send queue waits, oldest
//! first, until a completion returns space. The queue's release ends the waiting
//! commands (nothing will return space any more) and closes the list, so that a command
//! that would wait after that ends at once instead of being left behind.

#![forbid(unsafe_code)]

use kernel::prelude::*;

/// Response slots waiting for send queue space, oldest first.
///
/// # Invariants
///
/// Once `closed`, no slot is added: the release takes what is left, one slot at a time,
/// and a command that would wait after that is refused (its caller ends it).
pub(crate) struct SendWaitList {
    slots: KVec<u32>,
    closed: bool,
}

impl SendWaitList {
    /// An empty, open list that can hold `capacity` slots without allocating.
    pub(crate) fn with_capacity(capacity: usize) -> Result<Self> {
        Ok(Self {
            slots: KVec::with_capacity(capacity, GFP_KERNEL)?,
            closed: false,
        })
    }

    /// An empty list without room (before the queue knows its slots).
    pub(crate) fn new() -> Self {
        Self {
            slots: KVec::new(),
            closed: false,
        }
    }

    /// Adds `slot` at the end; `false` if the list is closed (or, which the capacity
    /// rules out, full): the caller ends the command.
    pub(crate) fn push_back(&mut self, slot: u32) -> bool {
        !self.closed && self.slots.push_within_capacity(slot).is_ok()
    }

    /// Puts `slot` back at the front (it was the oldest and still does not fit);
    /// `false` as for [`SendWaitList::push_back`].
    pub(crate) fn push_front(&mut self, slot: u32) -> bool {
        !self.closed && self.slots.insert_within_capacity(0, slot).is_ok()
    }

    /// Takes the oldest slot.
    pub(crate) fn pop_front(&mut self) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.slots.remove(0).ok()
    }

    /// Closes the list and takes a slot left on it, if any.
    pub(crate) fn close_and_pop(&mut self) -> Option<u32> {
        // INVARIANT: from here on the pushes refuse.
        self.closed = true;
        self.slots.pop()
    }
}
