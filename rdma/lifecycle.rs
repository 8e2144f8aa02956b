// SPDX-License-Identifier: GPL-2.0

//! The life of a connection a listener accepts, shared by the demo server's connections
//! and the nvmet transport's queues:
//!
//! 1. the listener's CM handler adopts the request's id into the connection's
//!    [`Lifecycle`] ([`Lifecycle::adopt`]);
//! 2. still in that handler call, [`Lifecycle::set_up`] builds the connection on the id
//!    (QP, buffers, receives) and accepts, as the C users of RDMA CM do (see
//!    [`HandlerHeld`] for why not later); on failure it rejects the request, keeps the id
//!    for the release (work requests the set-up posted come back there) and closes;
//! 3. RDMA CM reports the connection established, or ended ([`Lifecycle::event`]);
//! 4. [`Lifecycle::close`] (any context, no lock) marks the connection closing and queues
//!    its release, once;
//! 5. the release work ([`Lifecycle::release`]) takes the id, set up or not, disconnects
//!    a set-up one and hands it to the owner's teardown.
//!
//! A CM id is never destroyed from its own handler (see [`super::cm`]): the release runs
//! as a work item, which the owner embeds and queues.

#![forbid(unsafe_code)]

use super::{CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, HandlerHeld, IdContext};
use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex, MutexGuard},
};

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Adopted, being set up, or accepted and waiting for the host's RTU.
    Connecting,
    /// RDMA CM reported it established.
    Live,
    /// Closed: its release is queued, running or done.
    Closing,
}

impl Stage {
    /// The stage as `connections` debugfs files and log lines show it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stage::Connecting => "connecting",
            Stage::Live => "established",
            Stage::Closing => "closing",
        }
    }

    fn from_u8(value: u8) -> Self {
        match value {
            0 => Stage::Connecting,
            1 => Stage::Live,
            _ => Stage::Closing,
        }
    }
}

/// A connection a listener accepts: what it builds on its id, and how it is set up,
/// rejected and torn down. See the module documentation.
pub(crate) trait Accepted: CmHandler {
    /// What a set-up connection holds: its id, and what must go with or before it.
    type Link: Send + Unpin;

    /// The connection's lifecycle.
    fn lifecycle(&self) -> &Lifecycle<Self, Self::Link>;

    /// The id a set-up connection holds.
    fn id_of(link: &Self::Link) -> &CmId<Self>;

    /// Builds the connection on the adopted `id` and accepts it (`held`: in the listener's
    /// handler call); on failure gives the id back, to be rejected.
    fn build(
        this: &Arc<Self>,
        id: CmId<Self>,
        held: HandlerHeld<'_>,
    ) -> Result<Self::Link, (Error, CmId<Self>)>;

    /// The set-up failed with `error`: logs it and rejects `id` (with the private data the
    /// protocol wants). The release gets the id afterwards.
    fn reject(&self, id: &CmId<Self>, error: Error);

    /// Says why the connection closes (called once, by the first [`Lifecycle::close`]).
    fn closing(&self, why: &CStr);

    /// Queues the release work, which calls [`Lifecycle::release`].
    fn queue_release(this: Arc<Self>);

    /// Tears down what the connection holds: `link` if it was set up (its id disconnected
    /// already), else the adopted id if any (`unlinked`: not set up yet, or rejected).
    /// Runs in the release work, in process context.
    fn tear_down(this: &Arc<Self>, link: Option<Self::Link>, unlinked: Option<CmId<Self>>);
}

/// The id and stage of an accepted connection `T` (whose set-up state is `L`); see the
/// module documentation.
///
/// # Invariants
///
/// `pending` holds the adopted id until the set-up takes it, and again once the set-up
/// rejected it; `link` holds what the set-up built. The set-up takes `pending`, and
/// puts a rejected id back, with `link` locked, and the release takes both with `link`
/// locked: so a release finds the id in one of them, or none once it was released.
/// `stage` goes to `Closing` once and stays there.
#[pin_data]
pub(crate) struct Lifecycle<T: CmHandler, L> {
    stage: AtomicU8,
    /// The adopted id, from the adoption to the set-up (and a rejected one, from the
    /// set-up to the release). Both locks nest inside RDMA CM's handler mutex (the set-up
    /// runs in the listener's handler); nothing takes a handler mutex with either held
    /// (the release lets go of `link` before it disconnects or destroys the id).
    #[pin]
    pending: Mutex<Option<CmId<T>>>,
    /// What the set-up built; `None` before the set-up and after the release.
    #[pin]
    link: Mutex<Option<L>>,
}

impl<T: Accepted<Link = L>, L: Send + Unpin> Lifecycle<T, L> {
    /// A connection being adopted.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            stage: AtomicU8::new(Stage::Connecting as u8),
            pending <- new_mutex!(None),
            link <- new_mutex!(None),
        })
    }

    /// Where the connection is.
    pub(crate) fn stage(&self) -> Stage {
        Stage::from_u8(self.stage.load(Relaxed))
    }

    /// Whether the connection is closing (or released).
    pub(crate) fn is_closing(&self) -> bool {
        self.stage() == Stage::Closing
    }

    /// Takes `request` for the connection `context` holds, whose lifecycle this is: its
    /// events go to it from now on. Returns what [`Lifecycle::set_up`] needs, which the
    /// caller then calls in the same handler call. A connection adopts one request: a
    /// second one is left alone (RDMA CM rejects it), with a warning, and `None`.
    pub(crate) fn adopt<'a>(
        &self,
        context: IdContext<T>,
        request: ConnectRequest<'a>,
    ) -> Option<HandlerHeld<'a>> {
        let mut pending = self.pending.lock();
        if pending.is_some() {
            pr_warn!("a connection was asked to adopt a second request; left to RDMA CM\n");
            return None;
        }
        let held = request.handler_held();
        // INVARIANT: the adopted id waits in `pending` for the set-up. (Never dropped here:
        // this runs in the listener's handler, with the new id's handler mutex held.)
        *pending = Some(request.adopt(context));
        Some(held)
    }

    /// What the set-up built, locked (`None` before the set-up and after the release).
    pub(crate) fn link(&self) -> MutexGuard<'_, Option<L>> {
        self.link.lock()
    }

    /// Closes the connection: marks it closing and, the first time, says why and queues
    /// its release. Takes no lock: completion callbacks in any context may call it.
    pub(crate) fn close(this: ArcBorrow<'_, T>, why: &CStr) {
        // INVARIANT: `Closing` for good; only the first close queues the release.
        let was = this.lifecycle().stage.swap(Stage::Closing as u8, Relaxed);
        if Stage::from_u8(was) == Stage::Closing {
            return;
        }
        this.closing(why);
        T::queue_release(this.into());
    }

    /// Follows an event of the connection's id: established, or ended (closes).
    pub(crate) fn event(this: ArcBorrow<'_, T>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::Established => {
                // INVARIANT: only a connecting connection goes live (a closed one stays
                // closed).
                let _ = this.lifecycle().stage.compare_exchange(
                    Stage::Connecting as u8,
                    Stage::Live as u8,
                    Relaxed,
                    Relaxed,
                );
            }
            CmEventKind::Disconnected
            | CmEventKind::TimewaitExit
            | CmEventKind::DeviceRemoval
            | CmEventKind::AddrChange
            | CmEventKind::Rejected
            | CmEventKind::Unreachable
            | CmEventKind::ConnectError => Self::close(this, event.name()),
            _ => {}
        }
    }

    /// The set-up, in the listener's handler call that adopted the request (`held`):
    /// builds the connection on the adopted id and accepts it, or rejects it and closes.
    pub(crate) fn set_up(this: Arc<T>, held: HandlerHeld<'_>) {
        let lifecycle = this.lifecycle();
        // INVARIANT: `pending` is taken with `link` locked, and `link` stays locked through
        // the accept: a release either finds the id still pending, or waits for the set-up
        // and finds what it built (completions of the first messages wait for it too).
        let mut link = lifecycle.link.lock();
        let Some(id) = lifecycle.pending.lock().take() else {
            return;
        };
        match T::build(&this, id, held) {
            Ok(built) => *link = Some(built),
            Err((error, id)) => {
                this.reject(&id, error);
                // INVARIANT: back in `pending` with `link` still locked. The release drops
                // it, after its QP (if the set-up made one) gave its work requests back:
                // not here, where completions that wait for `link` would block the drain.
                *lifecycle.pending.lock() = Some(id);
                drop(link);
                Self::close(this.as_arc_borrow(), c"setup failure");
            }
        }
    }

    /// The release work: takes the id (set up or not), disconnects a set-up one and hands
    /// them to [`Accepted::tear_down`].
    pub(crate) fn release(this: Arc<T>) {
        let lifecycle = this.lifecycle();
        // INVARIANT: closing for good (a release runs only after a close).
        lifecycle.stage.store(Stage::Closing as u8, Relaxed);
        // Both taken with `link` locked: after the set-up, or before it took the id.
        let (link, unlinked) = {
            let mut link = lifecycle.link.lock();
            (link.take(), lifecycle.pending.lock().take())
        };
        if let Some(link) = &link {
            let _ = T::id_of(link).disconnect();
        }
        T::tear_down(&this, link, unlinked);
    }
}
