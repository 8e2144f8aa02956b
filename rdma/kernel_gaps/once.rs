// SPDX-License-Identifier: GPL-2.0

//! A value published once and then read on every I/O: [`PublishOnce`].
//!
//! It does what the kernel crate's `SetOnce` does, on a `core` atomic: on this kernel (gcc,
//! built for size) the kernel crate's atomics are out-of-line calls (`AtomicRepr::as_ptr`
//! and a C helper), about 13 instructions per read, and a queue's buffers and each
//! receive slot's work request are read this way several times per command. Its read is
//! an acquire load, which is what `atomic_read_acquire` is on x86 and arm64 too.

use core::{
    cell::UnsafeCell,
    sync::atomic::{
        AtomicU8,
        Ordering::{Acquire, Relaxed, Release},
    },
};

/// Nothing published yet.
const EMPTY: u8 = 0;
/// A caller is writing the value.
const WRITING: u8 = 1;
/// The value is published.
const SET: u8 = 2;

/// A value written at most once, by the first [`PublishOnce::populate`], and shared
/// read-only from then on.
///
/// # Invariants
///
/// `value` is written only by the caller that moved `state` from [`EMPTY`] to
/// [`WRITING`], once, and holds `Some` from the moment `state` is [`SET`] (a release);
/// after that it is never written again, only read through shared references.
pub(crate) struct PublishOnce<T> {
    state: AtomicU8,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is written once, by one caller, before any reader can see it (type
// invariant), and then only shared: sharing the cell shares `&T` (`T: Sync`), and the value
// may be dropped on another thread than the one that wrote it (`T: Send`).
unsafe impl<T: Send + Sync> Sync for PublishOnce<T> {}

impl<T> PublishOnce<T> {
    /// A cell with nothing published.
    pub(crate) const fn new() -> Self {
        Self {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(None),
        }
    }

    /// Publishes `value` unless a value was published (or is being published) already;
    /// returns whether it did (if not, `value` is dropped).
    pub(crate) fn populate(&self, value: T) -> bool {
        if self
            .state
            .compare_exchange(EMPTY, WRITING, Acquire, Relaxed)
            .is_err()
        {
            return false;
        }
        // SAFETY: the exchange made this the only writer, and no reader reads `value` before
        // `state` is `SET` (type invariant).
        unsafe { *self.value.get() = Some(value) };
        // INVARIANT: written; published, never written again.
        self.state.store(SET, Release);
        true
    }

    /// The published value, if any.
    #[inline]
    pub(crate) fn as_ref(&self) -> Option<&T> {
        if self.state.load(Acquire) != SET {
            return None;
        }
        // SAFETY: `SET`: the value was written before the release this acquire pairs with,
        // and is never written again (type invariant).
        unsafe { (*self.value.get()).as_ref() }
    }
}
