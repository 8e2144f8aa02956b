// Probe: hole 14 (found reviewing the direct CQs): makes a CQ of its own, outside any QP, and keeps it; a CQ holds no reference to its device, which could go before it (use after free in ib_free_cq)
// expect: E0624

use kernel::prelude::*;

fn hole14_standalone_cq(device: &crate::rdma::Device) -> Result<crate::rdma::Cq> {
    crate::rdma::Cq::new(device, 16, 0, crate::rdma::PollContext::Direct)
}
