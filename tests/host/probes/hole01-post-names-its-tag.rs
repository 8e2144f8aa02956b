// Probe: hole 1: safe code chooses which completion resumes a posted slot (e.g. a SEND completion resuming a slot whose RDMA READ is in flight)
// expect: E0061 E0277

/// Posts a slot's SEND but names its own tag for the completion that resumes it.
fn post_under_a_tag_of_its_choice(
    owner: crate::rdma::kernel_gaps::slot::Owner<'_, crate::rdma::qp_handle::SendWr>,
    qp: &crate::rdma::qp_handle::QpHandle,
    tag: crate::rdma::kernel_gaps::slot::Tag,
) {
    let _ = owner.post(qp, tag, |send| Ok(send.prepare()));
}
