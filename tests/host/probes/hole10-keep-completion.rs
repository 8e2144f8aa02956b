// Probe: hole 10: a completion handler keeps its WorkCompletion past its call (to show it later to RwCtx::destroy as proof that a transfer ended)
// expect: E0521

use kernel::prelude::*;

/// Posts a receive whose handler moves its completion into a box that a mutex outside the
/// handler keeps. The layer lends the completion for the handler's call only, so the
/// borrow cannot escape into the `'static` mutex.
fn hole10_keep_completion(qp: &crate::rdma::Qp<'_>, local: crate::rdma::Local<'_>) -> Result {
    let kept = kernel::sync::Arc::pin_init(kernel::new_mutex!(None), GFP_KERNEL)?;
    let stash = kept.clone();
    qp.post_recv(local, move |wc| {
        *stash.lock() = KBox::new(wc, GFP_ATOMIC).ok();
    })?;
    // Later, outside any handler: the kept completion, still in the mutex.
    let _still_there = kept.lock().is_some();
    Ok(())
}
