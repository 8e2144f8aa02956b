// SPDX-License-Identifier: GPL-2.0

//! `rdma_client`: the client half of the kernel RDMA demo pair, driven through debugfs.
//!
//! Connects to `server`:`port` at load (or on `echo connect > ctl`). `echo text > send`
//! runs the round trip of `Documentation/rdma-demo.md`; `reply` shows what came back.

#[path = "../rdma/mod.rs"]
mod rdma;

mod ping;
#[path = "../rdma_server/protocol.rs"]
mod protocol;
mod session;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"rdma_client";

use kernel::{
    debugfs::{Dir, File},
    prelude::*,
    sync::Arc,
    uaccess::UserSliceReader,
};
use rdma::{ClientRegistration, DeviceLog, SocketAddr, DEVICE_LOG};
use session::Session;

module! {
    type: RdmaClient,
    name: "rdma_client",
    authors: ["rdma-rust-modules developers"],
    description: "Kernel RDMA demo client (RDMA CM, fast registration, ping and bench)",
    license: "GPL",
    params: {
        port: u16 {
            default: 7174,
            description: "server port",
        },
        unsafe_global_rkey: u8 {
            default: 0,
            description: "1: give the PD the device-wide DMA rkey, for ping mem_mode=dma",
        },
    },
}

rdma::param::string_param!(
    server,
    64,
    "",
    "server IPv4 or IPv6 address (empty: connect later through ctl)"
);

/// Reads a whole debugfs write (at most `N` bytes) and strips one trailing newline.
fn read_input<const N: usize>(
    reader: &mut UserSliceReader,
    what: &str,
) -> Result<([u8; N], usize)> {
    let mut buffer = [0u8; N];
    let len = reader.len();
    if len > N {
        pr_err!("{}: input longer than {} bytes\n", what, N);
        return Err(EINVAL);
    }
    reader.read_slice(&mut buffer[..len])?;
    let len = if len > 0 && buffer[len - 1] == b'\n' {
        len - 1
    } else {
        len
    };
    Ok((buffer, len))
}

fn server_address() -> Result<SocketAddr> {
    if server.value().is_empty() {
        pr_err!("connect: no server address (module parameter server)\n");
        return Err(EINVAL);
    }
    SocketAddr::parse(server.value(), *module_parameters::port.value())
        .inspect_err(|_| pr_err!("server: not an IPv4 or IPv6 address\n"))
}

fn global_rkey() -> bool {
    *module_parameters::unsafe_global_rkey.value() != 0
}

fn write_ping(session: &Arc<Session>, reader: &mut UserSliceReader) -> Result {
    let (input, len) = read_input::<256>(reader, "ping")?;
    let options = ping::PingOptions::parse(&input[..len])?;
    Session::ping(session, &options)
}

fn write_ctl(session: &Arc<Session>, reader: &mut UserSliceReader) -> Result {
    let (input, len) = read_input::<32>(reader, "ctl")?;
    match &input[..len] {
        b"connect" => Session::connect(session, &server_address()?, global_rkey()),
        b"disconnect" => {
            session.disconnect();
            Ok(())
        }
        _ => {
            pr_err!("ctl: unknown command (use connect or disconnect)\n");
            Err(EINVAL)
        }
    }
}

fn write_send(session: &Arc<Session>, reader: &mut UserSliceReader) -> Result {
    let (input, len) = read_input::<{ protocol::MAX_TEXT + 1 }>(reader, "send")?;
    Session::send(session, &input[..len])
}

struct RdmaClient {
    _ctl: Pin<KBox<File<Arc<Session>>>>,
    _send: Pin<KBox<File<Arc<Session>>>>,
    _ping: Pin<KBox<File<Arc<Session>>>>,
    _reply: Pin<KBox<File<Arc<Session>>>>,
    _stats: Pin<KBox<File<Arc<Session>>>>,
    _dir: Dir,
    session: Arc<Session>,
    _devices: ClientRegistration<DeviceLog>,
}

impl kernel::Module for RdmaClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let devices = DEVICE_LOG.register()?;
        let session = Session::new()?;
        if !server.value().is_empty() {
            let address = server_address()?;
            if let Err(e) = Session::connect(&session, &address, global_rkey()) {
                pr_warn!(
                    "cannot connect to {} yet ({:?}); use ctl to retry\n",
                    address,
                    e
                );
            }
        }
        let dir = Dir::new(c"rdma_demo");
        let ctl = KBox::pin_init(
            dir.write_callback_file(c"ctl", session.clone(), &write_ctl),
            GFP_KERNEL,
        )?;
        let send = KBox::pin_init(
            dir.write_callback_file(c"send", session.clone(), &write_send),
            GFP_KERNEL,
        )?;
        let ping = KBox::pin_init(
            dir.write_callback_file(c"ping", session.clone(), &write_ping),
            GFP_KERNEL,
        )?;
        let reply = KBox::pin_init(
            dir.read_callback_file(c"reply", session.clone(), &Session::show_reply),
            GFP_KERNEL,
        )?;
        let stats = KBox::pin_init(
            dir.read_callback_file(c"stats", session.clone(), &Session::show_stats),
            GFP_KERNEL,
        )?;
        pr_info!("loaded\n");
        Ok(Self {
            _ctl: ctl,
            _send: send,
            _ping: ping,
            _reply: reply,
            _stats: stats,
            _dir: dir,
            session,
            _devices: devices,
        })
    }
}

impl Drop for RdmaClient {
    fn drop(&mut self) {
        self.session.disconnect();
        pr_info!("unloading\n");
    }
}
