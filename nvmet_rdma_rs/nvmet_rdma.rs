// SPDX-License-Identifier: GPL-2.0

//! `nvmet_rdma_rs`: the NVMe over Fabrics RDMA target transport, in Rust.
//!
//! This first version logs RDMA devices through an `ib_client` and checks, at build
//! time, that the nvmet core's types are bound; the transport itself comes next.

#[path = "../rdma/mod.rs"]
mod rdma;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"nvmet_rdma_rs";

use kernel::prelude::*;
use rdma::{bindings, ClientRegistration, DeviceLog, DEVICE_LOG};

module! {
    type: NvmetRdmaRs,
    name: "nvmet_rdma_rs",
    authors: ["rdma-rust-modules developers"],
    description: "NVMe over Fabrics RDMA target transport (Rust)",
    license: "GPL",
}

// The nvmet bindings are there and agree with the NVMe-oF specification.
const _: () = assert!(bindings::NVMF_TRTYPE_RDMA == 1);
const _: () = assert!(size_of::<bindings::nvme_command>() == 64);
const _: () = assert!(size_of::<bindings::nvme_completion>() == 16);

struct NvmetRdmaRs {
    _devices: ClientRegistration<DeviceLog>,
}

impl kernel::Module for NvmetRdmaRs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let devices = DEVICE_LOG.register()?;
        pr_info!(
            "loaded (nvmet request context: {} bytes)\n",
            size_of::<bindings::nvmet_req>()
        );
        Ok(Self { _devices: devices })
    }
}

impl Drop for NvmetRdmaRs {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
