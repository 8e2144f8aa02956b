// SPDX-License-Identifier: GPL-2.0

//! The transport's module-wide state, for the callbacks that carry no context: the nvmet
//! core's `add_port` and the RDMA core's client `add` hand over a port or a device, and
//! nothing of the module that registered them. A module installs its state once, at load
//! ([`install`]), finds it from such callbacks ([`get`]), and takes it back at unload
//! ([`uninstall`]).
//!
//! One slot per module (this layer is compiled into each module that uses it), typed at
//! run time: [`get`] finds the state only as the type it was installed as.

use core::any::TypeId;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, ArcBorrow,
    },
};

/// The slot's lock is not initialised, and nothing uses it.
const UNINIT: u32 = 0;
/// [`install`] is initialising the lock.
const INITIALISING: u32 = 1;
/// The lock is initialised: it may be used.
const READY: u32 = 2;

/// How far the slot's lock is: only [`install`] moves it on, once, from [`UNINIT`].
static LOCK_STATE: Atomic<u32> = Atomic::new(UNINIT);

/// An installed state: an `Arc<T>` (from `Arc::into_raw`) and its type.
///
/// # Invariants
///
/// `ptr` came from `Arc::into_raw` of an `Arc<T>` with `TypeId::of::<T>() == type_id`,
/// whose reference this value owns; `release` is `release::<T>` for that `T`.
struct Installed {
    type_id: TypeId,
    ptr: *const (),
    release: unsafe fn(*const ()),
}

// SAFETY: the state is `Send + Sync` (`install`'s bound): its `Arc` may move and be
// dropped anywhere.
unsafe impl Send for Installed {}

impl Drop for Installed {
    fn drop(&mut self) {
        // SAFETY: the reference this value owns, of the type `release` was made for (type
        // invariant).
        unsafe { (self.release)(self.ptr) };
    }
}

/// Drops the `Arc<T>` whose raw pointer is `ptr`.
///
/// # Safety
///
/// `ptr` came from `Arc::<T>::into_raw`, and its reference is the caller's to give up.
unsafe fn release<T>(ptr: *const ()) {
    // SAFETY: the function's safety section.
    drop(unsafe { Arc::<T>::from_raw(ptr.cast()) });
}

kernel::sync::global_lock! {
    // SAFETY: `install` initialises it, once (moving `LOCK_STATE` from `UNINIT`), and
    // everything else locks it only once `LOCK_STATE` says `READY`, after that.
    unsafe(uninit) static SLOT: Mutex<Option<Installed>> = None;
}

/// Whether the slot's lock may be used.
fn ready() -> bool {
    LOCK_STATE.load(Acquire) == READY
}

/// Installs `state` as the module's state; `EBUSY` if one is installed (or another
/// install is initialising the slot at this moment).
pub(crate) fn install<T: Send + Sync + 'static>(state: Arc<T>) -> Result {
    if LOCK_STATE.cmpxchg(UNINIT, INITIALISING, Relaxed).is_ok() {
        // SAFETY: the state moved from `UNINIT` here, once: nothing used the lock before,
        // and nothing locks it until `READY` is stored below.
        unsafe { SLOT.init() };
        LOCK_STATE.store(READY, Release);
    } else if !ready() {
        return Err(EBUSY);
    }
    let mut slot = SLOT.lock();
    if slot.is_some() {
        return Err(EBUSY);
    }
    // INVARIANT: the reference of `state`, of type `T`, released as a `T`.
    *slot = Some(Installed {
        type_id: TypeId::of::<T>(),
        ptr: Arc::into_raw(state).cast(),
        release: release::<T>,
    });
    Ok(())
}

/// The module's state, if one of type `T` is installed.
pub(crate) fn get<T: 'static>() -> Option<Arc<T>> {
    if !ready() {
        return None;
    }
    let slot = SLOT.lock();
    let installed = slot.as_ref()?;
    if installed.type_id != TypeId::of::<T>() {
        return None;
    }
    // SAFETY: an `Arc<T>` (type invariant, type checked above), whose reference the slot
    // holds while it is locked.
    let state = unsafe { ArcBorrow::<T>::from_raw(installed.ptr.cast()) };
    Some(state.into())
}

/// Takes the module's state back (at unload), if one is installed.
pub(crate) fn uninstall() {
    if !ready() {
        return;
    }
    let installed = SLOT.lock().take();
    // (dropped outside the lock: the state's own drop may take time)
    drop(installed);
}
