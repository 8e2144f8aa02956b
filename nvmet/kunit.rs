// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the nvmet binding: a submission/completion queue pair through its life
//! with the real nvmet core (initialised, entered, destroyed, refused once destroyed), the
//! hold it keeps on its port, what a request that is not started allows, and where a
//! request is started (only where its object's type says, and not once moved).
//!
//! They run when `nvmet_rdma_rs` loads on a kernel with `CONFIG_KUNIT=y` (the test kernel)
//! and report in KTAP on the console; without KUnit they are not compiled.

use kernel::prelude::kunit_tests;

#[kunit_tests(nvmet_rs_binding)]
mod binding {
    use crate::nvmet::{
        bindings,
        port::{new_link, PortLink},
        request::{impl_has_request, Request, RequestState},
        sq::impl_has_sq_cq,
        workqueue::flush_nvmet_workqueue,
        EnabledPort, HasRequest, PortConfig, SqCq,
    };
    use crate::rdma::{cqe::impl_has_slot, kernel_gaps::slot::Slot};
    use core::{mem::offset_of, ptr::NonNull};
    use kernel::{prelude::*, sync::Arc};

    /// A port as configfs would make one, and its link (number 7), as `add_port` makes it.
    fn test_port() -> Result<(KBox<bindings::nvmet_port>, Arc<PortLink>, EnabledPort)> {
        let mut port = KBox::new(Default::default(), GFP_KERNEL)?;
        let raw = NonNull::from(&mut *port);
        let link = new_link(raw, 7)?;
        // SAFETY: the port, boxed, lives through the call (and the test, as `add_port`'s
        // port lives until its removal).
        let enabled = unsafe { PortConfig::new(raw, &link) }.enabled();
        Ok((port, link, enabled))
    }

    /// A queue that embeds a pair, held in an `Arc` as [`SqCq::enter`] asks.
    #[pin_data]
    struct TestQueue {
        #[pin]
        pair: SqCq,
    }

    impl_has_sq_cq!(TestQueue, pair);

    #[test]
    fn sq_cq_lifecycle() -> Result {
        let (port, link, enabled) = test_port()?;
        let hold = enabled.hold()?;
        assert_eq!(link.holds(), 1);
        let queue = Arc::pin_init(
            try_pin_init!(TestQueue { pair <- SqCq::new::<TestQueue>(hold) }),
            GFP_KERNEL,
        )?;
        let queue = queue.as_arc_borrow();
        let pair = &queue.pair;
        {
            let entered = SqCq::enter(&queue);
            // The requests started on it name the port the pair holds.
            let names_port = entered
                .as_ref()
                .is_some_and(|entered| core::ptr::eq(entered.port(), &raw const *port));
            assert!(names_port);
            // (a second reference beside the first)
            assert!(SqCq::enter(&queue).is_some());
            assert!(entered.is_some());
        }
        // The pair keeps its own queue, once (the same `Arc` for every start), not another
        // one; and a start finds nothing on a pair that keeps none. (Checked once the pair
        // gave the queue back: a failed assert returns, and a kept queue would never go.)
        let other = Arc::pin_init(
            try_pin_init!(TestQueue { pair <- SqCq::new::<TestQueue>(enabled.hold()?) }),
            GFP_KERNEL,
        )?;
        let refused_other = other.pair.keep(queue) == Err(EINVAL);
        let (kept_once, kept_same, started_other, started_unkept) = {
            let entered = SqCq::enter(&queue).ok_or(EINVAL)?;
            let unkept = pair.kept(queue, &entered).is_none();
            let once = pair.keep(queue).is_ok() && pair.keep(queue).is_ok();
            let first = pair.kept(queue, &entered);
            (
                once && first.is_some(),
                first == pair.kept(queue, &entered),
                pair.kept(other.as_arc_borrow(), &entered).is_some(),
                unkept,
            )
        };
        let other_kept_nothing = other.pair.destroy().is_empty();
        drop(other);
        // No Connect installed a controller: nothing to end.
        let no_ctrl = pair.ctrl().is_none() && !pair.fatal_error();
        // Waits for the references taken above (dropped), then refuses new ones, gives
        // the port up and gives back the queue it kept.
        let kept = pair.destroy();
        let gave_back = !kept.is_empty();
        drop(kept);
        assert!(no_ctrl);
        assert!(kept_once && kept_same && gave_back && started_unkept);
        assert!(refused_other && !started_other && other_kept_nothing);
        // Nothing is kept once the pair was destroyed.
        assert_eq!(pair.keep(queue), Err(ENODEV));
        assert!(SqCq::enter(&queue).is_none());
        assert_eq!(link.holds(), 0);
        // Destroying twice does nothing more (and dropping the pair neither).
        assert!(pair.destroy().is_empty());
        assert!(SqCq::enter(&queue).is_none());
        assert_eq!(link.holds(), 0);
        link.cut();
        drop(port);
        Ok(())
    }

    #[test]
    fn port_hold_outlives_removal() -> Result {
        let (port, link, enabled) = test_port()?;
        let first = enabled.hold()?;
        let second = enabled.hold()?;
        assert_eq!(link.holds(), 2);
        // A hold given up early counts once, however often it is given up.
        second.release();
        second.release();
        drop(second);
        assert_eq!(link.holds(), 1);
        // Removed: no new hold, and accessors see nothing. (Checked after `first` went:
        // a failed assertion ends the test where it stands, and a hold left behind would
        // keep the queued wait, and every flush of `nvmet_wq`, waiting.)
        link.cut();
        let refused = enabled.hold().err();
        let pi_seen = enabled.pi_enabled();
        // The hold taken before stays counted (the queued wait sees it) until it goes;
        // then the flush the core does before it frees the port returns.
        let counted_after_cut = link.holds();
        drop(first);
        let counted_at_end = link.holds();
        flush_nvmet_workqueue();
        drop(port);
        assert_eq!(refused, Some(ENODEV));
        assert!(!pi_seen);
        assert_eq!(counted_after_cut, 1);
        assert_eq!(counted_at_end, 0);
        Ok(())
    }

    #[test]
    fn request_not_started() {
        let mut req = Request::new();
        assert_eq!(req.transfer_len(), 0);
        assert_eq!(req.metadata_len(), 0);
        req.set_transfer_len(4096);
        assert_eq!(req.transfer_len(), 4096);
        // No response buffer: no status to read or write.
        assert_eq!(req.status(), u16::MAX);
        req.set_status(2);
        assert_eq!(req.status(), u16::MAX);
        // Only a started request reaches its namespace or gets data buffers.
        assert!(req.ns_integrity().is_none());
        assert_eq!(req.alloc_sgls().err(), Some(EINVAL));
    }

    /// A slot state that embeds a request, and its object, declared with the macro.
    struct State {
        _before: u64,
        req: Request,
    }

    struct Object {
        _before: u32,
        slot: Slot<State>,
    }

    impl_has_request!(Object, slot: State, req);

    fn object() -> Result<KBox<Object>> {
        let state = State {
            _before: 0,
            req: Request::new(),
        };
        Ok(KBox::new(
            Object {
                _before: 0,
                slot: Slot::new(state),
            },
            GFP_KERNEL,
        )?)
    }

    /// A state whose (safe) `RequestState` gives another request than the one its
    /// object's `HasRequest::OFFSET` names, which the core's answer would map back from.
    struct TwoRequests {
        _mapped_back: Request,
        other: Request,
    }

    impl RequestState for TwoRequests {
        fn request(&mut self) -> &mut Request {
            &mut self.other
        }
    }

    struct Misplaced {
        slot: Slot<TwoRequests>,
    }

    impl_has_slot!(Misplaced, slot: TwoRequests);

    impl HasRequest for Misplaced {
        const OFFSET: usize = offset_of!(Misplaced, slot)
            + Slot::<TwoRequests>::value_offset()
            + offset_of!(TwoRequests, _mapped_back);
    }

    #[test]
    fn request_started_only_where_declared() -> Result {
        let (a, b) = (object()?, object()?);
        let mut owner = a.slot.claim().ok_or(EBUSY)?;
        // The object's own slot and request: found (`Request::init` starts this one).
        let found = Request::placed(&*a, &mut owner).is_some();
        // Another object's slot: refused.
        let other_object = Request::placed(&*b, &mut owner).is_none();
        drop(owner);
        // A state that gives another request than the declared one: refused.
        let misplaced = KBox::new(
            Misplaced {
                slot: Slot::new(TwoRequests {
                    _mapped_back: Request::new(),
                    other: Request::new(),
                }),
            },
            GFP_KERNEL,
        )?;
        let mut owner = misplaced.slot.claim().ok_or(EBUSY)?;
        let other_request = Request::placed(&*misplaced, &mut owner).is_none();
        assert!(found && other_object && other_request);
        Ok(())
    }

    #[test]
    fn moved_request_not_started() -> Result {
        let a = object()?;
        let mut owner = a.slot.claim().ok_or(EBUSY)?;
        let request = Request::placed(&*a, &mut owner).ok_or(EINVAL)?;
        // SAFETY: the test hands the request to nobody.
        unsafe { request.start_for_test() };
        let started = request.is_started();
        // Moved out of its object (which the core maps back to): not started where it
        // lands, so no hand-over takes it there (nor back in its place, which now holds
        // another request).
        let moved = KBox::new(core::mem::replace(request, Request::new()), GFP_KERNEL)?;
        assert!(started);
        assert!(!moved.is_started());
        assert!(!Request::placed(&*a, &mut owner).is_some_and(|r| r.is_started()));
        Ok(())
    }
}
