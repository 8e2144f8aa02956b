// SPDX-License-Identifier: GPL-2.0

//! Scatterlists over [`DmaBuf`]s: one embedded in its owner, pointed at part of a buffer
//! page by page (how a receive slot lends its in-capsule data to a request), and a
//! one-entry list that holds its buffer (what an `rdma_rw` transfer of it maps).
//!
//! C header: [`include/linux/scatterlist.h`].
//!
//! [`include/linux/scatterlist.h`]: srctree/include/linux/scatterlist.h

use super::{bindings, rw::SgLists, DmaBuf};
use kernel::{page::PAGE_SIZE, prelude::*, types::Opaque};

/// Memory a scatterlist may describe page by page: its bytes `0..len()` lie in the
/// kernel's direct map (kmalloc'd: `virt_to_page` finds their pages), at `cpu_ptr`.
///
/// # Safety
///
/// `cpu_ptr(offset)` is the address of byte `offset` of such memory for every
/// `offset < len()`, allocated while the value lives.
pub(crate) unsafe trait PageMemory {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// The address of byte `offset`; `EINVAL` past the end.
    fn cpu_ptr(&self, offset: usize) -> Result<*mut u8>;
}

// SAFETY: a `DmaBuf`'s memory is one kmalloc'd allocation of `len()` bytes (its type
// invariant), at `cpu_ptr`, held while the buffer lives.
unsafe impl PageMemory for DmaBuf {
    fn len(&self) -> usize {
        DmaBuf::len(self)
    }

    fn cpu_ptr(&self, offset: usize) -> Result<*mut u8> {
        DmaBuf::cpu_ptr(self, offset)
    }
}

/// A scatterlist of at most `N` entries, one per page of the bytes it describes.
///
/// # Invariants
///
/// No entry is a chain link: each is zeroed or was pointed at a page by `fill`, so that
/// `fill` may point and mark entries without initialising the table again.
#[repr(transparent)]
pub(crate) struct PageSgl<const N: usize>(Opaque<[bindings::scatterlist; N]>);

// SAFETY: the list is plain memory, changed only through `fill`, whose caller has it to
// itself; the device and the requests it is lent to read it from any CPU.
unsafe impl<const N: usize> Send for PageSgl<N> {}
// SAFETY: as above.
unsafe impl<const N: usize> Sync for PageSgl<N> {}

impl<const N: usize> PageSgl<N> {
    /// A list describing nothing.
    pub(crate) fn new() -> Self {
        // INVARIANT: zeroed entries.
        Self(Opaque::zeroed())
    }

    /// Points the list at `len` bytes at `offset` of `buf` (page-aligned), one entry per
    /// page they touch, and returns it with its number of entries. `EINVAL` for nothing
    /// (`len` 0), past the end of `buf`, for more than `N` pages, or if `buf` does not
    /// start on a page.
    ///
    /// # Safety
    ///
    /// Nobody else uses the list (a request it was lent to has ended) until the caller is
    /// done with the result.
    pub(crate) unsafe fn fill<M: PageMemory + ?Sized>(
        &self,
        buf: &M,
        offset: usize,
        len: usize,
    ) -> Result<(*mut bindings::scatterlist, u32)> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > buf.len() {
            return Err(EINVAL);
        }
        let (first_page, page_offset) = (offset / PAGE_SIZE, offset % PAGE_SIZE);
        let count = (page_offset + len).div_ceil(PAGE_SIZE);
        if count > N {
            return Err(EINVAL);
        }
        if buf.cpu_ptr(0)?.addr() % PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let sg = self.0.get().cast::<bindings::scatterlist>();
        // No `sg_init_table` per use (no entry is a chain link: type invariant). Each of the
        // first `count` entries is pointed and marked last or not; those after the new
        // last one are never walked.
        // INVARIANT: entries pointed at pages, none a chain link.
        let mut left = len;
        for i in 0..count {
            let start = if i == 0 { page_offset } else { 0 };
            let chunk = left.min(PAGE_SIZE - start);
            let cpu = buf.cpu_ptr((first_page + i) * PAGE_SIZE + start)?;
            // SAFETY: the list is the caller's alone (function's safety section) and entry
            // `i < count <= N` is in it; `cpu` and the `chunk` bytes after it lie in `buf`
            // (checked: `end <= buf.len()`), direct-mapped memory (`PageMemory`), and in
            // one page.
            unsafe {
                bindings::rdma_rs_sg_set_buf(sg.add(i), cpu.cast(), chunk as u32, i + 1 == count)
            };
            left -= chunk;
        }
        Ok((sg, count as u32))
    }
}

/// A one-entry scatterlist over `len` bytes of a [`DmaBuf`] (kmalloc'd, so physically
/// contiguous), holding the buffer: what an `rdma_rw` transfer of the demo pair's
/// buffers maps (see `Qp::post_send`).
///
/// # Invariants
///
/// `sg` is an initialised one-entry list over `len` bytes at `offset` of `buf`, within it,
/// unchanged while the value lives.
pub(crate) struct BufSgl {
    sg: KBox<Opaque<bindings::scatterlist>>,
    buf: DmaBuf,
    offset: usize,
    len: u32,
}

impl BufSgl {
    /// The list over `len` bytes at `offset` of `buf`; `EINVAL` for nothing or past the
    /// end of the buffer.
    pub(crate) fn new(buf: &DmaBuf, offset: usize, len: u32) -> Result<Self> {
        let end = offset.checked_add(len as usize).ok_or(EINVAL)?;
        if len == 0 || end > buf.len() {
            return Err(EINVAL);
        }
        let cpu = buf.cpu_ptr(offset)?;
        let sg = KBox::new(Opaque::<bindings::scatterlist>::zeroed(), GFP_KERNEL)?;
        // SAFETY: the entry is ours, in its box; `cpu` and the `len` bytes after it lie in
        // `buf`'s kmalloc'd memory (checked above), which `sg_set_buf` may describe by page
        // and offset even across pages (one contiguous allocation).
        unsafe {
            bindings::sg_init_table(sg.get(), 1);
            bindings::rdma_rs_sg_set_buf(sg.get(), cpu.cast(), len, true);
        }
        // INVARIANT: initialised over the checked range; `buf` is held with it.
        Ok(Self {
            sg,
            buf: buf.clone(),
            offset,
            len,
        })
    }
}

impl BufSgl {
    /// After a transfer through the list's own mapping (`rdma_rw` maps it apart from the
    /// buffer's): hands the bytes the device may have written to the buffer's mapping too,
    /// so that a later sync of it for the CPU (a bounce-buffered mapping copies) does not
    /// bring back what it held before.
    pub(crate) fn transferred(&self) {
        self.buf
            .sync_range_for_device(self.offset, self.len as usize);
    }
}

// SAFETY: the list is plain memory, written once at creation; the buffer it describes is
// reference-counted memory that any CPU may hand to the device.
unsafe impl Send for BufSgl {}

// SAFETY: the list is valid and unchanged while the value lives, boxed so that it does
// not move with it, and describes memory `buf` keeps allocated (type invariant).
unsafe impl SgLists for BufSgl {
    fn data(&self) -> (*mut bindings::scatterlist, u32) {
        (self.sg.get(), 1)
    }

    fn metadata(&self) -> (*mut bindings::scatterlist, u32) {
        (core::ptr::null_mut(), 0)
    }
}
