// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the RDMA layer's logic that needs no device: socket addresses (parsed,
//! printed, classified), completion dispatch (an `ib_cqe`'s `done` reaching the handler
//! of the object that embeds it, with what the work completion reports) and slot
//! hand-offs (one owner at a time, resumed only by the event it was handed off to),
//! receive tokens ([`crate::rdma::cqe::RecvState`]: one per receive, minted by its
//! completion and not by a duplicate, refused for another receive's post), values
//! published once ([`crate::rdma::PublishOnce`]), page lists pointed again
//! without being initialised again ([`crate::rdma::sgl::PageSgl`]), an MR's state
//! machine ([`crate::rdma::mr::MrState`]: one `map` at a time, none while a key works)
//! and the volatile copies of [`crate::rdma::DmaBuf`] (at any alignment, refused past
//! the end).
//!
//! The layer is compiled into each module of the project; its suites are compiled into
//! `nvmet_rdma_rs` only (`#[path]`-included from its crate root), so that each runs once
//! per load. They run when the module loads on a kernel with `CONFIG_KUNIT=y` (the test
//! kernel) and report in KTAP on the console; without KUnit they are not compiled.

// Part of the binding layer (it drives a completion entry as the RDMA core does).
#![allow(unsafe_code)]

use kernel::prelude::kunit_tests;

#[kunit_tests(rdma_rs_socket_addr)]
mod socket_addr {
    use crate::rdma::SocketAddr;

    /// Text written through `core::fmt`, up to 64 bytes.
    struct Text {
        buf: [u8; 64],
        len: usize,
    }

    impl core::fmt::Write for Text {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let end = self.len + s.len();
            let room = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
            room.copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    /// `addr` printed with `Display` (`%pISpc`).
    fn shown(addr: &SocketAddr) -> Text {
        let mut text = Text {
            buf: [0; 64],
            len: 0,
        };
        let _ = core::fmt::write(&mut text, format_args!("{addr}"));
        text
    }

    impl core::ops::Deref for Text {
        type Target = [u8];

        fn deref(&self) -> &[u8] {
            &self.buf[..self.len]
        }
    }

    /// What `write_ip` writes into a buffer of `N` bytes, without the NUL.
    fn ip<const N: usize>(addr: &SocketAddr) -> ([u8; N], usize) {
        let mut out = [0u8; N];
        let n = addr.write_ip(&mut out);
        (out, n)
    }

    #[test]
    fn ipv4() {
        let addr = SocketAddr::parse(b"10.77.0.1", 4420).unwrap();
        assert_eq!(addr.port(), 4420);
        assert!(!addr.is_any());
        assert_eq!(&*shown(&addr), b"10.77.0.1:4420");
        let (out, n) = ip::<46>(&addr);
        assert_eq!(&out[..n], b"10.77.0.1");
        assert_eq!(out[n], 0);
    }

    #[test]
    fn ipv6() {
        let addr = SocketAddr::parse(b"fd00::1", 7174).unwrap();
        assert_eq!(addr.port(), 7174);
        assert!(!addr.is_any());
        assert_eq!(&*shown(&addr), b"[fd00::1]:7174");
        let (out, n) = ip::<46>(&addr);
        assert_eq!(&out[..n], b"fd00::1");
    }

    #[test]
    fn wildcards() {
        let empty = SocketAddr::parse(b"", 4420).unwrap();
        assert!(empty.is_any());
        assert_eq!(&*shown(&empty), b"0.0.0.0:4420");
        assert!(SocketAddr::parse(b"0.0.0.0", 1).unwrap().is_any());
        assert!(SocketAddr::parse(b"::", 1).unwrap().is_any());
        assert!(!SocketAddr::parse(b"::1", 1).unwrap().is_any());
    }

    #[test]
    fn refused() {
        for text in [
            &b"10.0.0.256"[..],
            b"1.2.3",
            b"host.example",
            b"fd00::1::2",
            b"10.0.0.1:4420",
        ] {
            assert!(SocketAddr::parse(text, 4420).is_err());
        }
    }

    #[test]
    fn truncated_ip() {
        let addr = SocketAddr::parse(b"10.77.0.1", 1).unwrap();
        // Truncated to fit, NUL included.
        let (out, n) = ip::<4>(&addr);
        assert_eq!(n, 3);
        assert_eq!(&out[..], b"10.\0");
        let (_, n) = ip::<0>(&addr);
        assert_eq!(n, 0);
    }
}

#[kunit_tests(rdma_rs_completion_dispatch)]
mod completion_dispatch {
    use crate::rdma::bindings::{
        ib_cqe, ib_wc, ib_wc_flags_IB_WC_WITH_INVALIDATE as WITH_INVALIDATE,
        ib_wc_opcode_IB_WC_RECV as RECV, ib_wc_status_IB_WC_SUCCESS as SUCCESS,
        ib_wc_status_IB_WC_WR_FLUSH_ERR as FLUSHED,
    };
    use crate::rdma::{
        cqe::{impl_has_cqe, impl_has_slot, placed_slot, HasCqe, HasSlot},
        slot::Slot,
        Cqe, CqeHandler, WorkCompletion,
    };
    use core::{
        mem::offset_of,
        ptr,
        sync::atomic::{AtomicU32, Ordering::Relaxed},
    };
    use kernel::error::code::EINVAL;

    /// An object with two completion entries, counting what each handler saw.
    struct Probe {
        _before: u64,
        first: Cqe<Probe>,
        second: Cqe<Probe, 7>,
        first_runs: AtomicU32,
        second_runs: AtomicU32,
        /// The last handler's `byte_len`, and `invalidated_rkey` (or `u32::MAX`).
        byte_len: AtomicU32,
        rkey: AtomicU32,
        /// The last handler's status.
        status: AtomicU32,
    }

    impl_has_cqe!(Probe, first);
    impl_has_cqe!(Probe, second, 7);

    impl Probe {
        fn seen(&self, wc: &WorkCompletion) {
            self.byte_len.store(wc.byte_len, Relaxed);
            self.rkey
                .store(wc.invalidated_rkey.unwrap_or(u32::MAX), Relaxed);
            self.status.store(wc.status, Relaxed);
        }
    }

    impl CqeHandler for Probe {
        fn done(&self, wc: &WorkCompletion) {
            self.first_runs.fetch_add(1, Relaxed);
            self.seen(wc);
        }
    }

    impl CqeHandler<7> for Probe {
        fn done(&self, wc: &WorkCompletion) {
            self.second_runs.fetch_add(1, Relaxed);
            self.seen(wc);
        }
    }

    fn probe() -> Probe {
        Probe {
            _before: 0,
            first: Cqe::new(),
            second: Cqe::new(),
            first_runs: AtomicU32::new(0),
            second_runs: AtomicU32::new(0),
            byte_len: AtomicU32::new(0),
            rkey: AtomicU32::new(0),
            status: AtomicU32::new(0),
        }
    }

    /// Completes a work request that carried `cqe`, as the RDMA core does: through the
    /// entry's `done`, with a completion of `status`, `byte_len` and `invalidated` rkey.
    fn complete(cqe: *mut ib_cqe, status: u32, byte_len: u32, invalidated: Option<u32>) {
        let mut wc: ib_wc = pin_init::zeroed();
        wc.__bindgen_anon_1.wr_cqe = cqe;
        wc.status = status;
        wc.opcode = RECV;
        wc.byte_len = byte_len;
        if let Some(rkey) = invalidated {
            wc.wc_flags = WITH_INVALIDATE as i32;
            wc.ex.invalidate_rkey = rkey;
        }
        // SAFETY: `cqe` is the entry of a live `Probe` on the caller's stack, and `wc` a
        // valid completion for the call, as the core passes them.
        unsafe {
            let done = (*cqe).done.unwrap();
            done(core::ptr::null_mut(), &mut wc);
        }
    }

    #[test]
    fn each_entry_reaches_its_handler() {
        let p = probe();
        complete(p.first.as_raw(), SUCCESS, 512, None);
        assert_eq!(p.first_runs.load(Relaxed), 1);
        assert_eq!(p.second_runs.load(Relaxed), 0);
        assert_eq!(p.byte_len.load(Relaxed), 512);
        complete(p.second.as_raw(), SUCCESS, 64, None);
        complete(p.second.as_raw(), SUCCESS, 65, None);
        assert_eq!(p.first_runs.load(Relaxed), 1);
        assert_eq!(p.second_runs.load(Relaxed), 2);
        assert_eq!(p.byte_len.load(Relaxed), 65);
    }

    /// An object whose safe `HasCqe` and `HasSlot` implementations (written by hand, not
    /// with the macros) name one field and return another.
    struct Misplaced {
        declared: Cqe<Misplaced, 3>,
        returned: Cqe<Misplaced, 3>,
        slot: Slot<u32>,
        other_slot: Slot<u32>,
    }

    impl HasCqe<3> for Misplaced {
        const OFFSET: usize = offset_of!(Misplaced, declared);

        fn entry(&self) -> &Cqe<Misplaced, 3> {
            &self.returned
        }
    }

    impl CqeHandler<3> for Misplaced {
        fn done(&self, _wc: &WorkCompletion) {}
    }

    impl HasSlot for Misplaced {
        type State = u32;
        const SLOT_OFFSET: usize = offset_of!(Misplaced, slot);

        #[allow(clippy::misnamed_getters)] // (the misuse under test)
        fn slot(&self) -> &Slot<u32> {
            &self.other_slot
        }
    }

    /// An object declared with the macros.
    struct Placed {
        _before: u64,
        slot: Slot<u32>,
    }

    impl_has_slot!(Placed, slot: u32);

    #[test]
    fn only_entries_and_slots_where_declared() {
        // Declared with the macros: found where the trampolines look.
        let p = probe();
        assert!(Cqe::<Probe, 7>::placed(&p).is_ok_and(|entry| ptr::eq(entry, &p.second)));
        let placed = Placed {
            _before: 0,
            slot: Slot::new(0),
        };
        assert!(placed_slot(&placed).is_some_and(|slot| ptr::eq(slot, &placed.slot)));
        // Elsewhere than declared: no request is bound to the entry, no slot resumed.
        let misplaced = Misplaced {
            declared: Cqe::new(),
            returned: Cqe::new(),
            slot: Slot::new(0),
            other_slot: Slot::new(0),
        };
        assert_eq!(Cqe::<Misplaced, 3>::placed(&misplaced).err(), Some(EINVAL));
        assert!(placed_slot(&misplaced).is_none());
    }

    #[test]
    fn what_the_completion_reports() {
        let p = probe();
        complete(p.first.as_raw(), SUCCESS, 16, Some(0x1234));
        assert_eq!(p.rkey.load(Relaxed), 0x1234);
        assert_eq!(p.status.load(Relaxed), SUCCESS);
        // A failed completion reports no length and no invalidation, whatever the fields
        // hold (they are valid on success only).
        complete(p.second.as_raw(), FLUSHED, 4096, Some(0x1234));
        assert_eq!(p.status.load(Relaxed), FLUSHED);
        assert_eq!(p.byte_len.load(Relaxed), 0);
        assert_eq!(p.rkey.load(Relaxed), u32::MAX);
    }
}

#[kunit_tests(rdma_rs_slot_handoff)]
mod slot_handoff {
    use crate::rdma::slot::{Ended, Slot};

    #[test]
    fn one_owner_at_a_time() {
        let slot = Slot::new(0u32);
        let mut owner = slot.claim().expect("a new slot is free");
        *owner = 7;
        // While owned: neither claimed again nor resumed.
        assert!(slot.claim().is_none());
        assert!(slot.resume_local(0).is_none());
        drop(owner);
        // Free again, with what the last owner wrote.
        let owner = slot.claim().expect("a dropped owner frees the slot");
        assert_eq!(*owner, 7);
    }

    #[test]
    fn resumed_only_by_its_event() {
        let slot = Slot::new(0u32);
        let mut owner = slot.claim().unwrap();
        *owner = 1;
        owner.hand_off(3);
        assert!(slot.is_parked(3));
        // Handed off: not free, and not for another event.
        assert!(slot.claim().is_none());
        assert!(slot.resume_local(2).is_none());
        let mut owner = slot.resume_local(3).expect("the awaited event resumes it");
        assert_eq!(*owner, 1);
        *owner = 2;
        // A second completion of the same event finds nothing to resume.
        assert!(slot.resume_local(3).is_none());
        owner.hand_off(3);
        let owner = slot.resume_local(3).unwrap();
        assert_eq!(*owner, 2);
        drop(owner);
        assert!(slot.resume_local(3).is_none());
        assert!(slot.claim().is_some());
    }

    #[test]
    fn event_resumes_once_and_lists_cannot() {
        let slot = Slot::new(0u32);
        let owner = slot.claim().unwrap();
        // SAFETY: the test is event 5 of its slot, and resumes it.
        unsafe { owner.hand_off_to_event(5) };
        // A user's list with the same number is another tag: it resumes nothing.
        assert!(slot.resume_local(5).is_none());
        // SAFETY: the test is event 5 (the completion that gives the slot back).
        let owner = unsafe { slot.resume(5) }.expect("its event resumes it");
        drop(owner);
        // A completion for a slot resumed already (a provider's duplicate) finds nothing:
        // the trampoline passes `None`, which the transport counts and ignores.
        // SAFETY: as above.
        assert!(unsafe { slot.resume(5) }.is_none());
        // A parked slot is not resumed by an event of the same number either.
        let owner = slot.claim().unwrap();
        owner.hand_off(5);
        // SAFETY: as above (nothing handed the slot to event 5: it finds nothing).
        assert!(unsafe { slot.resume(5) }.is_none());
        assert!(slot.resume_local(5).is_some());
    }

    #[test]
    fn taken_after_its_resumer_ended() {
        // (Resumers 7 and 8 stand for two QPs: only the test's code resumes the slot.)
        let slot = Slot::new(5u32);
        // SAFETY: nothing resumes the test's slot but the test.
        let (seven, eight) = unsafe { (Ended::new(7).unwrap(), Ended::new(8).unwrap()) };
        let owner = slot.claim().unwrap();
        // An owner exists: not taken from it.
        assert!(slot.take_after(&seven).is_none());
        // SAFETY: only resumer 7 (the test) resumes it with tag 9.
        unsafe { owner.hand_off_to(9, 7) };
        // Handed off to another resumer: not taken when this one ends.
        assert!(slot.take_after(&eight).is_none());
        // Handed off to a resumer that is over: taken, with its value.
        let owner = slot.take_after(&seven).expect("a handed-off slot is taken");
        assert_eq!(*owner, 5);
        assert!(slot.resume_local(9).is_none());
        // A plain hand-off (a list) is never taken by an end.
        owner.hand_off(9);
        assert!(slot.take_after(&seven).is_none());
        assert!(slot.resume_local(9).is_some());
        // Free: nothing to take.
        assert!(slot.take_after(&seven).is_none());
        // There is no end of nothing.
        // SAFETY: as above.
        assert!(unsafe { Ended::new(0) }.is_none());
    }
}

#[kunit_tests(rdma_rs_recv_token)]
mod recv_token {
    use crate::rdma::cqe::RecvState;
    use kernel::prelude::*;

    #[test]
    fn one_token_per_receive() {
        let state = RecvState::new();
        let received = state.bind().expect("an unbound receive binds");
        // One request per receive: no second identity, no second first token.
        assert_eq!(state.bind().err(), Some(EBUSY));
        // Posted with its token, which the device's use consumes.
        assert!(state.to_device(received).is_ok());
        // SAFETY: the test stands for the completion of the receive it posted.
        let received = unsafe { state.completed() }.expect("its completion gives it back");
        // A provider's second completion of the receive mints nothing.
        // SAFETY: as above (a duplicate of it).
        assert!(unsafe { state.completed() }.is_none());
        // Posted again, and refused by the provider: the token comes back, and no
        // completion finds the receive posted.
        let id = state
            .to_device(received)
            .ok()
            .expect("its own token posts it");
        // SAFETY: `id` is what `to_device` gave; the test's provider refused the post.
        let received = unsafe { state.refused(id) };
        // SAFETY: as above (no completion comes, and one that did finds nothing).
        assert!(unsafe { state.completed() }.is_none());
        assert!(state.to_device(received).is_ok());
    }

    #[test]
    fn another_receives_token_refused() {
        let (a, b) = (RecvState::new(), RecvState::new());
        let (for_a, for_b) = (a.bind().unwrap(), b.bind().unwrap());
        // B's token does not post A, and comes back.
        let Err(for_b) = a.to_device(for_b) else {
            panic!("a receive posted with another's token");
        };
        // Nothing was marked posted: a completion of A finds nothing to give back.
        // SAFETY: the test stands for A's completion (of no post).
        assert!(unsafe { a.completed() }.is_none());
        assert!(a.to_device(for_a).is_ok());
        assert!(b.to_device(for_b).is_ok());
        // SAFETY: the test stands for A's completion.
        let for_a = unsafe { a.completed() }.unwrap();
        // A's token, back, does not post B either (which the device has).
        assert!(b.to_device(for_a).is_err());
    }

    #[test]
    fn tokens_of_an_earlier_receive_refused() {
        // A receive made where an earlier one was (an entry freed and its memory reused):
        // the earlier one's token names another identity.
        let mut state = RecvState::new();
        let earlier = state.bind().unwrap();
        state = RecvState::new();
        let now = state.bind().unwrap();
        assert!(state.to_device(earlier).is_err());
        assert!(state.to_device(now).is_ok());
    }
}

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
