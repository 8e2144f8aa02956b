// SPDX-License-Identifier: GPL-2.0

//! The transport's RDMA core client: a device that goes away (`rdma link delete`, its
//! driver unloading) takes every queue on it down first, as `nvmet_rdma_remove_one`
//! does, whatever RDMA CM reports later. The core removes clients in reverse order of
//! registration, so this runs before RDMA CM's own removal, while the queues' ids and
//! QPs still work.
//!
//! Listeners are not touched here: RDMA CM tells them (`DEVICE_REMOVAL`), and the port
//! repairs itself once an address is reachable again (see `port`).

#![forbid(unsafe_code)]

use crate::nvmet::trace;
use crate::rdma::{ClientHandler, Device, IbClient};
use crate::target::Target;
use kernel::prelude::*;

/// The client; registered at load by `IbClient::<DeviceWatch>::register()`.
pub(crate) static DEVICES: IbClient<DeviceWatch> = IbClient::new(c"nvmet_rdma_rs");

/// Ends the queues of devices that go away.
pub(crate) struct DeviceWatch;

impl ClientHandler for DeviceWatch {
    const CLIENT: &'static IbClient<Self> = &DEVICES;
    type Data = ();

    fn add(device: &Device) -> Result {
        // (a device at the address of one that departed takes queues again)
        if let Some(target) = Target::get() {
            target.device_added(device);
        }
        Ok(())
    }

    fn remove(device: &Device, _data: ()) {
        // (at unload, the target is gone and its queues with it)
        let Some(target) = Target::get() else {
            return;
        };
        let ended = target.end_queues_on(device);
        trace::device_removal_event(device.name(), ended as u32);
        if ended > 0 {
            pr_info!(
                "device {} went away: ended its {} queue(s)\n",
                device.name().to_str().unwrap_or("?"),
                ended
            );
        }
    }
}
