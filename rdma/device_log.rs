// SPDX-License-Identifier: GPL-2.0

//! A client that logs RDMA devices as the core adds and removes them.
//!
//! Every module registers it at load, so `dmesg` shows which devices each one sees.

use super::{ClientHandler, Device, IbClient};
use kernel::prelude::*;

/// The device log's client; register it with `IbClient::<DeviceLog>::register()`.
pub(crate) static DEVICE_LOG: IbClient<DeviceLog> = IbClient::new(c"rdma_rs_device_log");

/// Logs `device rxe0 (1 port, RoCE) added` and `device rxe0 removed`.
pub(crate) struct DeviceLog;

impl ClientHandler for DeviceLog {
    const CLIENT: &'static IbClient<Self> = &DEVICE_LOG;
    type Data = ();

    fn add(device: &Device) -> Result {
        pr_info!("device {} added\n", device);
        Ok(())
    }

    fn remove(device: &Device, _data: ()) {
        pr_info!("device {} removed\n", device.name().to_str().unwrap_or("?"));
    }
}
