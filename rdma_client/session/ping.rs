// SPDX-License-Identifier: GPL-2.0

//! krping's `ping` on a session: the server READs the client's source and WRITEs its sink,
//! iteration after iteration, and the client checks what came back.

#![forbid(unsafe_code)]

use super::{Link, Session, Tag};
use crate::ping::{MemMode, PingOptions, VERBOSE_BYTES};
use crate::protocol::{Kind, Message, FLAG_READ_INVALIDATE, FLAG_SERVER_INVALIDATE};
use crate::rdma::{access, code, DmaBuf, Mr, RemoteBuf};
use core::sync::atomic::Ordering::Relaxed;
use kernel::{prelude::*, sync::Arc};

impl Session {
    /// krping's loop: per iteration the server READs `size` bytes from the client's source
    /// and WRITEs them to its sink; with `validate` the client compares the two.
    pub(crate) fn ping(this: &Arc<Self>, options: &PingOptions) -> Result {
        let _operation = this.operation.lock();
        let guard = this.link.lock();
        let link = guard.as_ref().ok_or_else(code::enotconn)?;
        let device = link.id.device().ok_or(ENODEV)?;
        let pd = link.id.pd().ok_or(ENODEV)?;
        let size = options.size;
        let global_rkey = pd.global_rkey();
        if options.mem_mode == MemMode::Dma && global_rkey.is_none() {
            pr_err!("ping: mem_mode=dma needs the client loaded with unsafe_global_rkey=1\n");
            return Err(EINVAL);
        }
        if options.read_inv && !device.can_read_with_invalidate() {
            pr_err!(
                "ping: read_inv needs RDMA READ with invalidate, which {} (RoCE/IB) lacks; use siw\n",
                device.name().to_str().unwrap_or("?")
            );
            return Err(code::eopnotsupp());
        }
        let source = DmaBuf::new(device, size as usize)?;
        let sink = DmaBuf::new(device, size as usize)?;
        let pages = source
            .pages(0, size as usize)
            .max(sink.pages(0, size as usize));
        let registers = options.mem_mode == MemMode::Reg || options.read_inv;
        if registers && pages > device.max_fast_reg_pages() {
            pr_err!(
                "ping: size={} needs {} pages per registration; {} allows {}\n",
                size,
                pages,
                device.name().to_str().unwrap_or("?"),
                device.max_fast_reg_pages()
            );
            return Err(EINVAL);
        }
        let (source_mr, sink_mr) = (Mr::new(pd, pages)?, Mr::new(pd, pages)?);
        for iteration in 0..options.count {
            if kernel::current!().signal_pending() {
                return Err(EINTR);
            }
            if options.fr {
                Self::register_only(this, link, [&source, &sink], [&source_mr, &sink_mr], size)?;
                continue;
            }
            source.fill_pattern(size as usize, iteration as u8)?;
            sink.fill(0, size as usize, 0)?;
            let result = Self::ping_once(
                this,
                link,
                options,
                iteration,
                [&source, &sink],
                [&source_mr, &sink_mr],
                global_rkey,
            );
            let cleanup = Self::invalidate(this, link, [&source_mr, &sink_mr]);
            result.and(cleanup)?;
            if options.verbose {
                log_data(iteration, &sink, size as usize)?;
            }
            this.served_bytes.fetch_add(size.into(), Relaxed);
            this.served.fetch_add(1, Relaxed);
        }
        pr_info!(
            "ping: {} iterations of {} bytes ({:?}{}{}{}{}) done\n",
            options.count,
            size,
            options.mem_mode,
            if options.validate { ", validated" } else { "" },
            if options.server_inv {
                ", server_inv"
            } else {
                ""
            },
            if options.read_inv { ", read_inv" } else { "" },
            if options.fr { ", fr" } else { "" }
        );
        Ok(())
    }

    /// `fr`: one iteration of the fast-registration loop: registers the source and the sink
    /// as a ping would, then invalidates both (what krping's `fr` test times).
    fn register_only(
        this: &Arc<Self>,
        link: &Link,
        bufs: [&DmaBuf; 2],
        mrs: [&Mr; 2],
        size: u32,
    ) -> Result {
        let registered = Self::register_both(this, link, bufs, mrs, size);
        let cleanup = Self::invalidate(this, link, mrs);
        registered.and(cleanup)
    }

    /// Registers the source for the server's READ and the sink for its WRITE, `size` bytes
    /// each, with fast registrations (waiting for each to complete).
    fn register_both(
        this: &Arc<Self>,
        link: &Link,
        [source, sink]: [&DmaBuf; 2],
        [source_mr, sink_mr]: [&Mr; 2],
        size: u32,
    ) -> Result {
        let sink_access = access::LOCAL_WRITE | access::REMOTE_WRITE;
        Self::register(
            this,
            link,
            source_mr,
            source,
            size,
            access::REMOTE_READ,
            Tag::RegisterSource,
        )?;
        Self::register(
            this,
            link,
            sink_mr,
            sink,
            size,
            sink_access,
            Tag::RegisterSink,
        )
    }

    fn ping_once(
        this: &Arc<Self>,
        link: &Link,
        options: &PingOptions,
        iteration: u32,
        [source, sink]: [&DmaBuf; 2],
        [source_mr, sink_mr]: [&Mr; 2],
        global_rkey: Option<u32>,
    ) -> Result {
        let size = options.size;
        let (source_remote, sink_remote) = match (options.mem_mode, global_rkey) {
            (MemMode::Dma, Some(rkey)) => (
                RemoteBuf {
                    addr: source.dma_addr(0),
                    rkey,
                    len: size,
                },
                RemoteBuf {
                    addr: sink.dma_addr(0),
                    rkey,
                    len: size,
                },
            ),
            _ => {
                Self::register_both(this, link, [source, sink], [source_mr, sink_mr], size)?;
                (source_mr.remote()?, sink_mr.remote()?)
            }
        };
        let seq = this.seq.fetch_add(1, Relaxed);
        let message = Message {
            kind: Kind::Ping,
            flags: if options.server_inv {
                FLAG_SERVER_INVALIDATE
            } else {
                0
            } | if options.read_inv {
                FLAG_READ_INVALIDATE
            } else {
                0
            },
            seq,
            length: size,
            source: source_remote,
            sink: sink_remote,
        };
        if options.server_inv {
            // The DONE's receive notes the sink invalid if the server invalidated its key.
            this.inbox.lock().invalidatable = Some(sink_mr.clone());
        }
        let answer = Self::request(this, link, &message, &[]);
        // (unless the receive took it; dropped outside the lock)
        let watched = this.inbox.lock().invalidatable.take();
        drop(watched);
        let (done, outcome, _) = answer?;
        if done.length != size {
            pr_err!(
                "ping: the server answered {} bytes, not {}\n",
                done.length,
                size
            );
            return Err(code::eproto());
        }
        match (options.server_inv, outcome.invalidated_rkey) {
            (true, Some(_)) if outcome.watched_invalidated => {}
            (true, Some(rkey)) => {
                pr_err!(
                    "ping: the server invalidated rkey {:#x}, not the sink's\n",
                    rkey
                );
                return Err(code::eproto());
            }
            (true, None) => {
                pr_err!("ping: server_inv asked, but the server did not invalidate\n");
                return Err(code::eproto());
            }
            (false, Some(rkey)) => {
                pr_err!("ping: the server invalidated rkey {:#x} unasked\n", rkey);
                return Err(code::eproto());
            }
            (false, None) => {}
        }
        if options.validate {
            if let Some(offset) = sink.first_difference(source, size as usize)? {
                pr_err!(
                    "ping: validation failed in iteration {} at offset {}\n",
                    iteration,
                    offset
                );
                return Err(EIO);
            }
        }
        Ok(())
    }
}

/// `verbose`: logs the first bytes of what iteration `iteration` brought back into `sink`
/// (`size` bytes), in hex (krping prints them as text; ours are a byte pattern).
fn log_data(iteration: u32, sink: &DmaBuf, size: usize) -> Result {
    let mut data = [0u8; VERBOSE_BYTES];
    let shown = size.min(VERBOSE_BYTES);
    sink.copy_out(0, &mut data[..shown])?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b' '; VERBOSE_BYTES * 3];
    for (i, byte) in data[..shown].iter().enumerate() {
        text[i * 3 + 1] = HEX[usize::from(byte >> 4)];
        text[i * 3 + 2] = HEX[usize::from(byte & 0xf)];
    }
    let text = core::str::from_utf8(&text[..shown * 3]).map_err(|_| EINVAL)?;
    pr_info!(
        "ping: iteration {}: {} bytes back, the first {}:{}\n",
        iteration,
        size,
        shown,
        text
    );
    Ok(())
}
