// SPDX-License-Identifier: GPL-2.0

//! `rdma_server`: the server half of the kernel RDMA demo pair.
//!
//! This first version only logs RDMA devices as they come and go, through an `ib_client`,
//! which proves the module links against the RDMA core through the shared layer.

#[path = "../rdma/mod.rs"]
mod rdma;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"rdma_server";

use kernel::prelude::*;
use rdma::{ClientRegistration, DeviceLog, DEVICE_LOG};

module! {
    type: RdmaServer,
    name: "rdma_server",
    authors: ["rdma-rust-modules developers"],
    description: "Kernel RDMA demo server (RDMA CM, SEND/RECV, RDMA READ/WRITE)",
    license: "GPL",
}

struct RdmaServer {
    _devices: ClientRegistration<DeviceLog>,
}

impl kernel::Module for RdmaServer {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let devices = DEVICE_LOG.register()?;
        pr_info!("loaded\n");
        Ok(Self { _devices: devices })
    }
}

impl Drop for RdmaServer {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
