// SPDX-License-Identifier: GPL-2.0

//! Hold points for tests: a connect request can be made to wait at a named point, so that
//! a test lands a port removal, a device removal or an unload inside a connect every
//! time instead of hoping for it.
//!
//! Only in builds with `--cfg rrs_test_hooks` (`make RRS_TEST_HOOKS=1`; the test suites
//! build so): then debugfs `nvmet_rdma_rs/test_hold_parsed_ms` and `test_hold_listed_ms`
//! take a time in milliseconds (0, the default: no hold), and each connect request waits
//! that long at the point, logging `test hook: connect from ADDR held at POINT for N ms`
//! before and `test hook: connect from ADDR goes on from POINT` after. In other builds
//! [`hold`] is empty and the files do not exist.
//!
//! Both points are inside RDMA CM's connect request handler, which runs under the
//! listener's handler mutex: a port's removal (which destroys the listener) waits for
//! the handler, and so does the RDMA core's removal of the device.

#![forbid(unsafe_code)]

use kernel::fmt::Display;

/// Where a connect request can be held.
#[derive(Clone, Copy, Debug)]
pub(crate) enum HoldPoint {
    /// The request's private data parsed; no queue made yet.
    Parsed,
    /// The queue made and listed, the CM id adopted; not yet accepted.
    Listed,
}

#[cfg(rrs_test_hooks)]
mod enabled {
    use super::HoldPoint;
    use kernel::fmt::{self, Display};
    use kernel::{
        debugfs::{Dir, File, Reader},
        prelude::*,
        sync::atomic::{Atomic, Relaxed},
        time::{delay::fsleep, Delta},
        uaccess::UserSliceReader,
    };

    static HOLD_PARSED_MS: Atomic<u32> = Atomic::new(0);
    static HOLD_LISTED_MS: Atomic<u32> = Atomic::new(0);

    impl HoldPoint {
        fn time(self) -> &'static Atomic<u32> {
            match self {
                HoldPoint::Parsed => &HOLD_PARSED_MS,
                HoldPoint::Listed => &HOLD_LISTED_MS,
            }
        }

        fn name(self) -> &'static str {
            match self {
                HoldPoint::Parsed => "parsed",
                HoldPoint::Listed => "listed",
            }
        }
    }

    /// A hold point's debugfs file: reads and writes its time in milliseconds.
    struct HoldFile(&'static Atomic<u32>);

    impl fmt::Debug for HoldFile {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fmt::Debug::fmt(self.0, f)
        }
    }

    impl Reader for HoldFile {
        fn read_from_slice(&self, reader: &mut UserSliceReader) -> Result {
            self.0.read_from_slice(reader)
        }
    }

    /// The hold points' debugfs files; they go with it.
    pub(crate) struct Files {
        _parsed: Pin<KBox<File<HoldFile>>>,
        _listed: Pin<KBox<File<HoldFile>>>,
    }

    impl Files {
        /// Creates the files in `dir`.
        pub(crate) fn new(dir: &Dir) -> Result<Self> {
            let file = |name, point: HoldPoint| {
                KBox::pin_init(
                    dir.read_write_file(name, HoldFile(point.time())),
                    GFP_KERNEL,
                )
            };
            Ok(Self {
                _parsed: file(c"test_hold_parsed_ms", HoldPoint::Parsed)?,
                _listed: file(c"test_hold_listed_ms", HoldPoint::Listed)?,
            })
        }
    }

    pub(crate) fn hold(point: HoldPoint, peer: &impl Display) {
        let ms = point.time().load(Relaxed);
        if ms == 0 {
            return;
        }
        pr_info!(
            "test hook: connect from {} held at {} for {} ms\n",
            peer,
            point.name(),
            ms
        );
        fsleep(Delta::from_millis(i64::from(ms)));
        pr_info!(
            "test hook: connect from {} goes on from {}\n",
            peer,
            point.name()
        );
    }
}

#[cfg(rrs_test_hooks)]
pub(crate) use enabled::Files;

/// Holds a connect request from `peer` at `point` for the time its debugfs file gives
/// (test builds only; see the module's documentation). Sleeps: the RDMA CM handler's
/// process context only.
#[inline(always)]
pub(crate) fn hold(point: HoldPoint, peer: &impl Display) {
    #[cfg(rrs_test_hooks)]
    enabled::hold(point, peer);
    #[cfg(not(rrs_test_hooks))]
    let _ = (point, peer);
}
