// SPDX-License-Identifier: GPL-2.0

//! RDMA core clients (`struct ib_client`): device add and remove notifications.
//!
//! A client lives in a `static` [`IbClient`], because the core's `add` callback is given
//! only the device: the handler's [`ClientHandler::CLIENT`] names that static, and is how
//! the callback finds its client again. So that the callbacks and the registration always
//! agree on the instance, [`IbClient::register`] takes no instance: it registers
//! `T::CLIENT`, the only one the callbacks use. Registering returns a
//! [`ClientRegistration`] guard that unregisters in `Drop`; unregistering calls `remove`
//! for every device that `add` accepted, so per-device data never leaks.
//!
//! ```ignore
//! static WATCHER: IbClient<Watcher> = IbClient::new(c"my_module");
//!
//! impl ClientHandler for Watcher {
//!     const CLIENT: &'static IbClient<Self> = &WATCHER;
//!     type Data = KBox<PerDevice>;
//!     fn add(device: &Device) -> Result<Self::Data> { ... }
//!     fn remove(device: &Device, data: Self::Data) { ... }
//! }
//!
//! let registration = IbClient::<Watcher>::register()?;
//! ```

use super::{bindings, Device};
use core::{
    marker::PhantomData,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{prelude::*, types::ForeignOwnable, types::Opaque};

/// Reacts to RDMA devices appearing and disappearing.
pub(crate) trait ClientHandler: Sized + 'static {
    /// The `static` this handler's client lives in: the instance the core's callbacks use
    /// and the only one [`IbClient::register`] registers. (A `const` cannot refer to a
    /// fresh `IbClient`, which has interior mutability, so this names a `static`.)
    const CLIENT: &'static IbClient<Self>;

    /// Per-device state, created by [`ClientHandler::add`] and handed back to
    /// [`ClientHandler::remove`].
    type Data: ForeignOwnable;

    /// A device was added (or was present when the client registered).
    ///
    /// An error means the client ignores this device: `remove` is not called for it.
    fn add(device: &Device) -> Result<Self::Data>;

    /// A device that `add` accepted is going away, or the client is unregistering.
    /// The device is still usable during the call; everything built on it must be
    /// released before returning.
    fn remove(device: &Device, data: Self::Data);
}

/// An RDMA core client, stored in a `static`.
///
/// # Invariants
///
/// `client` holds a `struct ib_client` whose `add` and `remove` point to this type's
/// trampolines for `T`; `registered` is true exactly while it is registered with the core.
/// Only `T::CLIENT` is ever registered.
pub(crate) struct IbClient<T: ClientHandler> {
    client: Opaque<bindings::ib_client>,
    registered: AtomicBool,
    _handler: PhantomData<T>,
}

// SAFETY: the RDMA core serialises all use of a registered `ib_client` under its own
// locks, and the only Rust-side state is an atomic flag, so sharing between threads is
// sound.
unsafe impl<T: ClientHandler> Sync for IbClient<T> {}

impl<T: ClientHandler> IbClient<T> {
    /// A client called `name` (shown in the core's client lists and messages).
    pub(crate) const fn new(name: &'static CStr) -> Self {
        // All-zeroes is the "not yet registered" state `ib_register_client` expects.
        let mut client: bindings::ib_client = pin_init::zeroed();
        client.name = kernel::str::as_char_ptr_in_const_context(name);
        client.add = Some(Self::add_callback);
        client.remove = Some(Self::remove_callback);
        Self {
            client: Opaque::new(client),
            registered: AtomicBool::new(false),
            _handler: PhantomData,
        }
    }

    /// Registers `T`'s client, `T::CLIENT`. The core calls `add` for every existing
    /// device before this returns. Fails with `EBUSY` if the client is already registered.
    ///
    /// This takes no instance: the callbacks find their client through `T::CLIENT` (the
    /// `add` callback stores the per-device data under it), so registering any other
    /// `IbClient<T>` would file that data under a client the core does not know.
    pub(crate) fn register() -> Result<ClientRegistration<T>> {
        let this = T::CLIENT;
        if this.registered.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        // INVARIANT: `T::CLIENT` is the instance registered, and `registered` is now true.
        // SAFETY: `this.client` is a valid `ib_client` in a `static`, so it never moves
        // and outlives the registration; the flag above makes this the only registration.
        let ret = unsafe { bindings::ib_register_client(this.client.get()) };
        if ret != 0 {
            this.registered.store(false, Ordering::Release);
            return Err(Error::from_errno(ret));
        }
        Ok(ClientRegistration { client: this })
    }

    /// Trampoline for the core's `add` callback.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with a registered device, while the client is registered.
    unsafe extern "C" fn add_callback(raw: *mut bindings::ib_device) -> c_int {
        // SAFETY: the core hands out a registered device that stays so until `remove`.
        let device = unsafe { Device::from_raw(raw) };
        match T::add(device) {
            Ok(data) => {
                // SAFETY: `raw` is a registered device and `T::CLIENT` is the registered
                // client (it is the only `IbClient<T>` `register` registers), as
                // `ib_set_client_data` requires; the core keeps the pointer until `remove`.
                unsafe {
                    bindings::ib_set_client_data(
                        raw,
                        T::CLIENT.client.get(),
                        data.into_foreign().cast(),
                    )
                };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// Trampoline for the core's `remove` callback.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core, once, for a device whose `add` succeeded, with the
    /// pointer that `add_callback` stored.
    unsafe extern "C" fn remove_callback(raw: *mut bindings::ib_device, data: *mut c_void) {
        // SAFETY: the device is still registered during `remove`.
        let device = unsafe { Device::from_raw(raw) };
        // SAFETY: `data` came from `T::Data::into_foreign` in `add_callback`, and the core
        // calls `remove` once per successful `add`, so ownership is taken back exactly once.
        let data = unsafe { T::Data::from_foreign(data.cast()) };
        T::remove(device, data);
    }
}

/// Keeps an [`IbClient`] registered; unregisters it, removing every device from it, on drop.
pub(crate) struct ClientRegistration<T: ClientHandler> {
    client: &'static IbClient<T>,
}

impl<T: ClientHandler> Drop for ClientRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: the client was registered by `register`, which created this guard, and
        // only this guard unregisters it. `ib_unregister_client` waits for callbacks in
        // flight and calls `remove` for every device.
        unsafe { bindings::ib_unregister_client(self.client.client.get()) };
        self.client.registered.store(false, Ordering::Release);
    }
}
