// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the nvmet binding: a submission/completion queue pair through its life
//! with the real nvmet core (initialised, entered, destroyed, refused once destroyed), and
//! what a request that is not started allows.
//!
//! They run when `nvmet_rdma_rs` loads on a kernel with `CONFIG_KUNIT=y` (the test kernel)
//! and report in KTAP on the console; without KUnit they are not compiled.

use kernel::prelude::kunit_tests;

#[kunit_tests(nvmet_rs_binding)]
mod binding {
    use crate::nvmet::{request::Request, sq::impl_has_sq_cq, SqCq};
    use kernel::{prelude::*, sync::Arc};

    /// A queue that embeds a pair, held in an `Arc` as [`SqCq::enter`] asks.
    #[pin_data]
    struct TestQueue {
        #[pin]
        pair: SqCq,
    }

    impl_has_sq_cq!(TestQueue, pair);

    #[test]
    fn sq_cq_lifecycle() -> Result {
        let queue = Arc::pin_init(try_pin_init!(TestQueue { pair <- SqCq::new() }), GFP_KERNEL)?;
        let queue = queue.as_arc_borrow();
        let pair = &queue.pair;
        {
            let entered = SqCq::enter(&queue);
            assert!(entered.is_some());
            // (a second reference beside the first)
            assert!(SqCq::enter(&queue).is_some());
        }
        // No Connect installed a controller: nothing to end.
        assert!(pair.ctrl().is_none());
        assert!(!pair.fatal_error());
        // Waits for the references taken above (dropped), then refuses new ones.
        pair.destroy();
        assert!(SqCq::enter(&queue).is_none());
        // Destroying twice does nothing more (and dropping the pair neither).
        pair.destroy();
        assert!(SqCq::enter(&queue).is_none());
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
}
