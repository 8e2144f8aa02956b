// Probe: hole 3: asks for the device-wide DMA rkey with a `bool`, not the admin's opt-in
// expect: E0308

fn global_rkey_by_bool(device: &crate::rdma::Device) -> kernel::error::Result {
    let _pd = crate::rdma::Pd::new(device, true)?;
    Ok(())
}
