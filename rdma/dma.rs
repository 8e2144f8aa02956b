// SPDX-License-Identifier: GPL-2.0

//! DMA-mapped buffers for SEND/RECV and RDMA READ/WRITE.

use super::{bindings, device::DeviceRef, Device};
use kernel::{dma::DataDirection, prelude::*, sync::Arc};

/// A kmalloc'd, DMA-mapped (bidirectional) buffer. Cloning shares it: posted work
/// requests hold a clone, so the memory stays mapped until their completion ran.
///
/// The device may write the buffer at any time while a receive or RDMA READ into it is
/// posted, so the CPU never borrows it: data moves in and out by copy, with the DMA
/// syncs the streaming DMA API asks for.
#[derive(Clone)]
pub(crate) struct DmaBuf(Arc<Mapping>);

/// # Invariants
///
/// `memory` is `len` bytes, mapped at `dma` on `device`, from creation to `Drop`; the
/// mapping holds a reference on `device`, so the device stays (its unregistration waits)
/// until the buffer is unmapped, whatever outlives what.
struct Mapping {
    /// Owns the allocation; accessed only through `cpu`.
    memory: KVec<u8>,
    cpu: *mut u8,
    dma: u64,
    len: usize,
    /// Whether the device's DMA needs syncs: not for a software device whose "DMA" is
    /// the CPU's own copy (`ib_uses_virt_dma`, rxe and siw), as the C inlines decide.
    synced: bool,
    /// The mapping's reference on its device, put once the buffer is unmapped.
    device: DeviceRef,
}

// SAFETY: the raw pointers are a kernel allocation owned by the mapping and a device
// reference; both may be used from any thread.
unsafe impl Send for Mapping {}
// SAFETY: shared access goes through `copy_in`/`copy_out`/`read_64` and the other
// methods that copy through raw pointers, never through references; concurrent device
// writes are the documented DMA contract.
unsafe impl Sync for Mapping {}

impl DmaBuf {
    /// Allocates `len` zeroed bytes and maps them for `device`.
    pub(crate) fn new(device: &Device, len: usize) -> Result<Self> {
        Self::allocate(device, len, 1)
    }

    /// As [`DmaBuf::new`], starting on a page boundary: for data the block layer may
    /// use for direct I/O, which needs aligned memory.
    pub(crate) fn new_page_aligned(device: &Device, len: usize) -> Result<Self> {
        Self::allocate(device, len, kernel::page::PAGE_SIZE)
    }

    fn allocate(device: &Device, len: usize, align: usize) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        // kmalloc aligns power-of-two sizes naturally and hands out larger ones as whole
        // pages, so the size rounded up to the alignment comes aligned: no padding (a page
        // of in-capsule data takes one page, as in the C transport). Padded otherwise.
        let rounded = len.checked_next_multiple_of(align).ok_or(EINVAL)?;
        let mut memory = KVec::from_elem(0u8, rounded, GFP_KERNEL)?;
        if memory.as_ptr().align_offset(align) != 0 {
            let padded = len.checked_add(align - 1).ok_or(EINVAL)?;
            memory = KVec::from_elem(0u8, padded, GFP_KERNEL)?;
        }
        let start = memory.as_mut_ptr();
        let pad = start.align_offset(align);
        if pad.checked_add(len).is_none_or(|end| end > memory.len()) {
            return Err(EINVAL);
        }
        // SAFETY: checked just above: `start + pad .. + len` lies inside `memory`.
        let cpu = unsafe { start.add(pad) };
        // The mapping's reference on the device (put after it is unmapped, or on failure).
        let device_ref = device.try_hold().ok_or(ENODEV)?;
        // SAFETY: `cpu` is `len` bytes of kmalloc memory, which the DMA API may map; the
        // device is live (held above).
        let (dma, virt) = unsafe {
            (
                bindings::rdma_rs_ib_dma_map_single(
                    device.as_raw(),
                    cpu.cast(),
                    len,
                    DataDirection::Bidirectional.into(),
                ),
                bindings::rdma_rs_ib_uses_virt_dma(device.as_raw()),
            )
        };
        // SAFETY: `dma` was just returned by the map call on this device.
        if unsafe { bindings::rdma_rs_ib_dma_mapping_error(device.as_raw(), dma) } != 0 {
            // (nothing is mapped; `device_ref` is put)
            return Err(ENOMEM);
        }
        let mapping = Mapping {
            memory,
            cpu,
            dma,
            len,
            synced: !virt,
            device: device_ref,
        };
        // On failure the mapping is dropped: unmapped, and its reference put.
        Ok(Self(Arc::new(mapping, GFP_KERNEL)?))
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.0.len
    }

    /// The DMA address of byte `offset`.
    pub(crate) fn dma_addr(&self, offset: usize) -> u64 {
        self.0.dma + offset as u64
    }

    /// How many pages `len` bytes at `offset` span (what a registration of them maps).
    pub(crate) fn pages(&self, offset: usize, len: usize) -> u32 {
        let page = kernel::page::PAGE_SIZE as u64;
        if len == 0 {
            return 0;
        }
        let first = self.dma_addr(offset) / page;
        let last = (self.dma_addr(offset) + len as u64 - 1) / page;
        (last - first + 1) as u32
    }

    /// Copies `data` into the buffer at `offset`, then hands the range to the device.
    pub(crate) fn copy_in(&self, offset: usize, data: &[u8]) -> Result {
        let end = offset.checked_add(data.len()).ok_or(EINVAL)?;
        if end > self.0.len {
            return Err(EINVAL);
        }
        // SAFETY: `offset..end` lies inside the allocation (checked above); the source is
        // a distinct Rust slice.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.0.cpu.add(offset), data.len())
        };
        self.sync_for_device();
        Ok(())
    }

    /// Fills `len` bytes at `offset` with `byte`, then hands the range to the device.
    pub(crate) fn fill(&self, offset: usize, len: usize, byte: u8) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.0.len {
            return Err(EINVAL);
        }
        // SAFETY: `offset..end` lies inside the allocation (checked above).
        unsafe { core::ptr::write_bytes(self.0.cpu.add(offset), byte, len) };
        self.sync_for_device();
        Ok(())
    }

    /// Writes a test pattern into the first `len` bytes: byte `i` is `seed + i` (mod 256),
    /// so misplaced data is as visible as wrong data. Then hands the range to the device.
    pub(crate) fn fill_pattern(&self, len: usize, seed: u8) -> Result {
        if len > self.0.len {
            return Err(EINVAL);
        }
        for i in 0..len {
            // SAFETY: `i < len <= self.0.len`, inside the allocation.
            unsafe { self.0.cpu.add(i).write(seed.wrapping_add(i as u8)) };
        }
        self.sync_for_device();
        Ok(())
    }

    /// Takes the buffer back from the device and copies `out.len()` bytes from `offset`.
    pub(crate) fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result {
        let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
        if end > self.0.len {
            return Err(EINVAL);
        }
        self.sync_for_cpu();
        // SAFETY: `offset..end` lies inside the allocation (checked above); the target is
        // a distinct Rust slice.
        unsafe {
            core::ptr::copy_nonoverlapping(self.0.cpu.add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Takes the 64 bytes at `offset` back from the device and reads them (as
    /// [`DmaBuf::copy_out`] does, syncing only that range): an NVMe command, read on every
    /// command. Read as eight words where they are 8-byte aligned, so that the compiler
    /// keeps them in registers, where the kernel's code for size calls `memcpy` for a
    /// 64-byte copy (about 70 instructions).
    pub(crate) fn read_64(&self, offset: usize) -> Result<[u8; 64]> {
        let end = offset.checked_add(64).ok_or(EINVAL)?;
        if end > self.0.len {
            return Err(EINVAL);
        }
        self.sync_range_for_cpu(offset, 64);
        // SAFETY: `offset..end` lies inside the allocation (checked above), aligned for the
        // words where it is read as words; the target is a local array. Raw reads, no
        // reference: a device writing the range meanwhile (its user posted a receive
        // there, which the caller rules out) could tear the bytes, never make them invalid
        // integers. The words' native bytes are the memory's bytes, in order.
        let out = unsafe {
            let from = self.0.cpu.add(offset);
            if from.cast::<u64>().is_aligned() {
                core::mem::transmute::<[u64; 8], [u8; 64]>(from.cast::<[u64; 8]>().read_volatile())
            } else {
                let mut out = [0u8; 64];
                core::ptr::copy_nonoverlapping(from, out.as_mut_ptr(), 64);
                out
            }
        };
        Ok(out)
    }

    /// Compares `len` bytes at `offset` with those of `other` at the same offset; returns
    /// the offset of the first difference.
    pub(crate) fn first_difference(&self, other: &DmaBuf, len: usize) -> Result<Option<usize>> {
        if len > self.0.len || len > other.0.len {
            return Err(EINVAL);
        }
        self.sync_for_cpu();
        other.sync_for_cpu();
        for i in 0..len {
            // SAFETY: `i < len`, inside both allocations (checked above).
            let (a, b) = unsafe { (self.0.cpu.add(i).read(), other.0.cpu.add(i).read()) };
            if a != b {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// The CPU address of byte `offset`, for C code that reads or fills the buffer in
    /// place (after [`DmaBuf::sync_range_for_cpu`]). `EINVAL` past the end.
    pub(crate) fn cpu_ptr(&self, offset: usize) -> Result<*mut u8> {
        if offset >= self.0.len {
            return Err(EINVAL);
        }
        // SAFETY: `offset` lies inside the allocation (checked above).
        Ok(unsafe { self.0.cpu.add(offset) })
    }

    /// The device the buffer is mapped for (registered while the buffer exists).
    pub(crate) fn device(&self) -> &Device {
        self.0.device.device()
    }

    /// A scatter/gather entry for `len` bytes at `offset`, for a send posted with
    /// `IB_SEND_INLINE`: the driver copies the bytes from their CPU address when the send
    /// is posted (no DMA, no lkey). `EINVAL` past the end.
    pub(crate) fn inline_sge(&self, offset: usize, len: u32) -> Result<bindings::ib_sge> {
        let end = offset.checked_add(len as usize).ok_or(EINVAL)?;
        if end > self.0.len {
            return Err(EINVAL);
        }
        Ok(bindings::ib_sge {
            addr: self.cpu_ptr(offset)?.addr() as u64,
            length: len,
            lkey: 0,
        })
    }

    /// Takes `len` bytes at `offset` back from the device before the CPU reads them.
    #[inline]
    pub(crate) fn sync_range_for_cpu(&self, offset: usize, len: usize) {
        // (decided here rather than in the C helper: no call per command on rxe or siw)
        if self.0.synced {
            self.sync_range(offset, len, false);
        }
    }

    /// Hands `len` bytes at `offset` to the device after the CPU wrote them.
    #[inline]
    pub(crate) fn sync_range_for_device(&self, offset: usize, len: usize) {
        if self.0.synced {
            self.sync_range(offset, len, true);
        }
    }

    fn sync_range(&self, offset: usize, len: usize, for_device: bool) {
        if offset.checked_add(len).is_none_or(|end| end > self.0.len) || len == 0 {
            return;
        }
        let sync = if for_device {
            bindings::rdma_rs_ib_dma_sync_single_for_device
        } else {
            bindings::rdma_rs_ib_dma_sync_single_for_cpu
        };
        // SAFETY: the mapping is live (type invariant); the range lies inside it.
        unsafe {
            sync(
                self.0.device.as_raw(),
                self.0.dma + offset as u64,
                len,
                DataDirection::Bidirectional.into(),
            )
        };
    }

    fn sync_for_cpu(&self) {
        self.sync_range_for_cpu(0, self.0.len);
    }

    fn sync_for_device(&self) {
        self.sync_range_for_device(0, self.0.len);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped at creation on this device (type invariant). The last `DmaBuf`
        // is gone, so no work request can still use the mapping: requests posted through
        // the layer's `Qp` hold a clone in their record until they complete or the QP is
        // gone, and owners that post raw requests into a buffer (nvmet_rdma_rs's `Io`)
        // drain their QP before they drop it.
        unsafe {
            bindings::rdma_rs_ib_dma_unmap_single(
                self.device.as_raw(),
                self.dma,
                self.len,
                DataDirection::Bidirectional.into(),
            )
        };
        // `memory` and `device`, fields, are freed and put after this body: only once the
        // buffer is unmapped.
    }
}
