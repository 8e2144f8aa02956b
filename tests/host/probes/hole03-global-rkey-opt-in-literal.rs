// Probe: hole 3: builds the global-rkey opt-in token itself instead of reading it from the admin's parameter
// expect: E0451

fn opt_in_by_literal(device: &crate::rdma::Device) -> kernel::error::Result {
    let opt_in = crate::rdma::GlobalRkeyOptIn { _private: () };
    let _pd = crate::rdma::Pd::new(device, Some(opt_in))?;
    Ok(())
}
