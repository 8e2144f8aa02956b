// Probe: hole 12: safe code posts a receive slot again while the core or a bio may still read what it received (no token that its completion gave back)
// expect: E0061

/// Posts a receive again, on its QP and on an SRQ, at any time: the device may then
/// overwrite a capsule whose command the nvmet core still parses, or in-capsule data a bio
/// still reads.
fn hole12_repost_without_token<X, S>(
    qp: &crate::rdma::qp_handle::QpHandle,
    srq: &crate::rdma::Srq<X, S>,
    wr: &crate::rdma::qp_handle::RecvWr,
) {
    let _ = qp.post_recv(wr);
    let _ = srq.post(wr);
}
