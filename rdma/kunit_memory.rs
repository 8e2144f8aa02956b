// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the RDMA layer's memory logic that needs no device: values published
//! once ([`crate::rdma::PublishOnce`]), page lists pointed again without being
//! initialised again ([`crate::rdma::sgl::PageSgl`]), the data path's QP gate
//! ([`crate::rdma::kernel_gaps::percpu_gate::PercpuGate`]), an MR's state machine
//! ([`crate::rdma::mr::MrState`]: one `map` at a time, none while a key works) and the
//! volatile copies of [`crate::rdma::DmaBuf`] (at any alignment, refused past the end).
//!
//! Compiled into `nvmet_rdma_rs` only, as `kunit.rs` is (see there).

// Part of the binding layer (it calls the layer's `unsafe` copy helpers).
#![allow(unsafe_code)]

use kernel::prelude::kunit_tests;

#[kunit_tests(rdma_rs_publish_once)]
mod publish_once {
    use crate::rdma::PublishOnce;
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

    /// A value that counts its drops.
    struct Counted<'a>(u32, &'a AtomicU32);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn published_once() {
        let drops = AtomicU32::new(0);
        let cell = PublishOnce::new();
        assert!(cell.as_ref().is_none());
        assert!(cell.populate(Counted(1, &drops)));
        // The first value stays; a second one is refused, and dropped.
        assert!(!cell.populate(Counted(2, &drops)));
        assert_eq!(drops.load(Relaxed), 1);
        assert_eq!(cell.as_ref().map(|v| v.0), Some(1));
        // Dropping the cell drops the value it holds.
        drop(cell);
        assert_eq!(drops.load(Relaxed), 2);
    }
}

#[kunit_tests(rdma_rs_percpu_gate)]
mod percpu_gate {
    use crate::rdma::kernel_gaps::percpu_gate::PercpuGate;
    use kernel::prelude::*;

    #[test]
    fn passes_until_closed() -> Result {
        let gate = KBox::pin_init(PercpuGate::new(), GFP_KERNEL)?;
        // Open: passes nest, each counted on this CPU.
        let first = gate.enter().expect("an open gate lets a user in");
        let second = gate.enter().expect("passes nest");
        drop(first);
        drop(second);
        // Closed (with no pass left, the close returns once the RCU grace period that
        // switches the count to one atomic is over): nobody enters any more.
        gate.close();
        assert!(gate.enter().is_none());
        // A second close waits as the first did: it returns at once.
        gate.close();
        assert!(gate.enter().is_none());
        Ok(())
    }

    #[test]
    fn dropped_open() -> Result {
        // A gate never closed ends with its passes given back (no release runs).
        let gate = KBox::pin_init(PercpuGate::new(), GFP_KERNEL)?;
        drop(gate.enter());
        drop(gate);
        Ok(())
    }
}

#[kunit_tests(rdma_rs_page_sgl)]
mod page_sgl {
    use crate::rdma::{
        bindings,
        sgl::{PageMemory, PageSgl},
    };
    use kernel::{page::PAGE_SIZE, prelude::*};

    /// Four pages of kmalloc'd memory (16 KiB: kmalloc aligns power-of-two sizes
    /// naturally, so it starts on a page).
    struct Pages(KVec<u8>);

    // SAFETY: a `KVec`'s buffer is one kmalloc'd allocation of (at least) its length,
    // never grown here, held while the vector lives.
    unsafe impl PageMemory for Pages {
        fn len(&self) -> usize {
            self.0.len()
        }

        fn cpu_ptr(&self, offset: usize) -> Result<*mut u8> {
            if offset >= self.0.len() {
                return Err(EINVAL);
            }
            Ok(self.0.as_ptr().wrapping_add(offset).cast_mut())
        }
    }

    fn pages() -> Result<Pages> {
        Ok(Pages(KVec::from_elem(0u8, 4 * PAGE_SIZE, GFP_KERNEL)?))
    }

    /// An entry as walked: its page's index in `Pages` (`None` for another page), its
    /// offset in the page and its length.
    type Entry = (Option<usize>, u32, u32);

    /// `SG_END` of `include/linux/scatterlist.h`: the entry is the list's last.
    const SG_END: usize = 0x2;

    /// Points `sgl` at `len` bytes at `offset` of `pages`, then walks the list as
    /// `sg_next` does (entry after entry until one is marked last, at most `N`): the
    /// count `fill` returned, and each entry walked.
    fn walk<const N: usize>(
        sgl: &PageSgl<N>,
        pages: &Pages,
        offset: usize,
        len: usize,
    ) -> Result<(u32, KVec<Entry>)> {
        let mut walked = KVec::new();
        // SAFETY: the list is this test's alone; `fill` wrote its first `count <= N`
        // entries, and the walk reads at most the `N` entries of the list. `scratch` is
        // a copy of an entry in this frame, pointed at bytes of `pages` (kmalloc'd) only
        // to learn their page.
        unsafe {
            let (sg, count) = sgl.fill(pages, offset, len)?;
            for i in 0..N {
                let entry = &*sg.add(i);
                let mut scratch = *entry;
                let page = (0..4).find(|&k| {
                    let byte = pages.0.as_ptr().wrapping_add(k * PAGE_SIZE);
                    bindings::rdma_rs_sg_set_buf(&mut scratch, byte.cast(), 1, true);
                    scratch.page_link & !0x3 == entry.page_link & !0x3
                });
                walked.push((page, entry.offset, entry.length), GFP_KERNEL)?;
                if entry.page_link & SG_END != 0 {
                    break;
                }
            }
            Ok((count, walked))
        }
    }

    #[test]
    fn pointed_and_marked_on_reuse() -> Result {
        let pages = pages()?;
        let sgl = PageSgl::<4>::new();
        let page = PAGE_SIZE as u32;
        // Three pages, then one: the first entry is the last now.
        let (count, walked) = walk(&sgl, &pages, 0, 2 * PAGE_SIZE + 100)?;
        assert_eq!(count, 3);
        assert_eq!(
            &walked[..],
            &[(Some(0), 0, page), (Some(1), 0, page), (Some(2), 0, 100)]
        );
        let (count, walked) = walk(&sgl, &pages, 0, 512)?;
        assert_eq!(count, 1);
        assert_eq!(&walked[..], &[(Some(0), 0, 512)]);
        // A start inside a page, across the next: two entries, the mark moved on.
        let (count, walked) = walk(&sgl, &pages, PAGE_SIZE + 100, PAGE_SIZE)?;
        assert_eq!(count, 2);
        assert_eq!(
            &walked[..],
            &[(Some(1), 100, page - 100), (Some(2), 0, 100)]
        );
        // All four pages: no entry left marked from before.
        let (count, walked) = walk(&sgl, &pages, 0, 4 * PAGE_SIZE)?;
        assert_eq!(count, 4);
        assert_eq!(walked.len(), 4);
        assert_eq!(walked[3], (Some(3), 0, page));
        Ok(())
    }

    #[test]
    fn refused() -> Result {
        let pages = pages()?;
        let sgl = PageSgl::<2>::new();
        assert!(walk(&sgl, &pages, 0, 0).is_err());
        assert!(walk(&sgl, &pages, 3 * PAGE_SIZE, PAGE_SIZE + 1).is_err());
        // More pages than the list has entries.
        assert!(walk(&sgl, &pages, 0, 2 * PAGE_SIZE + 1).is_err());
        // Memory that does not start on a page.
        let unaligned = Pages(KVec::from_elem(0u8, 64, GFP_KERNEL)?);
        if unaligned.0.as_ptr().addr() % PAGE_SIZE != 0 {
            assert!(walk(&sgl, &unaligned, 0, 16).is_err());
        }
        // Still usable after the refusals.
        assert_eq!(walk(&sgl, &pages, 0, 16)?.0, 1);
        Ok(())
    }
}

#[kunit_tests(rdma_rs_mr_state)]
mod mr_state {
    use crate::rdma::mr::MrState;
    use kernel::prelude::*;

    /// A state mapped and registered: its key works.
    fn registered() -> MrState {
        let state = MrState::new();
        assert_eq!(state.start_map(), Ok(()));
        state.end_map(true);
        assert_eq!(state.begin_registration(), Ok(()));
        state.registered(true);
        assert!(state.is_valid());
        state
    }

    #[test]
    fn second_map_refused() {
        let state = MrState::new();
        assert_eq!(state.start_map(), Ok(()));
        // Another map, or a registration, while the first map runs.
        assert_eq!(state.start_map(), Err(EBUSY));
        assert_eq!(state.begin_registration(), Err(EBUSY));
        state.end_map(true);
        // Mapped, not registered: may be mapped again.
        assert_eq!(state.start_map(), Ok(()));
        state.end_map(true);
        assert_eq!(state.begin_registration(), Ok(()));
        // A registration posted, then in place: no map.
        assert_eq!(state.start_map(), Err(EBUSY));
        state.registered(true);
        assert_eq!(state.start_map(), Err(EBUSY));
        assert_eq!(state.begin_registration(), Err(EBUSY));
        assert_eq!(state.begin_invalidation(), Ok(()));
        assert_eq!(state.start_map(), Err(EBUSY));
        state.invalidated(true);
        assert!(!state.is_valid());
        assert_eq!(state.start_map(), Ok(()));
    }

    #[test]
    fn invalidation_not_posted_keeps_the_key() {
        let state = registered();
        assert_eq!(state.begin_invalidation(), Ok(()));
        // The provider refused the LOCAL_INV (or its record could not be made): the key
        // still works, and may be invalidated again later.
        state.invalidation_not_posted();
        assert!(state.is_valid());
        assert_eq!(state.start_map(), Err(EBUSY));
        assert_eq!(state.begin_invalidation(), Ok(()));
        state.invalidated(true);
        assert_eq!(state.start_map(), Ok(()));
    }

    #[test]
    fn registration_needs_a_map() {
        let state = MrState::new();
        assert_eq!(state.begin_registration(), Err(EBUSY));
        // A failed map maps nothing.
        assert_eq!(state.start_map(), Ok(()));
        state.end_map(false);
        assert_eq!(state.begin_registration(), Err(EBUSY));
        // A failed registration: a new map before the next one.
        assert_eq!(state.start_map(), Ok(()));
        state.end_map(true);
        assert_eq!(state.begin_registration(), Ok(()));
        state.registered(false);
        assert!(!state.is_valid());
        assert_eq!(state.begin_registration(), Err(EBUSY));
        assert_eq!(state.start_map(), Ok(()));
        // Invalidated: a new map too.
        state.end_map(true);
        assert_eq!(state.begin_registration(), Ok(()));
        state.registered(true);
        assert_eq!(state.begin_invalidation(), Ok(()));
        state.invalidated(true);
        assert_eq!(state.begin_registration(), Err(EBUSY));
    }

    #[test]
    fn failed_invalidation_sticks() {
        let state = registered();
        assert_eq!(state.begin_invalidation(), Ok(()));
        state.invalidated(false);
        assert!(!state.is_valid());
        assert_eq!(state.start_map(), Err(EBUSY));
        assert_eq!(state.begin_registration(), Err(EBUSY));
        assert_eq!(state.begin_invalidation(), Err(EBUSY));
        assert_eq!(state.invalidated_remotely(|| true), Err(EINVAL));
    }

    #[test]
    fn remote_invalidation() {
        let state = MrState::new();
        assert_eq!(state.invalidated_remotely(|| true), Err(EINVAL));
        let state = registered();
        // A report of another key (or QP) changes nothing.
        assert_eq!(state.invalidated_remotely(|| false), Err(EINVAL));
        assert!(state.is_valid());
        assert_eq!(state.invalidated_remotely(|| true), Ok(()));
        assert!(!state.is_valid());
        assert_eq!(state.invalidated_remotely(|| true), Err(EINVAL));
        assert_eq!(state.start_map(), Ok(()));
    }

    #[test]
    fn remote_invalidation_of_a_registration_gone() {
        let state = registered();
        // While the report is checked, the registration it was of goes, and the MR is
        // mapped and registered again: the report does not end the new registration.
        let result = state.invalidated_remotely(|| {
            assert_eq!(state.begin_invalidation(), Ok(()));
            state.invalidated(true);
            assert_eq!(state.start_map(), Ok(()));
            state.end_map(true);
            assert_eq!(state.begin_registration(), Ok(()));
            state.registered(true);
            true
        });
        assert_eq!(result, Err(EINVAL));
        assert!(state.is_valid());
    }
}

#[kunit_tests(rdma_rs_dma_copy)]
mod dma_copy {
    use crate::rdma::dma::{
        fill_volatile_bytes, range_end, read_volatile_bytes, write_volatile_bytes,
    };
    use kernel::prelude::*;

    /// Bytes `0, 1, 2, ...`: misplaced bytes show.
    fn pattern() -> [u8; 40] {
        core::array::from_fn(|i| i as u8)
    }

    #[test]
    fn copies_at_any_alignment() -> Result {
        // 64 bytes of kmalloc'd memory (aligned for words): the copies go to every
        // start of its first word, with heads, words and tails of every length.
        let mut memory = KVec::from_elem(0xffu8, 64, GFP_KERNEL)?;
        let base = memory.as_mut_ptr();
        let source = pattern();
        for start in 0..8 {
            for len in 0..=source.len() {
                let mut back = [0u8; 40];
                // SAFETY: `start + len <= 48` bytes of the 64 of `memory`, which no
                // reference points to while the copies run (`base` is used alone).
                unsafe {
                    fill_volatile_bytes(base, 64, 0xff);
                    write_volatile_bytes(base.add(start), &source[..len]);
                    read_volatile_bytes(base.add(start), &mut back[..len]);
                }
                assert_eq!(&back[..len], &source[..len]);
                // Nothing written around the range.
                assert!(memory[..start].iter().all(|&b| b == 0xff));
                assert!(memory[start + len..].iter().all(|&b| b == 0xff));
                // SAFETY: as above.
                unsafe { fill_volatile_bytes(base.add(start), len, 0x5a) };
                assert!(memory[..start].iter().all(|&b| b == 0xff));
                assert!(memory[start..start + len].iter().all(|&b| b == 0x5a));
                assert!(memory[start + len..].iter().all(|&b| b == 0xff));
            }
        }
        Ok(())
    }

    #[test]
    fn refused_past_the_end() {
        assert_eq!(range_end(0, 64, 64), Ok(64));
        assert_eq!(range_end(48, 16, 64), Ok(64));
        assert_eq!(range_end(64, 0, 64), Ok(64));
        assert_eq!(range_end(49, 16, 64), Err(EINVAL));
        assert_eq!(range_end(65, 0, 64), Err(EINVAL));
        assert_eq!(range_end(usize::MAX, 1, usize::MAX), Err(EINVAL));
    }
}
