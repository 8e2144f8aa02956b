// SPDX-License-Identifier: GPL-2.0

//! `rdma_client`: the client half of the kernel RDMA demo pair.
//!
//! This first version only logs RDMA devices as they come and go, through an `ib_client`,
//! which proves the module links against the RDMA core through the shared layer.

#[path = "../rdma/mod.rs"]
mod rdma;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"rdma_client";

use kernel::prelude::*;
use rdma::{ClientRegistration, DeviceLog, DEVICE_LOG};

module! {
    type: RdmaClient,
    name: "rdma_client",
    authors: ["rdma-rust-modules developers"],
    description: "Kernel RDMA demo client (RDMA CM, fast registration, ping and bench)",
    license: "GPL",
}

struct RdmaClient {
    _devices: ClientRegistration<DeviceLog>,
}

impl kernel::Module for RdmaClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let devices = DEVICE_LOG.register()?;
        pr_info!("loaded\n");
        Ok(Self { _devices: devices })
    }
}

impl Drop for RdmaClient {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
