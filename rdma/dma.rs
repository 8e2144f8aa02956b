// SPDX-License-Identifier: GPL-2.0

//! DMA-mapped buffers for SEND/RECV and RDMA READ/WRITE.

use super::{bindings, device::DeviceRef, Device};
use kernel::{dma::DataDirection, prelude::*, sync::Arc};

/// A kmalloc'd, DMA-mapped (bidirectional) buffer. Cloning shares it: posted work
/// requests hold a clone, so the memory stays mapped until their completion ran.
///
/// The device may write the buffer at any time while a receive or RDMA READ into it is
/// posted, and clones on other threads may copy in and out of it at the same time, so
/// the CPU never borrows it: data moves in and out by volatile copies (the kernel's
/// `READ_ONCE`/`WRITE_ONCE`: accesses that race may tear the bytes, never make the
/// access undefined), with the DMA syncs the streaming DMA API asks for, of exactly the
/// bytes copied (a sync of more, on a bounce-buffered mapping, would copy over bytes the
/// device or another copy owns).
#[derive(Clone)]
pub(crate) struct DmaBuf(Arc<Mapping>);

/// # Invariants
///
/// `memory` is `len` bytes, mapped at `dma` on `device`, from creation to `Drop`; the
/// mapping holds a reference on `device`, so the device stays (its unregistration waits)
/// until the buffer is unmapped, whatever outlives what. Rust code reads and writes the
/// bytes at `cpu` only by this module's volatile accesses, never through a reference (C
/// code is given addresses from [`DmaBuf::cpu_ptr`] only by unsafe calls).
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
// SAFETY: the only mutable state is the memory at `cpu`, which methods on a shared
// `DmaBuf` read and write only by volatile accesses (type invariant): a copy racing
// another one, on another thread, or a DMA may tear the bytes, but every byte or word
// read is a valid integer, and such marked accesses, the kernel's `READ_ONCE` and
// `WRITE_ONCE`, do not race in the kernel's memory model. No safe method hands out a
// reference to the memory; `cpu_ptr` gives a raw pointer, whose uses (by C code given
// it) are unsafe calls, which answer for them.
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

    /// Whether the device's DMA needs syncs ([`DmaBuf::sync_range_for_cpu`] and
    /// [`DmaBuf::sync_range_for_device`] do nothing otherwise): the same for every buffer
    /// mapped for one device.
    #[inline]
    pub(crate) fn needs_sync(&self) -> bool {
        self.0.synced
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

    /// The CPU address of the `len` bytes at `offset`; `EINVAL` past the end.
    fn range(&self, offset: usize, len: usize) -> Result<*mut u8> {
        range_end(offset, len, self.0.len)?;
        Ok(self.0.cpu.wrapping_add(offset))
    }

    /// Copies `data` into the buffer at `offset`, then hands those bytes to the device.
    #[inline]
    pub(crate) fn copy_in(&self, offset: usize, data: &[u8]) -> Result {
        let to = self.range(offset, data.len())?;
        // SAFETY: the range lies inside the allocation (checked by `range`); the source
        // is a Rust slice, so not in the buffer, which no reference points into (type
        // invariant); other accesses to the range are volatile too, or the device's.
        unsafe { write_volatile_bytes(to, data) };
        self.sync_range_for_device(offset, data.len());
        Ok(())
    }

    /// Fills `len` bytes at `offset` with `byte`, then hands those bytes to the device.
    pub(crate) fn fill(&self, offset: usize, len: usize, byte: u8) -> Result {
        let to = self.range(offset, len)?;
        // SAFETY: as in `copy_in`, for `len` bytes.
        unsafe { fill_volatile_bytes(to, len, byte) };
        self.sync_range_for_device(offset, len);
        Ok(())
    }

    /// Writes a test pattern into the first `len` bytes: byte `i` is `seed + i` (mod 256),
    /// so misplaced data is as visible as wrong data. Then hands those bytes to the device.
    pub(crate) fn fill_pattern(&self, len: usize, seed: u8) -> Result {
        let to = self.range(0, len)?;
        for i in 0..len {
            // SAFETY: `i < len`, inside the allocation (checked by `range`); a volatile
            // write, as every access to the buffer (type invariant).
            unsafe { to.add(i).write_volatile(seed.wrapping_add(i as u8)) };
        }
        self.sync_range_for_device(0, len);
        Ok(())
    }

    /// Takes `out.len()` bytes at `offset` back from the device and copies them out.
    #[inline]
    pub(crate) fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result {
        let from = self.range(offset, out.len())?;
        self.sync_range_for_cpu(offset, out.len());
        // SAFETY: the range lies inside the allocation (checked by `range`); the target
        // is a Rust slice, so not in the buffer (no reference points into it: type
        // invariant); other accesses to the range are volatile too, or the device's.
        unsafe { read_volatile_bytes(from, out) };
        Ok(())
    }

    /// Takes the 64 bytes at `offset` back from the device and reads them (as
    /// [`DmaBuf::copy_out`] does, syncing only that range): an NVMe command, read on every
    /// command. Read as eight words where they are 8-byte aligned, so that the compiler
    /// keeps them in registers, where the kernel's code for size calls `memcpy` for a
    /// 64-byte copy (about 70 instructions).
    pub(crate) fn read_64(&self, offset: usize) -> Result<[u8; 64]> {
        let from = self.range(offset, 64)?;
        self.sync_range_for_cpu(offset, 64);
        // SAFETY: the 64 bytes lie inside the allocation (checked by `range`), aligned for
        // the words where they are read as words; the target is a local array. Volatile
        // reads, as every access to the buffer (type invariant): a copy or a DMA into
        // the range meanwhile may tear the bytes, and every bit pattern is a valid
        // integer. The words' native bytes are the memory's bytes, in order.
        let out = unsafe {
            if from.cast::<u64>().is_aligned() {
                core::mem::transmute::<[u64; 8], [u8; 64]>(from.cast::<[u64; 8]>().read_volatile())
            } else {
                let mut out = [0u8; 64];
                read_volatile_bytes(from, &mut out);
                out
            }
        };
        Ok(out)
    }

    /// Takes the first `len` bytes of both buffers back from the device and compares them;
    /// returns the offset of the first difference.
    pub(crate) fn first_difference(&self, other: &DmaBuf, len: usize) -> Result<Option<usize>> {
        let (a, b) = (self.range(0, len)?, other.range(0, len)?);
        self.sync_range_for_cpu(0, len);
        other.sync_range_for_cpu(0, len);
        for i in 0..len {
            // SAFETY: `i < len`, inside both allocations (checked by `range`); volatile
            // reads, as every access to the buffers (type invariant).
            let (a, b) = unsafe { (a.add(i).read_volatile(), b.add(i).read_volatile()) };
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

    /// `dma_sync_single_range_for_{cpu,device}` of `len` bytes at `offset` (the C inline
    /// is this sync at `dma + offset`); nothing for an empty range or one past the end.
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
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped at creation on this device (type invariant). The last `DmaBuf`
        // is gone, so no work request can still use the mapping: requests posted through
        // the layer's `Qp` hold a clone in their record (and `rdma_rw` transfers in their
        // `BufSgl`) until they complete or the QP is gone, and the buffers of requests
        // bound with `BoundRequest` live in the QP's CM handler or the SRQ, which keep
        // them until the QP was drained or the SRQ destroyed (its invariant); an `Mr`
        // holds a clone of the buffer it maps until it maps another or is deregistered
        // (and for good once an invalidation failed), so no key a peer holds names it.
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

/// The end of `len` bytes at `offset` in `size` bytes: `EINVAL` past `size`.
pub(crate) fn range_end(offset: usize, len: usize, size: usize) -> Result<usize> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(end),
        _ => Err(EINVAL),
    }
}

/// The width of the volatile copies' accesses where the buffer is aligned for it.
const WORD: usize = core::mem::size_of::<u64>();

/// How many of `len` bytes at `at` come before its first `WORD` boundary (all if fewer).
fn unaligned_head(at: *const u8, len: usize) -> usize {
    (at.addr().wrapping_neg() % WORD).min(len)
}

/// Writes `src` into the `src.len()` bytes at `dst` by volatile stores: bytes up to the
/// first 8-byte boundary, then words, then bytes.
///
/// # Safety
///
/// `dst` is valid for writes of `src.len()` bytes, which no Rust reference points to and
/// which are accessed meanwhile only by volatile accesses (or a device's DMA).
pub(crate) unsafe fn write_volatile_bytes(dst: *mut u8, src: &[u8]) {
    let len = src.len();
    let head = unaligned_head(dst, len);
    let words_end = head + (len - head) / WORD * WORD;
    let src = src.as_ptr();
    // SAFETY: every index is below `len`, inside `src` and (by the caller) `dst`, which
    // do not overlap (no reference points to `dst`); the words' stores are at `WORD`
    // boundaries of `dst` (past its head), the source read unaligned.
    unsafe {
        for i in 0..head {
            dst.add(i).write_volatile(src.add(i).read());
        }
        for i in (head..words_end).step_by(WORD) {
            let word = src.add(i).cast::<u64>().read_unaligned();
            dst.add(i).cast::<u64>().write_volatile(word);
        }
        for i in words_end..len {
            dst.add(i).write_volatile(src.add(i).read());
        }
    }
}

/// Reads the `dst.len()` bytes at `src` into `dst` by volatile loads: bytes up to the
/// first 8-byte boundary, then words, then bytes.
///
/// # Safety
///
/// `src` is valid for reads of `dst.len()` bytes, which no Rust reference points to and
/// which are accessed meanwhile only by volatile accesses (or a device's DMA).
pub(crate) unsafe fn read_volatile_bytes(src: *const u8, dst: &mut [u8]) {
    let len = dst.len();
    let head = unaligned_head(src, len);
    let words_end = head + (len - head) / WORD * WORD;
    let dst = dst.as_mut_ptr();
    // SAFETY: as in `write_volatile_bytes`, the other way round: the loads are volatile,
    // the words' at `WORD` boundaries of `src`, the stores into `dst` unaligned.
    unsafe {
        for i in 0..head {
            dst.add(i).write(src.add(i).read_volatile());
        }
        for i in (head..words_end).step_by(WORD) {
            let word = src.add(i).cast::<u64>().read_volatile();
            dst.add(i).cast::<u64>().write_unaligned(word);
        }
        for i in words_end..len {
            dst.add(i).write(src.add(i).read_volatile());
        }
    }
}

/// Writes `byte` into the `len` bytes at `dst` by volatile stores, as
/// [`write_volatile_bytes`] does.
///
/// # Safety
///
/// As for [`write_volatile_bytes`], for `len` bytes.
pub(crate) unsafe fn fill_volatile_bytes(dst: *mut u8, len: usize, byte: u8) {
    let head = unaligned_head(dst, len);
    let words_end = head + (len - head) / WORD * WORD;
    let word = u64::from_ne_bytes([byte; WORD]);
    // SAFETY: every index is below `len`, inside `dst` (by the caller); the words' stores
    // are at `WORD` boundaries of `dst`.
    unsafe {
        for i in 0..head {
            dst.add(i).write_volatile(byte);
        }
        for i in (head..words_end).step_by(WORD) {
            dst.add(i).cast::<u64>().write_volatile(word);
        }
        for i in words_end..len {
            dst.add(i).write_volatile(byte);
        }
    }
}
