// SPDX-License-Identifier: GPL-2.0

//! The server's side of krping's `ping` and `bench`: RDMA READ of the client's source
//! (through an MR registered for it with `read_inv`), RDMA WRITE to its sink, then DONE;
//! a duplex BENCH's own WRITEs.

#![forbid(unsafe_code)]

use super::{Answer, Connection, Link, Registered};
use crate::protocol::{Kind, Message, FLAG_DUPLEX, FLAG_READ_INVALIDATE, FLAG_SERVER_INVALIDATE};
use crate::rdma::{access, DmaBuf, Local, Mr, RemoteBuf, SendOp, WorkCompletion};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kernel::{prelude::*, sync::Arc};

/// The server's WRITEs of a duplex BENCH (krping's `duplex`): `message.source.len` of
/// `message.length` bytes from `buf` into the client's sink, at most `message.source.rkey`
/// in flight. Its completions run one at a time on the connection's CQ.
struct DuplexWrites {
    /// The BENCH, as decoded (its count, depth and sink checked).
    message: Message,
    /// The scratch buffer the WRITEs read.
    buf: DmaBuf,
    /// WRITEs posted, and completed.
    posted: AtomicU32,
    completed: AtomicU32,
}

impl Connection {
    /// A PING: READ the client's source into the PING buffer (with `read_inv`, through an
    /// MR registered for it first), then on to [`Self::source_read`].
    pub(super) fn ping(this: &Arc<Self>, link: &Link, slot: usize, message: Message) -> Result {
        let read_inv = message.flags & FLAG_READ_INVALIDATE != 0;
        let device = link.id.device().ok_or(ENODEV)?;
        if read_inv && !device.can_read_with_invalidate() {
            pr_err!(
                "connection {}: read_inv asked, but {} has no RDMA READ with invalidate\n",
                this.number,
                device.name().to_str().unwrap_or("?")
            );
            return Err(crate::rdma::code::eopnotsupp());
        }
        let mut ping = this.ping.lock();
        if ping
            .as_ref()
            .is_none_or(|(buf, _)| buf.len() < message.length as usize)
        {
            *ping = Some((DmaBuf::new(device, message.length as usize)?, None));
        }
        let Some((buf, mr)) = &mut *ping else {
            return Err(EINVAL);
        };
        let buf = buf.clone();
        if !read_inv {
            drop(ping);
            return Self::read_source(this, link, slot, message, buf, 0, None);
        }
        let mr = match mr {
            Some(mr) => mr.clone(),
            None => mr
                .insert(Mr::new(
                    link.id.pd().ok_or(ENODEV)?,
                    buf.pages(0, buf.len()),
                )?)
                .clone(),
        };
        drop(ping);
        mr.map(&buf, 0, message.length)?;
        let connection = this.clone();
        let registered = mr.clone();
        let qp = link.id.qp().ok_or(EINVAL)?;
        // iWARP writes READ responses through the sink's key: it needs remote write access.
        let access = access::LOCAL_WRITE | access::REMOTE_WRITE;
        qp.post_send(SendOp::Register { mr: &mr, access }, move |wc| {
            if !connection.check(wc, c"PING buffer registration") {
                return;
            }
            let guard = connection.lifecycle.link();
            let Some(link) = &*guard else {
                return;
            };
            let result =
                Self::read_source(&connection, link, slot, message, buf, 0, Some(registered));
            if let Err(e) = result {
                drop(guard);
                connection.abort("cannot read", e);
            }
        })
    }

    /// A BENCH: register a scratch buffer of `message.length` bytes for the client's READs
    /// and WRITEs, and advertise it in DONE once the registration completed. A duplex
    /// BENCH then WRITEs from that buffer into the client's sink ([`Self::duplex_write`]).
    pub(super) fn bench(this: &Arc<Self>, link: &Link, slot: usize, message: Message) -> Result {
        let scratch = Registered::new(link, message.length as usize)?;
        scratch.mr.map(&scratch.buf, 0, message.length)?;
        let mr = scratch.mr.clone();
        let duplex = if message.flags & FLAG_DUPLEX != 0 {
            Some(Arc::new(
                DuplexWrites {
                    message,
                    buf: scratch.buf.clone(),
                    posted: AtomicU32::new(0),
                    completed: AtomicU32::new(0),
                },
                GFP_KERNEL,
            )?)
        } else {
            None
        };
        // The previous scratch buffer, if any, is released here: its MR, with the last of
        // its clones (a completion may still hold one), which deregisters it, and then the
        // buffer it keeps.
        *this.scratch.lock() = Some(scratch);
        let connection = this.clone();
        let qp = link.id.qp().ok_or(EINVAL)?;
        let access = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
        let registered = mr.clone();
        qp.post_send(SendOp::Register { mr: &mr, access }, move |wc| {
            if !connection.check(wc, c"BENCH buffer registration") {
                return;
            }
            let guard = connection.lifecycle.link();
            let Some(link) = &*guard else {
                return;
            };
            let done = registered.remote().and_then(|remote| {
                let done = Message {
                    sink: remote,
                    ..Message::new(Kind::Done, message.seq, message.length)
                };
                let Some(writes) = &duplex else {
                    return Self::send_message(&connection, link, slot, &done, None, Answer::Last);
                };
                Self::send_message(&connection, link, slot, &done, None, Answer::More)?;
                let depth = message.source.rkey.min(message.source.len);
                (0..depth).try_for_each(|_| Self::duplex_write(&connection, link, slot, writes))
            });
            if let Err(e) = done {
                drop(guard);
                connection.abort("cannot answer BENCH", e);
            }
        })
    }

    /// Posts the next WRITE of a duplex BENCH: `length` bytes of the scratch buffer into
    /// the client's sink. Its completion posts the next, or after the last SENDs the
    /// second DONE, which re-posts the slot's receive.
    fn duplex_write(
        this: &Arc<Self>,
        link: &Link,
        slot: usize,
        writes: &Arc<DuplexWrites>,
    ) -> Result {
        let message = &writes.message;
        let qp = link.id.qp().ok_or(EINVAL)?;
        let local = link.id.dma_local(&writes.buf, 0, message.length)?;
        let remote = RemoteBuf {
            len: message.length,
            ..message.sink
        };
        let connection = this.clone();
        let next = writes.clone();
        writes.posted.fetch_add(1, Relaxed);
        qp.post_send(SendOp::Write { local, remote }, move |wc| {
            Self::duplex_written(connection, slot, next, wc)
        })
    }

    /// A WRITE of a duplex BENCH completed.
    fn duplex_written(
        this: Arc<Self>,
        slot: usize,
        writes: Arc<DuplexWrites>,
        wc: &WorkCompletion,
    ) {
        if !this.check(wc, c"duplex RDMA WRITE") {
            return;
        }
        let message = &writes.message;
        this.writes.add(message.length);
        let completed = writes.completed.fetch_add(1, Relaxed) + 1;
        let count = message.source.len;
        let guard = this.lifecycle.link();
        let Some(link) = &*guard else {
            return;
        };
        let result = if writes.posted.load(Relaxed) < count {
            Self::duplex_write(&this, link, slot, &writes)
        } else if completed == count {
            let done = Message {
                flags: FLAG_DUPLEX,
                ..Message::new(Kind::Done, message.seq, message.length)
            };
            Self::send_message(&this, link, slot, &done, None, Answer::Last)
        } else {
            Ok(())
        };
        if let Err(e) = result {
            drop(guard);
            this.abort("cannot go on with a duplex BENCH", e);
        }
    }

    /// RDMA READs `message.length` bytes from the client's source into `buf` at `offset`;
    /// with `mr` (registered over `buf`), as RDMA_READ_WITH_INV of it.
    pub(super) fn read_source(
        this: &Arc<Self>,
        link: &Link,
        slot: usize,
        message: Message,
        buf: DmaBuf,
        offset: usize,
        mr: Option<Mr>,
    ) -> Result {
        if message.source.len < message.length || message.sink.len < message.length {
            return Err(EINVAL);
        }
        let qp = link.id.qp().ok_or(EINVAL)?;
        let local = match &mr {
            Some(mr) => Local::registered(mr, &buf, offset, message.length),
            None => link.id.dma_local(&buf, offset, message.length)?,
        };
        let remote = RemoteBuf {
            len: message.length,
            ..message.source
        };
        let connection = this.clone();
        let target = buf.clone();
        qp.post_send(
            SendOp::Read {
                local,
                remote,
                invalidate: mr.as_ref(),
            },
            move |wc| Self::source_read(connection, slot, message, target, offset, wc),
        )
    }

    /// The READ completed: WRITE what was read into the sink, then SEND DONE (same QP, so
    /// the client sees the data before the DONE).
    fn source_read(
        this: Arc<Self>,
        slot: usize,
        message: Message,
        buf: DmaBuf,
        offset: usize,
        wc: &WorkCompletion,
    ) {
        if !this.check(wc, c"RDMA READ") {
            return;
        }
        this.reads.add(message.length);
        if message.kind == Kind::Ping && this.shared.corrupt_next.swap(false, Relaxed) {
            // The test hook: damage one byte, which the client's validation must catch.
            let mut byte = [0u8; 1];
            if buf.copy_out(offset, &mut byte).is_ok() {
                let _ = buf.copy_in(offset, &[byte[0] ^ 0xff]);
                pr_info!(
                    "connection {}: corrupted byte 0 of a PING as asked\n",
                    this.number
                );
            }
        }
        let guard = this.lifecycle.link();
        let Some(link) = &*guard else {
            return;
        };
        let result = (|| -> Result {
            let qp = link.id.qp().ok_or(EINVAL)?;
            let local = link.id.dma_local(&buf, offset, message.length)?;
            let connection = this.clone();
            let length = message.length;
            qp.post_send(
                SendOp::Write {
                    local,
                    remote: message.sink,
                },
                move |wc| {
                    if connection.check(wc, c"RDMA WRITE") {
                        connection.writes.add(length);
                    }
                },
            )?;
            let invalidate =
                (message.flags & FLAG_SERVER_INVALIDATE != 0).then_some(message.sink.rkey);
            Self::send_done(&this, link, slot, message.seq, message.length, invalidate)
        })();
        if let Err(e) = result {
            drop(guard);
            this.abort("cannot reply", e);
        }
    }
}
