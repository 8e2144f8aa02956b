// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`).

use super::bindings;
use kernel::{prelude::*, types::Opaque};

/// A borrowed RDMA device.
///
/// # Invariants
///
/// The wrapped `struct ib_device` is registered with the RDMA core for as long as a
/// `&Device` exists: the core only hands devices out between their add and remove
/// callbacks, and holds a reference while a CM id is bound to one.
#[repr(transparent)]
pub(crate) struct Device(Opaque<bindings::ib_device>);

impl Device {
    /// Borrows a device from a pointer the RDMA core handed out.
    ///
    /// # Safety
    ///
    /// `ptr` points to a registered `struct ib_device` that stays registered for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `Device` is a transparent wrapper of `ib_device`, and the caller
        // guarantees the device outlives `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The raw pointer, for calls into the RDMA core.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.0.get()
    }

    /// A reference on the device (`ib_device_try_get`): while it is held, the device's
    /// unregistration waits (after its clients are removed, before its caches are torn
    /// down). `None` once the device's last reference went.
    pub(crate) fn try_hold(&self) -> Option<DeviceRef> {
        // SAFETY: the device is registered (`from_raw`'s promise) while `self` is
        // borrowed; the reference taken here is the returned value's.
        unsafe { bindings::rdma_rs_ib_device_try_get(self.as_raw()) }.then(|| {
            // INVARIANT: the reference was just taken.
            DeviceRef(self.as_raw())
        })
    }

    /// The device's name, e.g. `rxe0`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: by the type invariant the device is registered, so its `struct device`
        // has a name, a NUL-terminated string that lives as long as the device.
        unsafe { CStr::from_char_ptr(bindings::rdma_rs_ib_device_name(self.as_raw())) }
    }

    /// Number of physical ports; they are numbered from 1.
    pub(crate) fn port_count(&self) -> u32 {
        // SAFETY: `phys_port_cnt` is set before registration and never changes afterwards.
        unsafe { (*self.as_raw()).phys_port_cnt }
    }

    /// The device's attributes (`ib_device::attrs`).
    fn attrs(&self) -> &bindings::ib_device_attr {
        // SAFETY: by the type invariant the device is registered for as long as `&self`
        // lives, and `attrs` is filled in before registration and never changes afterwards,
        // so nothing writes it while the shared reference exists.
        unsafe { &(*self.as_raw()).attrs }
    }

    /// RDMA READ depths for connection parameters: how many reads the device answers
    /// (responder resources) and issues (initiator depth) at once, at most 16 each.
    pub(crate) fn rdma_read_depths(&self) -> (u8, u8) {
        let attrs = self.attrs();
        let clamp = |n: i32| n.clamp(1, 16) as u8;
        (
            clamp(attrs.max_qp_rd_atom),
            clamp(attrs.max_qp_init_rd_atom),
        )
    }

    /// Scatter/gather entries a send work request may have, and an RDMA READ.
    pub(crate) fn max_send_sges(&self) -> (u32, u32) {
        let attrs = self.attrs();
        (
            attrs.max_send_sge.max(1) as u32,
            attrs.max_sge_rd.max(1) as u32,
        )
    }

    /// How many SRQs the device offers, and how many receives each may hold (0, 0 without
    /// SRQ support).
    pub(crate) fn srq_limits(&self) -> (u32, u32) {
        let attrs = self.attrs();
        (attrs.max_srq.max(0) as u32, attrs.max_srq_wr.max(0) as u32)
    }

    /// How many completion vectors (interrupt queues) the device offers; at least 1.
    pub(crate) fn completion_vectors(&self) -> u32 {
        // SAFETY: `num_comp_vectors` is set before registration and never changes.
        unsafe { (*self.as_raw()).num_comp_vectors.max(1) as u32 }
    }

    /// The largest number of pages a fast-registration MR may map on this device.
    pub(crate) fn max_fast_reg_pages(&self) -> u32 {
        self.attrs().max_fast_reg_page_list_len
    }

    /// Whether the device takes inline data (`IB_SEND_INLINE`) on a SEND_WITH_INV as on a
    /// SEND. siw does not: it accepts the post, then fails to start it (inline data only
    /// on SEND and RDMA WRITE, `siw_activate_tx`).
    pub(crate) fn inline_send_with_invalidate(&self) -> bool {
        // SAFETY: the ops are set before registration and never change.
        let driver = unsafe { (*self.as_raw()).ops.driver_id };
        driver != bindings::rdma_driver_id_RDMA_DRIVER_SIW
    }

    /// Whether the device can offload T10-PI through signature MRs
    /// (`IBK_INTEGRITY_HANDOVER`: QPs may be created with `IB_QP_CREATE_INTEGRITY_EN`).
    pub(crate) fn supports_integrity(&self) -> bool {
        let flags = self.attrs().kernel_cap_flags;
        flags & u64::from(bindings::ib_kernel_cap_flags_IBK_INTEGRITY_HANDOVER) != 0
    }

    /// The device's `struct device`, for it to be named as a DMA client (it lives as long
    /// as the device), if it can reach PCI peer-to-peer memory
    /// (`ib_dma_pci_p2p_dma_supported`); `None` for software devices such as rxe and siw.
    pub(crate) fn p2p_dma_client(&self) -> Option<*mut bindings::device> {
        // SAFETY: the device is registered (type invariant); the helper reads its DMA
        // device's capabilities, and `dev` is a field of the live device.
        unsafe {
            bindings::rdma_rs_ib_dma_pci_p2p_dma_supported(self.as_raw())
                .then(|| &raw mut (*self.as_raw()).__bindgen_anon_1.dev)
        }
    }

    /// Whether the device offers RDMA READ with invalidate (`rdma_cap_read_inv`: iWARP).
    pub(crate) fn can_read_with_invalidate(&self) -> bool {
        // SAFETY: as for `transport`.
        unsafe { bindings::rdma_rs_protocol_iwarp(self.as_raw(), 1) }
    }

    /// The transport a port speaks, as named by `rdma link`.
    pub(crate) fn transport(&self, port: u32) -> &'static str {
        // SAFETY: the device is registered (type invariant); the helpers only read its
        // immutable port capabilities.
        let (iwarp, roce) = unsafe {
            (
                bindings::rdma_rs_protocol_iwarp(self.as_raw(), port),
                bindings::rdma_rs_protocol_roce(self.as_raw(), port),
            )
        };
        match (iwarp, roce) {
            (true, _) => "iWARP",
            (_, true) => "RoCE",
            _ => "InfiniBand",
        }
    }
}

/// A reference on a device, from [`Device::try_hold`]; put when dropped.
///
/// # Invariants
///
/// Holds one reference on the device (`ib_device_try_get`), which `Drop` puts.
pub(crate) struct DeviceRef(*mut bindings::ib_device);

impl DeviceRef {
    /// The raw pointer, for calls into the RDMA core (valid while the reference is held).
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.0
    }

    /// The device, registered while the reference is held.
    pub(crate) fn device(&self) -> &Device {
        // SAFETY: the reference this value holds (type invariant) keeps the device's
        // unregistration waiting while `self` is borrowed.
        unsafe { Device::from_raw(self.0) }
    }
}

impl Drop for DeviceRef {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds (type invariant).
        unsafe { bindings::ib_device_put(self.0) };
    }
}

impl core::fmt::Display for Device {
    /// `rxe0 (1 port, RoCE)`: the name and what its first port speaks.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let ports = self.port_count();
        let plural = if ports == 1 { "" } else { "s" };
        write!(
            f,
            "{} ({} port{}, {})",
            self.name().to_str().unwrap_or("?"),
            ports,
            plural,
            self.transport(1)
        )
    }
}

// `pr_*!` format through `kernel::fmt::Display`.
impl kernel::fmt::Display for Device {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

/// A device's name as it was when copied (`rxe0`), for reports about objects that outlive
/// their look at the device, without a reference to it. Printable ASCII only: anything
/// else (a quote, a backslash, a byte of a multi-byte character) is kept as `?`, so the
/// name goes into JSON and log lines as it is.
///
/// # Invariants
///
/// `bytes[..len]` is printable ASCII other than `"` and `\`.
#[derive(Clone, Copy)]
pub(crate) struct DeviceName {
    bytes: [u8; bindings::IB_DEVICE_NAME_MAX as usize],
    len: u8,
}

impl DeviceName {
    /// `device`'s name now.
    pub(crate) fn of(device: &Device) -> Self {
        let name = device.name().to_bytes();
        let mut bytes = [0; bindings::IB_DEVICE_NAME_MAX as usize];
        // (names are shorter than `IB_DEVICE_NAME_MAX`, with their NUL)
        let len = name.len().min(bytes.len());
        for (to, &from) in bytes.iter_mut().zip(&name[..len]) {
            // INVARIANT: printable ASCII other than a quote or a backslash.
            *to = match from {
                b'"' | b'\\' => b'?',
                b' '..=b'~' => from,
                _ => b'?',
            };
        }
        Self {
            bytes,
            len: len as u8,
        }
    }

    /// The name.
    pub(crate) fn as_str(&self) -> &str {
        // (ASCII by the type invariant: never the fallback)
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("?")
    }
}
