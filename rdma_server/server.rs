// SPDX-License-Identifier: GPL-2.0

//! `rdma_server`: the server half of the kernel RDMA demo pair.
//!
//! Listens with RDMA CM on `addr`:`port`. For each client it creates a PD, a CQ and a QP,
//! posts receives and accepts. When a client SENDs a TEXT message, the server stores the
//! text (`last_msg` in debugfs), RDMA READs it again from the client's registered source
//! buffer, RDMA WRITEs what it read into the client's sink buffer, and SENDs DONE. The
//! wire format is in `protocol.rs`; `Documentation/rdma-demo.md` has the whole story.

// Safe Rust only, but `deny`, not `forbid`, which would refuse (E0453) the `allow`s of what
// needs `unsafe` here: the binding layer, a module of this crate (`rdma`:
// `#![allow(unsafe_code)]`), and the module parameter declared below with its macros (their
// `__param` and `.modinfo` entries are `#[link_section]` statics). Every other file forbids
// it. (`module!` and the kernel crate's macros expand `unsafe` too, which the lint does not
// see: they are another crate's.)
#![deny(unsafe_code)]

#[path = "../rdma/mod.rs"]
mod rdma;

mod connection;
mod protocol;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"rdma_server";

use connection::{Connection, Shared};
use kernel::{
    debugfs::{Dir, File},
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};
use rdma::{
    ClientRegistration, CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, DeviceLog, IbClient,
    SocketAddr,
};

module! {
    type: RdmaServer,
    name: "rdma_server",
    authors: ["rdma-rust-modules developers"],
    description: "Kernel RDMA demo server (RDMA CM, SEND/RECV, RDMA READ/WRITE)",
    license: "GPL",
    params: {
        port: u16 {
            default: 7174,
            description: "TCP port space port to listen on",
        },
    },
}

rdma::kernel_gaps::param::string_param!(
    addr,
    64,
    "",
    "IPv4 or IPv6 address to listen on (default: any)"
);

/// The listening id's handler: turns connection requests into [`Connection`]s.
///
/// It also owns the id (which owns an `Arc` of it: the module breaks the cycle by taking
/// the id), so that a DEVICE_REMOVAL can have the id destroyed: RDMA CM's removal waits
/// until every id on the device is gone, and a listener bound to a device's address
/// is one of them.
#[pin_data]
struct Listener {
    shared: Arc<Shared>,
    #[pin]
    id: Mutex<Option<CmId<Listener>>>,
    #[pin]
    release_work: Work<Listener>,
}

impl_has_work! {
    impl HasWork<Self> for Listener { self.release_work }
}

impl CmHandler for Listener {
    fn event(this: ArcBorrow<'_, Self>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::DeviceRemoval => {
                pr_warn!("listener's device is going away; unload and reload to listen again\n");
                // The id cannot be destroyed from its own handler: the work item does it.
                let this: Arc<Self> = this.into();
                let _ = this.shared.queue().enqueue(this.clone());
            }
            kind => pr_info!("listener event {:?}\n", kind),
        }
    }

    fn connect_request(this: ArcBorrow<'_, Self>, request: ConnectRequest<'_>) {
        Connection::start(&this.shared, request);
    }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    /// The listener's device went away: destroy the id, so that the removal can finish.
    fn run(this: Arc<Listener>) {
        let id = this.id.lock().take();
        drop(id);
    }
}

/// debugfs `corrupt_next` (a test hook): `1` makes the server damage one byte of the next
/// PING's data, so a test can prove that the client's `validate` compares.
fn write_corrupt_next(
    shared: &Arc<Shared>,
    reader: &mut kernel::uaccess::UserSliceReader,
) -> Result {
    let mut input = [0u8; 2];
    let len = reader.len();
    if len == 0 || len > input.len() {
        pr_err!("corrupt_next: write 1\n");
        return Err(EINVAL);
    }
    reader.read_slice(&mut input[..len])?;
    if input[0] != b'1' || (len == 2 && input[1] != b'\n') {
        pr_err!("corrupt_next: write 1\n");
        return Err(EINVAL);
    }
    shared
        .corrupt_next
        .store(true, core::sync::atomic::Ordering::Relaxed);
    Ok(())
}

struct RdmaServer {
    listener: Arc<Listener>,
    shared: Arc<Shared>,
    _connections: Pin<KBox<File<Arc<Shared>>>>,
    _last_msg: Pin<KBox<File<Arc<Shared>>>>,
    _corrupt_next: Pin<KBox<File<Arc<Shared>>>>,
    _dir: Dir,
    _devices: ClientRegistration<DeviceLog>,
}

impl kernel::Module for RdmaServer {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let port = *module_parameters::port.value();
        let address = SocketAddr::parse(addr.value(), port).inspect_err(|_| {
            pr_err!(
                "addr: not an IPv4 or IPv6 address: {:?}\n",
                kernel::str::BStr::from_bytes(addr.value())
            )
        })?;
        let devices = IbClient::<DeviceLog>::register()?;
        let shared = Shared::new()?;
        let dir = Dir::new(c"rdma_server");
        let connections = KBox::pin_init(
            dir.read_callback_file(c"connections", shared.clone(), &Shared::show_connections),
            GFP_KERNEL,
        )?;
        let last_msg = KBox::pin_init(
            dir.read_callback_file(c"last_msg", shared.clone(), &Shared::show_last_msg),
            GFP_KERNEL,
        )?;
        let corrupt_next = KBox::pin_init(
            dir.write_callback_file(c"corrupt_next", shared.clone(), &write_corrupt_next),
            GFP_KERNEL,
        )?;
        let listener_shared = shared.clone();
        let listener = Arc::pin_init(
            pin_init!(Listener {
                shared: listener_shared,
                id <- new_mutex!(None),
                release_work <- new_work!("Listener::release_work"),
            }),
            GFP_KERNEL,
        )?;
        // In its slot before it is bound: a DEVICE_REMOVAL from then on finds it.
        *listener.id.lock() = Some(CmId::new(listener.clone())?);
        let started = match &*listener.id.lock() {
            Some(id) => id
                .bind(&address)
                .inspect_err(|e| pr_err!("cannot bind to {}: {:?}\n", address, e))
                .and_then(|()| id.listen(16)),
            None => Err(ENODEV),
        };
        if let Err(e) = started {
            let id = listener.id.lock().take();
            drop(id);
            shared.close_all();
            return Err(e);
        }
        pr_info!("listening on {}\n", address);
        Ok(Self {
            listener,
            shared,
            _connections: connections,
            _last_msg: last_msg,
            _corrupt_next: corrupt_next,
            _dir: dir,
            _devices: devices,
        })
    }
}

impl Drop for RdmaServer {
    fn drop(&mut self) {
        // Stop accepting first, then close the connections (which drains the queue, so no
        // release of the listener runs after this).
        let id = self.listener.id.lock().take();
        drop(id);
        self.shared.close_all();
        pr_info!("unloading\n");
    }
}
