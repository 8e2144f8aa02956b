// Probe: hole 3: mints the global-rkey opt-in from a parameter storage no module parameter declares
// expect: E0133

static FAKE_PARAM: crate::rdma::GlobalRkeyParam = crate::rdma::GlobalRkeyParam::new();

fn opt_in_by_fake_param(device: &crate::rdma::Device) -> kernel::error::Result {
    let _pd = crate::rdma::Pd::new(device, FAKE_PARAM.opt_in())?;
    Ok(())
}
