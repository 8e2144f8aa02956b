// SPDX-License-Identifier: GPL-2.0

//! The demo pair's wire format, shared by `rdma_server` and `rdma_client`.
//!
//! Every message is one SEND of a [`Message`]: a 48-byte little-endian header followed by
//! up to [`MAX_TEXT`] bytes of text. Receive slots are [`SLOT_SIZE`] bytes.
//!
//! | offset | size | field                                              |
//! |--------|------|----------------------------------------------------|
//! | 0      | 4    | magic `0x3153_5252` ("RRS1")                       |
//! | 4      | 4    | kind (low byte), flags (next byte); see [`Kind`]    |
//! | 8      | 4    | sequence number, echoed by DONE                    |
//! | 12     | 4    | length: of the text (TEXT, ECHO), of the transfer   |
//! |        |      | (PING), of the scratch buffer (BENCH), or echoed   |
//! |        |      | (DONE)                                             |
//! | 16     | 8    | source address: client buffer the server READs     |
//! | 24     | 4    | source rkey                                        |
//! | 28     | 4    | source length                                      |
//! | 32     | 8    | sink address: client buffer the server WRITEs      |
//! | 40     | 4    | sink rkey                                          |
//! | 44     | 4    | sink length                                        |
//! | 48     | n    | text (TEXT) or payload (ECHO)                      |
//!
//! DONE answering BENCH carries the server's scratch buffer in its sink field.
//!
//! A BENCH with [`FLAG_DUPLEX`] (krping's `duplex`) also asks the server to WRITE
//! `length` bytes into the client's sink `source.len` times, `source.rkey` WRITEs in
//! flight (at most [`MAX_DUPLEX_DEPTH`]); `source.addr` is 0. The server answers with two
//! DONEs: the first advertises its scratch buffer, the second, with [`FLAG_DUPLEX`], says
//! its WRITEs have all completed.

#![forbid(unsafe_code)]

use crate::rdma::{code, RemoteBuf};
use kernel::prelude::*;

/// Identifies the protocol and its version.
pub(crate) const MAGIC: u32 = 0x3153_5252;
/// Bytes of header before the text.
pub(crate) const HEADER_SIZE: usize = 48;
/// The longest text a TEXT message carries.
pub(crate) const MAX_TEXT: usize = 1024;
/// The size of a receive slot: a header and the longest text.
pub(crate) const SLOT_SIZE: usize = HEADER_SIZE + MAX_TEXT;

/// What a message asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Client to server: store the text, READ it from `source`, WRITE it to `sink`.
    Text = 1,
    /// Server to client: the reply (of `length` bytes) is in the sink.
    Done = 2,
    /// Client to server: READ `length` bytes from `source`, WRITE them to `sink` (krping's
    /// loop); flags may ask for [`FLAG_SERVER_INVALIDATE`] and [`FLAG_READ_INVALIDATE`].
    Ping = 3,
    /// Client to server: register a scratch buffer of `length` bytes for the client's RDMA
    /// READs and WRITEs (debugfs `bench`); DONE advertises it in its sink field.
    Bench = 4,
    /// Client to server: answer DONE at once (the SEND latency benchmark); `length` bytes of
    /// payload follow the header and are ignored.
    Echo = 5,
}

/// PING flag: answer with SEND_WITH_INV of the sink's rkey.
pub(crate) const FLAG_SERVER_INVALIDATE: u8 = 1;

/// PING flag: READ into a server MR with RDMA_READ_WITH_INV (iWARP devices only).
pub(crate) const FLAG_READ_INVALIDATE: u8 = 2;

/// BENCH flag: the server WRITEs into the client's sink too (krping's `duplex`); on DONE:
/// the server's WRITEs of a duplex BENCH are complete.
pub(crate) const FLAG_DUPLEX: u8 = 4;

/// The most WRITEs the server keeps in flight for a duplex BENCH.
pub(crate) const MAX_DUPLEX_DEPTH: u32 = 8;

/// The most WRITEs a duplex BENCH may ask of the server.
pub(crate) const MAX_DUPLEX_COUNT: u32 = 100_000;

/// A remote buffer field that describes nothing.
const NO_BUFFER: RemoteBuf = RemoteBuf {
    addr: 0,
    rkey: 0,
    len: 0,
};

/// The largest PING transfer, as krping allows.
pub(crate) const MAX_PING: u32 = 4 << 20;

/// Pages the largest RDMA READ or WRITE spans (`MAX_PING` bytes, anywhere in a buffer):
/// what each side's QP sizes its `rdma_rw` resources for.
pub(crate) const MAX_TRANSFER_PAGES: u32 = MAX_PING.div_ceil(kernel::page::PAGE_SIZE as u32) + 1;

/// A decoded message header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Message {
    /// What the message asks for.
    pub(crate) kind: Kind,
    /// `FLAG_*` bits.
    pub(crate) flags: u8,
    /// Sequence number.
    pub(crate) seq: u32,
    /// Text or reply length.
    pub(crate) length: u32,
    /// The client's source buffer.
    pub(crate) source: RemoteBuf,
    /// The client's sink buffer.
    pub(crate) sink: RemoteBuf,
}

fn put_remote(out: &mut [u8], remote: &RemoteBuf) {
    out[0..8].copy_from_slice(&remote.addr.to_le_bytes());
    out[8..12].copy_from_slice(&remote.rkey.to_le_bytes());
    out[12..16].copy_from_slice(&remote.len.to_le_bytes());
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn remote_at(bytes: &[u8], at: usize) -> RemoteBuf {
    let mut addr = [0u8; 8];
    addr.copy_from_slice(&bytes[at..at + 8]);
    RemoteBuf {
        addr: u64::from_le_bytes(addr),
        rkey: u32_at(bytes, at + 8),
        len: u32_at(bytes, at + 12),
    }
}

impl Message {
    /// A message of `kind` that advertises no buffers (ECHO, BENCH, most DONEs).
    pub(crate) fn new(kind: Kind, seq: u32, length: u32) -> Self {
        Self {
            kind,
            flags: 0,
            seq,
            length,
            source: NO_BUFFER,
            sink: NO_BUFFER,
        }
    }

    /// The 48-byte header.
    pub(crate) fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        let kind = self.kind as u32 | u32::from(self.flags) << 8;
        out[4..8].copy_from_slice(&kind.to_le_bytes());
        out[8..12].copy_from_slice(&self.seq.to_le_bytes());
        out[12..16].copy_from_slice(&self.length.to_le_bytes());
        put_remote(&mut out[16..32], &self.source);
        put_remote(&mut out[32..48], &self.sink);
        out
    }

    /// Decodes the header of a received message of `received` bytes; `EPROTO` for a short
    /// message, a wrong magic, an unknown kind, a TEXT or ECHO whose text did not all
    /// arrive, a PING or BENCH length out of range, or a duplex BENCH whose sink, count or
    /// depth is.
    pub(crate) fn decode(bytes: &[u8; HEADER_SIZE], received: usize) -> Result<Self> {
        if received < HEADER_SIZE || u32_at(bytes, 0) != MAGIC {
            return Err(code::eproto());
        }
        let kind_and_flags = u32_at(bytes, 4);
        let kind = match kind_and_flags & 0xff {
            1 => Kind::Text,
            2 => Kind::Done,
            3 => Kind::Ping,
            4 => Kind::Bench,
            5 => Kind::Echo,
            _ => return Err(code::eproto()),
        };
        if kind_and_flags >> 16 != 0 {
            return Err(code::eproto());
        }
        let message = Self {
            kind,
            flags: (kind_and_flags >> 8) as u8,
            seq: u32_at(bytes, 8),
            length: u32_at(bytes, 12),
            source: remote_at(bytes, 16),
            sink: remote_at(bytes, 32),
        };
        let bad_length = match kind {
            Kind::Text | Kind::Echo => {
                message.length as usize > MAX_TEXT
                    || HEADER_SIZE + message.length as usize > received
            }
            Kind::Ping => {
                message.length == 0
                    || message.length > MAX_PING
                    || message.source.len < message.length
                    || message.sink.len < message.length
            }
            Kind::Bench => {
                message.length == 0
                    || message.length > MAX_PING
                    || (message.flags & FLAG_DUPLEX != 0
                        && (message.sink.len < message.length
                            || message.source.addr != 0
                            || !(1..=MAX_DUPLEX_COUNT).contains(&message.source.len)
                            || !(1..=MAX_DUPLEX_DEPTH).contains(&message.source.rkey)))
            }
            Kind::Done => false,
        };
        if bad_length {
            return Err(code::eproto());
        }
        Ok(message)
    }
}
