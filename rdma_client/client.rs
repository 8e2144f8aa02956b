// SPDX-License-Identifier: GPL-2.0

//! `rdma_client`: the client half of the kernel RDMA demo pair, driven through debugfs.
//!
//! Connects to `server`:`port` at load (or on `echo connect > ctl`). `echo text > send`
//! runs the round trip of `Documentation/rdma-demo.md`; `reply` shows what came back.

// Safe Rust only, but `deny`, not `forbid`, which would refuse (E0453) the `allow`s of what
// needs `unsafe` here: the binding layer, a module of this crate (`rdma`:
// `#![allow(unsafe_code)]`), and the module parameters declared below with its macros (their
// `__param` and `.modinfo` entries are `#[link_section]` statics). Every other file forbids
// it. (`module!` and the kernel crate's macros expand `unsafe` too, which the lint does not
// see: they are another crate's.)
#![deny(unsafe_code)]

#[path = "../rdma/mod.rs"]
mod rdma;

mod bench;
mod options;
mod ping;
#[path = "../rdma_server/protocol.rs"]
mod protocol;
mod session;

/// The owner name the RDMA core records for this module's verbs objects.
pub(crate) const MODULE_NAME: &kernel::prelude::CStr = c"rdma_client";

use kernel::{
    debugfs::{Dir, File},
    prelude::*,
    str::CString,
    sync::Arc,
    uaccess::UserSliceReader,
};
use rdma::{
    kernel_gaps::debugfs_check, ClientRegistration, DeviceLog, IbClient, PollContext, SocketAddr,
};
use session::{LinkOptions, Session};

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
        sessions: u32 {
            default: 1,
            description: "client sessions (connections), 1 to 16; the first in rdma_demo/, \
                          the others in rdma_demo/session<n>/",
        },
        tos: i16 {
            default: -1,
            description: "type of service of the connections (krping's tos), 0 to 255: the \
                          IPv4 TOS byte or IPv6 traffic class of RoCE packets; -1: RDMA CM's \
                          default",
        },
        txdepth: u32 {
            default: 64,
            description: "krping's txdepth, 1 to 64: the connections' send queue room for a \
                          bench's READs and WRITEs in flight (bench depth= at most this; \
                          its default depth is 16, or this if less)",
        },
        poll: u8 {
            default: 0,
            description: "1: the connections' completions are polled by the task that waits \
                          for them (krping's poll, IB_POLL_DIRECT) instead of running on the \
                          RDMA core's workqueue",
        },
    },
}

rdma::kernel_gaps::param::string_param!(
    server,
    64,
    "",
    "server IPv4 or IPv6 address (empty: connect later through ctl)"
);
rdma::kernel_gaps::param::global_rkey_param!(
    unsafe_global_rkey,
    "1: give the PD the device-wide DMA rkey, for ping mem_mode=dma (exposes all memory)"
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

/// How the sessions connect, as given at load (checked by `init`).
fn link_options() -> LinkOptions {
    LinkOptions {
        global_rkey: unsafe_global_rkey.opt_in(),
        tos: u8::try_from(*module_parameters::tos.value()).ok(),
        poll: if *module_parameters::poll.value() == 1 {
            PollContext::Direct
        } else {
            PollContext::Workqueue
        },
        txdepth: *module_parameters::txdepth.value(),
    }
}

fn write_ping(session: &Arc<Session>, reader: &mut UserSliceReader) -> Result {
    let (input, len) = read_input::<256>(reader, "ping")?;
    let options = ping::PingOptions::parse(&input[..len])?;
    Session::ping(session, &options)
}

fn write_bench(session: &Arc<Session>, reader: &mut UserSliceReader) -> Result {
    let (input, len) = read_input::<128>(reader, "bench")?;
    let options = bench::BenchOptions::parse(&input[..len])?;
    Session::bench(session, &options)
}

fn write_ctl(session: &Arc<Session>, reader: &mut UserSliceReader) -> Result {
    let (input, len) = read_input::<32>(reader, "ctl")?;
    match &input[..len] {
        b"connect" => Session::connect(session, &server_address()?, &link_options()),
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

/// The module's debugfs directory.
const DIR_NAME: &CStr = c"rdma_demo";

/// The most sessions one module instance runs.
const MAX_SESSIONS: u32 = 16;

/// A session and its debugfs files. Field order is drop order: files, then their
/// directory.
struct SessionFiles {
    _files: KVec<Pin<KBox<File<Arc<Session>>>>>,
    _dir: Option<Dir>,
    session: Arc<Session>,
}

impl SessionFiles {
    /// Creates session `number` with its files in `dir` (or, for a session other than the
    /// first, in a `session<number>` subdirectory of it) and connects it if `server` is set.
    fn new(dir: &Dir, number: u32) -> Result<Self> {
        let session = Session::new(number)?;
        let subdir_name = match number {
            0 => None,
            n => Some(CString::try_from_fmt(fmt!("session{}", n))?),
        };
        let subdir = subdir_name.as_ref().map(|name| dir.subdir(name));
        let parent = subdir.as_ref().unwrap_or(dir);
        let mut files = KVec::with_capacity(6, GFP_KERNEL)?;
        let ctl = parent.write_callback_file(c"ctl", session.clone(), &write_ctl);
        files.push(KBox::pin_init(ctl, GFP_KERNEL)?, GFP_KERNEL)?;
        let send = parent.write_callback_file(c"send", session.clone(), &write_send);
        files.push(KBox::pin_init(send, GFP_KERNEL)?, GFP_KERNEL)?;
        let ping = parent.write_callback_file(c"ping", session.clone(), &write_ping);
        files.push(KBox::pin_init(ping, GFP_KERNEL)?, GFP_KERNEL)?;
        let bench = parent.read_write_callback_file(
            c"bench",
            session.clone(),
            &Session::show_bench,
            &write_bench,
        );
        files.push(KBox::pin_init(bench, GFP_KERNEL)?, GFP_KERNEL)?;
        let reply = parent.read_callback_file(c"reply", session.clone(), &Session::show_reply);
        files.push(KBox::pin_init(reply, GFP_KERNEL)?, GFP_KERNEL)?;
        let stats = parent.read_callback_file(c"stats", session.clone(), &Session::show_stats);
        files.push(KBox::pin_init(stats, GFP_KERNEL)?, GFP_KERNEL)?;
        check_files(subdir_name.as_deref())?;
        if !server.value().is_empty() {
            let address = server_address()?;
            if let Err(e) = Session::connect(&session, &address, &link_options()) {
                pr_warn!(
                    "session {}: cannot connect to {} yet ({:?}); use ctl to retry\n",
                    number,
                    address,
                    e
                );
            }
        }
        Ok(Self {
            _files: files,
            _dir: subdir,
            session,
        })
    }
}

/// The files of a session, as [`SessionFiles::new`] creates them.
const SESSION_FILES: [&CStr; 6] = [c"ctl", c"send", c"ping", c"bench", c"reply", c"stats"];

/// Fails with `ENOMEM` and one log line if a file of the session in `rdma_demo/`
/// (`subdir` of it, for sessions other than the first) is missing: the debugfs API does
/// not report a failed creation, and the files are the module's only interface.
fn check_files(subdir: Option<&CStr>) -> Result {
    for name in SESSION_FILES {
        let found = match subdir {
            None => debugfs_check::exists(&[DIR_NAME, name]),
            Some(subdir) => debugfs_check::exists(&[DIR_NAME, subdir, name]),
        };
        if !found {
            pr_err!(
                "cannot create debugfs file rdma_demo/{}{}{} (out of memory, or debugfs is off)\n",
                subdir.and_then(|s| s.to_str().ok()).unwrap_or(""),
                if subdir.is_some() { "/" } else { "" },
                name.to_str().unwrap_or("?")
            );
            return Err(ENOMEM);
        }
    }
    Ok(())
}

impl Drop for SessionFiles {
    /// The connection holds the session (as its CM handler): break that cycle.
    fn drop(&mut self) {
        self.session.disconnect();
    }
}

struct RdmaClient {
    _sessions: KVec<SessionFiles>,
    _dir: Dir,
    _devices: ClientRegistration<DeviceLog>,
}

impl kernel::Module for RdmaClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let count = *module_parameters::sessions.value();
        if !(1..=MAX_SESSIONS).contains(&count) {
            pr_err!("sessions={} is not from 1 to {}\n", count, MAX_SESSIONS);
            return Err(EINVAL);
        }
        if !server.value().is_empty() {
            server_address()?;
        }
        let tos = *module_parameters::tos.value();
        if !(-1..=255).contains(&tos) {
            pr_err!(
                "tos={} is not from 0 to 255 (or -1, RDMA CM's default)\n",
                tos
            );
            return Err(EINVAL);
        }
        let txdepth = *module_parameters::txdepth.value();
        if !(1..=bench::MAX_DEPTH).contains(&txdepth) {
            pr_err!(
                "txdepth={} is not from 1 to {}\n",
                txdepth,
                bench::MAX_DEPTH
            );
            return Err(EINVAL);
        }
        let poll = *module_parameters::poll.value();
        if poll > 1 {
            pr_err!("poll={} is not 0 or 1\n", poll);
            return Err(EINVAL);
        }
        let devices = IbClient::<DeviceLog>::register()?;
        let dir = Dir::new(DIR_NAME);
        let mut sessions = KVec::with_capacity(count as usize, GFP_KERNEL)?;
        for number in 0..count {
            sessions.push(SessionFiles::new(&dir, number)?, GFP_KERNEL)?;
        }
        pr_info!("loaded with {} session(s)\n", count);
        Ok(Self {
            _sessions: sessions,
            _dir: dir,
            _devices: devices,
        })
    }
}

impl Drop for RdmaClient {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
