// SPDX-License-Identifier: GPL-2.0

//! `nvmet_rdma_rs`: the NVMe over Fabrics RDMA target transport, in Rust.
//!
//! Registers with the nvmet core as the transport for `addr_trtype rdma`, so the
//! configfs steps that enable the C `nvmet_rdma` enable this module instead. See
//! `Documentation/nvmet-rdma-rs.md`.

// Safe Rust only, but `deny`, not `forbid`, which would refuse (E0453) the `allow`s of what
// needs `unsafe` here: the binding layers, modules of this crate (`rdma`, `nvmet`,
// `rdma_kunit`, `rdma_kunit_memory`: `#![allow(unsafe_code)]`), and the module parameters
// declared below with the RDMA layer's macros (their `__param` and `.modinfo` entries are `#[link_section]`
// statics, the checked setter an `unsafe extern "C" fn`). Every other file forbids it.
// (`module!` and the kernel crate's macros expand `unsafe` too, which the lint does not
// see: they are another crate's.)
#![deny(unsafe_code)]

#[path = "../rdma/mod.rs"]
mod rdma;

#[path = "../nvmet/mod.rs"]
mod nvmet;

// The RDMA layer's KUnit suites, run here only (see the file).
#[path = "../rdma/kunit.rs"]
mod rdma_kunit;
#[path = "../rdma/kunit_memory.rs"]
mod rdma_kunit_memory;

mod command;
mod devices;
mod dispatch;
mod fabrics;
mod histogram;
mod listener;
mod pi;
mod port;
mod protection;
mod queue;
mod recv;
mod report;
mod send_wait;
mod srq;
mod stats_json;
mod target;
mod test_hooks;
mod wire;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"nvmet_rdma_rs";

use kernel::{
    debugfs::{Dir, File},
    fmt,
    prelude::*,
    sync::Arc,
};
use nvmet::abi;
use rdma::{signature, ClientRegistration, DeviceLog, IbClient};
use target::NvmetRdma;
use target::Target;

module! {
    type: NvmetRdmaRs,
    name: "nvmet_rdma_rs",
    authors: ["rdma-rust-modules developers"],
    description: "NVMe over Fabrics RDMA target transport (Rust)",
    license: "GPL",
    alias: ["nvmet-transport-1"],
}

// The shared receive queues' parameters (`srq`, which reads them) and whether commands are
// timed (`command::latency`): here, where `unsafe` is allowed for their registration.
rdma::kernel_gaps::param::bool_param!(use_srq, false, "Use shared receive queue.");
rdma::kernel_gaps::param::bool_param!(
    latency_timing,
    true,
    "Time commands for the latency histograms (debugfs latency: on or off at run time)."
);
rdma::kernel_gaps::param::int_param_at_least!(
    srq_size,
    1024,
    256,
    "set Shared Receive Queue (SRQ) size, should >= 256 (default: 1024)"
);

// The C headers agree with the NVMe-oF specification and with `wire`...
const _: () = assert!(nvmet::transport::trtype::RDMA == 1);
const _: () = assert!(abi::COMMAND_SIZE == wire::COMMAND_SIZE);
const _: () = assert!(abi::COMPLETION_SIZE == 16);
const _: () = assert!(abi::RDMA_CM_REQ_SIZE == wire::ConnectData::LEN);
const _: () = assert!(abi::ADMIN_QUEUE_DEPTH == wire::ADMIN_QUEUE_DEPTH);
const _: () = assert!(abi::status::SGL_INVALID_TYPE == wire::status::SGL_INVALID_TYPE as u32);
const _: () = assert!(abi::status::DNR == wire::status::DNR as u32);
// ... and with `protection`.
const _: () = assert!(abi::prinfo::PRACT == protection::control::PRACT as u32);
const _: () = assert!(abi::prinfo::PRCHK_REF == protection::control::PRCHK_REF as u32);
const _: () = assert!(abi::prinfo::PRCHK_APP == protection::control::PRCHK_APP as u32);
const _: () = assert!(abi::prinfo::PRCHK_GUARD == protection::control::PRCHK_GUARD as u32);
const _: () = assert!(signature::check::GUARD == protection::check::GUARD);
const _: () = assert!(signature::check::APPTAG == protection::check::APPTAG);
const _: () = assert!(signature::check::REFTAG == protection::check::REFTAG);
const _: () = assert!(abi::status::GUARD_CHECK == protection::status::GUARD_CHECK as u32);
const _: () = assert!(abi::status::APPTAG_CHECK == protection::status::APPTAG_CHECK as u32);
const _: () = assert!(abi::status::REFTAG_CHECK == protection::status::REFTAG_CHECK as u32);
const _: () = assert!(abi::status::INVALID_PI == protection::status::INVALID_PI as u32);
const _: () = assert!(abi::PI_TYPE3 == protection::PI_TYPE3 as u32);
const _: () = assert!(signature::error_type::BAD_GUARD == 0);
const _: () = assert!(signature::error_type::BAD_REFTAG == 1);
const _: () = assert!(signature::error_type::BAD_APPTAG == 2);

/// debugfs `ports`: one line per enabled port.
fn show_ports(target: &Arc<Target>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut result = Ok(());
    target.for_each_port(|port| {
        if result.is_ok() {
            result = writeln!(
                f,
                "port {} {} inline_data_size {} connects {} rejects {}",
                port.id(),
                port.address(),
                port.inline_size(),
                port.stats
                    .connects
                    .load(core::sync::atomic::Ordering::Relaxed),
                port.stats
                    .rejects
                    .load(core::sync::atomic::Ordering::Relaxed),
            );
        }
    });
    result
}

/// debugfs `queues`: one line per queue.
fn show_queues(target: &Arc<Target>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut result = Ok(());
    target.for_each_queue(|queue| {
        if result.is_ok() {
            result = queue.show(f);
        }
    });
    result
}

struct NvmetRdmaRs {
    _ports: Pin<KBox<File<Arc<Target>>>>,
    _queues: Pin<KBox<File<Arc<Target>>>>,
    /// `latency` and `stats.json` (`report`).
    _reports: [Pin<KBox<File<Arc<Target>>>>; 2],
    /// The test hold points' files (test builds only).
    #[cfg(rrs_test_hooks)]
    _hooks: test_hooks::Files,
    _dir: Dir,
    target: Arc<Target>,
    _registration: nvmet::Registration<NvmetRdma>,
    _device_watch: ClientRegistration<devices::DeviceWatch>,
    _devices: ClientRegistration<DeviceLog>,
}

/// The transport's ops table: the core keeps its address while the transport is
/// registered, and in every request until it completed.
static OPS: nvmet::transport::Ops<NvmetRdma> = nvmet::transport::Ops::new();

impl kernel::Module for NvmetRdmaRs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        command::latency::set_timing(latency_timing.get());
        let devices = IbClient::<DeviceLog>::register()?;
        let target = Target::install(OPS.handle())?;
        // Until the module is loaded, a failure leaves nothing installed.
        let loaded = (|| -> Result<_> {
            // Registered after the device log, so removed before it: a device's queues
            // end before `device ... removed` is logged.
            let device_watch = IbClient::<devices::DeviceWatch>::register()?;
            let dir = Dir::new(c"nvmet_rdma_rs");
            let ports = KBox::pin_init(
                dir.read_callback_file(c"ports", target.clone(), &show_ports),
                GFP_KERNEL,
            )?;
            let queues = KBox::pin_init(
                dir.read_callback_file(c"queues", target.clone(), &show_queues),
                GFP_KERNEL,
            )?;
            let reports = [
                KBox::pin_init(
                    dir.read_write_callback_file(
                        c"latency",
                        target.clone(),
                        &report::show_latency,
                        &report::write_latency,
                    ),
                    GFP_KERNEL,
                )?,
                KBox::pin_init(
                    dir.read_callback_file(c"stats.json", target.clone(), &stats_json::show_json),
                    GFP_KERNEL,
                )?,
            ];
            #[cfg(rrs_test_hooks)]
            let hooks = test_hooks::Files::new(&dir)?;
            // Last: once registered, configfs can enable ports and hosts connect, so
            // nothing may fail after it.
            let registration = nvmet::Registration::new(&OPS).inspect_err(|_| {
                pr_err!(
                    "another NVMe-oF RDMA transport is registered (is nvmet_rdma loaded?); \
                     unload it first\n"
                )
            })?;
            Ok((
                device_watch,
                registration,
                dir,
                ports,
                queues,
                reports,
                #[cfg(rrs_test_hooks)]
                hooks,
            ))
        })();
        #[cfg(rrs_test_hooks)]
        let (device_watch, registration, dir, ports, queues, reports, hooks) =
            loaded.inspect_err(|_| Target::uninstall())?;
        #[cfg(not(rrs_test_hooks))]
        let (device_watch, registration, dir, ports, queues, reports) =
            loaded.inspect_err(|_| Target::uninstall())?;
        pr_info!("registered as the NVMe-oF RDMA transport\n");
        Ok(Self {
            #[cfg(rrs_test_hooks)]
            _hooks: hooks,
            _ports: ports,
            _queues: queues,
            _reports: reports,
            _dir: dir,
            target,
            _registration: registration,
            _device_watch: device_watch,
            _devices: devices,
        })
    }
}

impl Drop for NvmetRdmaRs {
    fn drop(&mut self) {
        // No port is enabled (each holds a module reference); queues may still be going.
        self.target.close_all();
        Target::uninstall();
        pr_info!("unloading\n");
    }
}

// The compile-fail probes of tests/host/probes (`make probes`): `run.py` there compiles
// this crate with `--cfg rdma_rs_probe` and one probe file, safe code written as the
// transport's, in here. Not compiled otherwise.
#[cfg(rdma_rs_probe)]
#[forbid(unsafe_code)]
#[allow(dead_code, unused_imports)]
mod soundness_probe {
    include!(env!("RDMA_RS_PROBE"));
}
