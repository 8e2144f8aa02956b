// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).

use super::{bindings, device::DeviceRef, kernel_gaps::param::BoolParam, Device};
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

/// The admin's consent to a PD with the device-wide DMA rkey (`IB_PD_UNSAFE_GLOBAL_RKEY`,
/// see [`Pd::new`]).
///
/// That rkey lets every peer of every QP on the PD read and write all memory the device
/// can DMA to, kernel memory included: whether to open it is the admin's decision, not
/// one a caller can make with a `bool`. So this token has no public constructor: only
/// [`GlobalRkeyParam::opt_in`] makes one, and only if the admin set that read-only module
/// parameter (declared with `global_rkey_param!`) at load.
#[derive(Clone, Copy)]
pub(crate) struct GlobalRkeyOptIn {
    _private: (),
}

/// The storage of a module parameter through which the admin opens PDs' device-wide DMA
/// rkey; declare one with `global_rkey_param!`, and read it with [`Self::opt_in`].
///
/// # Invariants
///
/// `value` is the storage of a read-only (0444) boolean module parameter: only the kernel
/// writes it, from the module's arguments at load, so a `true` is the admin's choice.
pub(crate) struct GlobalRkeyParam {
    value: BoolParam,
}

impl GlobalRkeyParam {
    /// The storage of a parameter whose default is `false`.
    ///
    /// # Safety
    ///
    /// The result must be placed in a `static` that is the storage (`kernel_param.arg`,
    /// via [`Self::as_arg`]) of a read-only (0444) boolean module parameter, as
    /// `global_rkey_param!` declares it, and be written by nothing else: [`Self::opt_in`]
    /// takes its value for the admin's consent to exposing all DMA-able memory.
    pub(crate) const unsafe fn new() -> Self {
        // INVARIANT: the caller's promise.
        Self {
            value: BoolParam::new(false),
        }
    }

    /// The storage, for `kernel_param.arg`.
    pub(crate) const fn as_arg(&self) -> *mut core::ffi::c_void {
        self.value.as_arg()
    }

    /// The admin's opt-in, if the parameter was set at load.
    pub(crate) fn opt_in(&self) -> Option<GlobalRkeyOptIn> {
        // By the type invariant, only the admin can have set the value.
        self.value.get().then_some(GlobalRkeyOptIn { _private: () })
    }
}

/// An owned protection domain; deallocated on drop. It is shared ([`Arc`]): the QP on it
/// and every MR allocated on it hold a reference, so it goes last.
///
/// # Invariants
///
/// `pd` came from `__ib_alloc_pd` and is deallocated only in `Drop`, before `_device_ref`
/// is put: the device's unregistration, which waits for its references after its
/// clients are removed, cannot free the device under a PD still to be deallocated (one
/// whose last owner goes after the RDMA core removed the device's clients: a queue that
/// joined the device while its removal was under way, an SRQ set of such a queue).
pub(crate) struct Pd {
    pd: NonNull<bindings::ib_pd>,
    /// The device the PD was allocated on, as an address (only compared).
    device: usize,
    /// A reference on that device, put after the PD is deallocated (field drop follows
    /// `Drop::drop`).
    _device_ref: DeviceRef,
}

// SAFETY: a PD is a handle the RDMA core lets any thread use, and a device reference may
// be put from any thread.
unsafe impl Send for Pd {}
// SAFETY: shared use only reads immutable fields (keys) or passes the pointer to the core.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `device`. With the admin's [`GlobalRkeyOptIn`], the PD also gets
    /// the device-wide DMA rkey (`IB_PD_UNSAFE_GLOBAL_RKEY`) that krping's `mem_mode=dma`
    /// advertises, which exposes all DMA-able memory to the peers of its QPs.
    pub(crate) fn new(device: &Device, global_rkey: Option<GlobalRkeyOptIn>) -> Result<Arc<Self>> {
        // (taken first: a device whose last reference went gets no PD)
        let device_ref = device.try_hold().ok_or(ENODEV)?;
        let flags = if global_rkey.is_some() {
            bindings::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY
        } else {
            0
        };
        // SAFETY: `device` is registered (type invariant of `Device`); the caller name is a
        // static C string.
        let pd = unsafe {
            bindings::__ib_alloc_pd(device.as_raw(), flags, crate::MODULE_NAME.as_char_ptr())
        };
        let pd = super::from_err_ptr(pd)?;
        // A failed `Arc` allocation drops the `Pd`, which deallocates the PD.
        // INVARIANT: the PD was just allocated; the reference was just taken.
        Ok(Arc::new(
            Self {
                pd,
                device: device.as_raw() as usize,
                _device_ref: device_ref,
            },
            GFP_KERNEL,
        )?)
    }

    /// The raw pointer, for the layer's calls into the RDMA core.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_pd {
        self.pd.as_ptr()
    }

    /// The device the PD belongs to, as an address (only compared).
    pub(crate) fn device_address(&self) -> usize {
        self.device
    }

    /// The lkey that covers all DMA-mapped memory of the device.
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: `local_dma_lkey` is set at allocation and never changes.
        unsafe { (*self.as_raw()).local_dma_lkey }
    }

    /// The device-wide rkey, if the PD was allocated with a [`GlobalRkeyOptIn`].
    pub(crate) fn global_rkey(&self) -> Option<u32> {
        // SAFETY: `unsafe_global_rkey` is set at allocation and never changes.
        let rkey = unsafe { (*self.as_raw()).unsafe_global_rkey };
        (rkey != 0).then_some(rkey)
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the PD is live, and the device with it (the
        // reference in `_device_ref`, put only after this); the PD's users (QPs, SRQs,
        // MRs) each hold a reference, so the last of them is gone and nothing uses it.
        unsafe { bindings::rdma_rs_ib_dealloc_pd(self.as_raw()) };
    }
}
