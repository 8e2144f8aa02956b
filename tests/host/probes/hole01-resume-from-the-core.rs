// Probe: hole 1: safe code takes a slot back from the nvmet core (or a device) while it holds the request
// expect: E0133

/// Resumes a slot handed to the nvmet core, as only the core's `queue_response` may.
fn take_back_from_the_core<T>(slot: &crate::rdma::kernel_gaps::slot::Slot<T>) -> bool {
    slot.resume(crate::rdma::kernel_gaps::slot::CORE_TAG)
        .is_some()
}
