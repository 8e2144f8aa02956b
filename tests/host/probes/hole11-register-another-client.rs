// Probe: hole 11: registers a second `IbClient<DeviceLog>` static, not `DeviceLog::CLIENT`
// expect: E0599

static SECOND_DEVICE_LOG: crate::rdma::IbClient<crate::rdma::DeviceLog> =
    crate::rdma::IbClient::new(c"second_device_log");

fn register_second_client() -> kernel::error::Result {
    let _registration = SECOND_DEVICE_LOG.register()?;
    Ok(())
}
