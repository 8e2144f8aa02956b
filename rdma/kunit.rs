// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the RDMA layer's logic that needs no device, for completions and
//! ownership: socket addresses (parsed, printed, classified), completion dispatch (an
//! `ib_cqe`'s `done` reaching the handler of the object that embeds it, with what the
//! work completion reports; entries and slots refused where their type does not say),
//! slot hand-offs (one owner at a time, resumed only by the event it was handed off to)
//! and receive tokens ([`crate::rdma::cqe::RecvState`]: one per receive, minted by its
//! completion and not by a duplicate, refused for another receive's post) and RDMA CM ids
//! (a type of service refused once the id listened, no poll before a QP). The suites of
//! memory (values published once, page lists, an MR's state, `DmaBuf`'s copies) are in
//! `kunit_memory.rs`.
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
        kernel_gaps::slot::Slot,
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
        // valid completion for the call, as the core passes them (the CQ may be null: see the
        // trampolines' safety sections).
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

    #[test]
    fn poll_position_is_the_place_in_the_cqs_batch() {
        use crate::rdma::bindings::ib_cq;
        let wcs: [ib_wc; 2] = pin_init::zeroed();
        let mut cq: ib_cq = pin_init::zeroed();
        let position = |cq: *const ib_cq, wc: &ib_wc| {
            // SAFETY: `cq` is null or a CQ value on this stack (zeroed, but for its batch
            // array's address, which is only compared), valid for reads for the call.
            unsafe { WorkCompletion::from_polled(cq, wc) }.poll_position()
        };
        // A batch array that starts at `wcs[1]`: its first entry; `wcs[0]` is before it.
        cq.wc = (&raw const wcs[1]).cast_mut();
        assert_eq!(position(&raw const cq, &wcs[1]), Some(0));
        assert_eq!(position(&raw const cq, &wcs[0]), None);
        // One that starts 15 entries before `wcs[0]` (an address only compared): `wcs[0]`
        // is its last entry, `wcs[1]` past its 16.
        cq.wc = (&raw const wcs[0]).wrapping_sub(15).cast_mut();
        assert_eq!(position(&raw const cq, &wcs[0]), Some(15));
        assert_eq!(position(&raw const cq, &wcs[1]), None);
        // No CQ: no position.
        assert_eq!(position(ptr::null(), &wcs[1]), None);
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
    use crate::rdma::kernel_gaps::slot::{Ended, Slot, SlotPhase, CORE_TAG};

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
        assert!(!slot.is_free_seqcst());
        // The sequentially consistent free frees it the same way.
        owner.free_seqcst();
        assert!(slot.is_free_seqcst());
        assert_eq!(*slot.claim().expect("freed by free_seqcst"), 7);
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
    fn phase_names_what_it_waits_for() {
        let slot = Slot::new(0u32);
        assert_eq!(slot.phase(), SlotPhase::Free);
        let owner = slot.claim().unwrap();
        assert_eq!(slot.phase(), SlotPhase::Owned);
        // SAFETY: the test is event 2 of its slot, and resumes it.
        unsafe { owner.hand_off_to_event(2) };
        assert_eq!(slot.phase(), SlotPhase::Awaits(2));
        // SAFETY: as above.
        let owner = unsafe { slot.resume(2) }.unwrap();
        // SAFETY: the test stands for the core, and resumes it.
        unsafe { owner.hand_off_to_event(CORE_TAG) };
        assert_eq!(slot.phase(), SlotPhase::Awaits(CORE_TAG));
        // SAFETY: as above.
        let owner = unsafe { slot.resume(CORE_TAG) }.unwrap();
        // A user's list is told apart from an event of the same number.
        owner.hand_off(2);
        assert_eq!(slot.phase(), SlotPhase::Parked(2));
        drop(slot.resume_local(2).unwrap());
        assert_eq!(slot.phase(), SlotPhase::Free);
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

#[kunit_tests(rdma_rs_cm_id)]
mod cm_id {
    use crate::rdma::{CmEvent, CmHandler, CmId, SocketAddr};
    use kernel::{
        prelude::*,
        sync::{Arc, ArcBorrow},
    };

    /// A handler for ids that see no event.
    struct Quiet;

    impl CmHandler for Quiet {
        fn event(_this: ArcBorrow<'_, Self>, _event: &CmEvent<'_>) {}
    }

    /// A new id takes a type of service; one that listened refuses it (RDMA CM's device
    /// hot-plug reads a listener's under a lock of its own), on every device or none.
    #[test]
    fn service_type_refused_once_listened() {
        let new_id = || CmId::new(Arc::new(Quiet, GFP_KERNEL).expect("memory"));
        let mut fresh = new_id().expect("an RDMA CM id");
        assert_eq!(fresh.set_service_type(184), Ok(()));
        // (and it has no CQ to poll yet)
        assert_eq!(fresh.poll(16), Err(crate::rdma::code::enotconn()));
        let mut listener = new_id().expect("an RDMA CM id");
        let any = SocketAddr::parse(b"0.0.0.0", 0).expect("the wildcard address");
        assert_eq!(listener.bind(&any), Ok(()));
        assert_eq!(listener.listen(1), Ok(()));
        assert_eq!(listener.set_service_type(184), Err(EINVAL));
    }
}
