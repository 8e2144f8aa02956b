// Probe: hole 9: safe code marks a registered MR invalid by naming its rkey, while the key still works (so the MR can be mapped again under it)
// expect: E0308

use kernel::prelude::*;

/// Only a completion that reports `IB_WC_WITH_INVALIDATE` of the MR's key may note the
/// peer's invalidation, so a bare rkey is refused.
fn hole9_forged_remote_invalidate(mr: &crate::rdma::Mr) -> Result {
    mr.note_remote_invalidate(mr.rkey())
}
