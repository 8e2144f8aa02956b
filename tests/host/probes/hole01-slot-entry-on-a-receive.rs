// Probe: hole 1 (review): a receive bound to a slot's resuming entry, whose completion would resume the slot while its RDMA READ is in flight
// expect: E0277

/// Binds a receive to the READ entry of a response slot.
fn bind_a_slot_entry_to_a_receive(id: &crate::rdma::CmId<crate::queue::Queue>) {
    let _ = id.recv_wr::<crate::command::RspSlot, 1>(|_queue| None);
}
