// Probe: hole 8: safe code names an arbitrary lkey for a local range (one of another PD or device, or none at all) and posts it
// expect: E0451

use kernel::prelude::*;

/// A `Local` takes its lkey from a PD or an MR (`Local::dma`, `Local::registered`), whose
/// PD the QP compares with its own; its fields are private, so no lkey can be put in.
fn hole8_forged_lkey<T: crate::rdma::CmHandler>(
    id: &crate::rdma::CmId<T>,
    buf: &crate::rdma::DmaBuf,
) -> Result {
    let local = crate::rdma::Local {
        lkey: 1234,
        ..id.dma_local(buf, 0, 64)?
    };
    id.qp().ok_or(EINVAL)?.post_recv(local, |_| {})
}
