// Probe: hole 12: safe code makes up a receive's token (its buffers given back) to post the receive again before its completion gave it back
// expect: E0451

use kernel::prelude::*;

/// Only the receive's completion (or the making of its `RecvWr`, for the first post) gives
/// a `Received`: its field is private, so none can be made up here.
fn hole12_forged_token(
    qp: &crate::rdma::qp_handle::QpHandle,
    wr: &crate::rdma::qp_handle::RecvWr,
) -> Result {
    let received = crate::rdma::cqe::Received {
        id: core::num::NonZeroU64::MIN,
    };
    qp.post_recv(wr, received).map_err(|(e, _)| e)
}
