// SPDX-License-Identifier: GPL-2.0

//! krping-style option strings for debugfs `ping`, e.g.
//! `count=1000,size=65536,validate,mem_mode=reg,server_inv,verbose`.

#![forbid(unsafe_code)]

use crate::options::{as_text, number};
use crate::protocol::MAX_PING;
use kernel::prelude::*;

/// How the client exposes its buffers to the server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MemMode {
    /// The PD's device-wide DMA rkey (needs `unsafe_global_rkey=1` at load).
    Dma,
    /// A fast registration per iteration (REG_MR, then invalidation).
    Reg,
}

/// The options of one `ping` run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PingOptions {
    /// Iterations.
    pub(crate) count: u32,
    /// Bytes per iteration, 1 to 4 MiB.
    pub(crate) size: u32,
    /// Compare what came back with what was sent.
    pub(crate) validate: bool,
    /// How the buffers are exposed.
    pub(crate) mem_mode: MemMode,
    /// The server invalidates the sink's key with SEND_WITH_INV.
    pub(crate) server_inv: bool,
    /// The server READs into its own MR with RDMA_READ_WITH_INV (iWARP devices only).
    pub(crate) read_inv: bool,
    /// Accepted for krping compatibility: the client's local SGEs always use the local
    /// DMA lkey.
    pub(crate) local_dma_lkey: bool,
    /// Log what came back of each iteration (its first [`VERBOSE_BYTES`] bytes, in hex).
    pub(crate) verbose: bool,
    /// krping's `fr`: a fast-registration loop alone, each iteration registering the
    /// source and the sink and invalidating both, with no message to the server.
    pub(crate) fr: bool,
}

/// How many bytes of each iteration `verbose` logs (krping's 64).
pub(crate) const VERBOSE_BYTES: usize = 64;

impl PingOptions {
    /// Parses an option string; `EINVAL` with one log line naming the bad option.
    pub(crate) fn parse(text: &[u8]) -> Result<Self> {
        let text = as_text("ping", text)?;
        let mut options = Self {
            count: 1,
            size: 64,
            validate: false,
            mem_mode: MemMode::Reg,
            server_inv: false,
            read_inv: false,
            local_dma_lkey: false,
            verbose: false,
            fr: false,
        };
        for option in text.split(',').filter(|o| !o.is_empty()) {
            let (name, value) = match option.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (option, None),
            };
            match (name, value) {
                ("count", Some(v)) => options.count = number("ping", "count", v, 1, 1_000_000)?,
                ("size", Some(v)) => options.size = number("ping", "size", v, 1, MAX_PING)?,
                ("validate", None) => options.validate = true,
                ("mem_mode", Some("dma")) => options.mem_mode = MemMode::Dma,
                ("mem_mode", Some("reg")) => options.mem_mode = MemMode::Reg,
                ("server_inv", None) => options.server_inv = true,
                ("local_dma_lkey", None) => options.local_dma_lkey = true,
                ("read_inv", None) => options.read_inv = true,
                ("verbose", None) => options.verbose = true,
                ("fr", None) => options.fr = true,
                _ => {
                    pr_err!("ping: bad option '{}'\n", option);
                    return Err(EINVAL);
                }
            }
        }
        if options.fr
            && (options.mem_mode == MemMode::Dma
                || options.validate
                || options.server_inv
                || options.read_inv
                || options.verbose)
        {
            pr_err!(
                "ping: fr is a registration loop alone: no mem_mode=dma, validate, server_inv, read_inv or verbose\n"
            );
            return Err(EINVAL);
        }
        if options.server_inv && options.mem_mode == MemMode::Dma {
            pr_err!("ping: server_inv needs mem_mode=reg (the DMA rkey cannot be invalidated)\n");
            return Err(EINVAL);
        }
        Ok(options)
    }
}
