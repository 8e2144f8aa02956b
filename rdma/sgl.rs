// SPDX-License-Identifier: GPL-2.0

//! A scatterlist embedded in its owner, pointed at part of a [`DmaBuf`] page by page: how a
//! receive slot lends its in-capsule data to a request.
//!
//! C header: [`include/linux/scatterlist.h`].
//!
//! [`include/linux/scatterlist.h`]: srctree/include/linux/scatterlist.h

use super::{bindings, DmaBuf};
use kernel::{page::PAGE_SIZE, prelude::*, types::Opaque};

/// A scatterlist of at most `N` entries, one per page of the bytes it describes.
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
    pub(crate) unsafe fn fill(
        &self,
        buf: &DmaBuf,
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
        // SAFETY: the list is the caller's alone (function's safety section) and has room
        // for `count <= N` entries.
        unsafe { bindings::sg_init_table(sg, count as u32) };
        let mut left = len;
        for i in 0..count {
            let start = if i == 0 { page_offset } else { 0 };
            let chunk = left.min(PAGE_SIZE - start);
            let cpu = buf.cpu_ptr((first_page + i) * PAGE_SIZE + start)?;
            // SAFETY: entry `i < count` of the list, as above; `cpu` and the `chunk` bytes
            // after it lie in `buf` (checked: `end <= buf.len()`) and in one page.
            unsafe { bindings::rdma_rs_sg_set_buf(sg.add(i), cpu.cast(), chunk as u32) };
            left -= chunk;
        }
        Ok((sg, count as u32))
    }
}
