// SPDX-License-Identifier: GPL-2.0

//! The client's messages to the server: the `send` round trip, a request and its answers,
//! and the invalidation of what a request advertised (or the connection's end, when that
//! cannot be done).

#![forbid(unsafe_code)]

use super::{Inbox, Link, Outcome, Patience, Session, Tag};
use crate::protocol::{Kind, Message, HEADER_SIZE, MAX_TEXT};
use crate::rdma::{access, code, Mr, SendOp};
use core::sync::atomic::Ordering::Relaxed;
use kernel::{
    prelude::*,
    sync::Arc,
    time::{Instant, Monotonic},
};

impl Session {
    /// The `send` round trip: SEND `text` with the keys of the source (holding the text) and
    /// the sink; the server READs the source, WRITEs it to the sink and SENDs DONE. The
    /// reply is then read from the sink.
    pub(crate) fn send(this: &Arc<Self>, text: &[u8]) -> Result {
        if text.is_empty() || text.len() > MAX_TEXT {
            pr_err!(
                "send: the text must be 1 to {} bytes, not {}\n",
                MAX_TEXT,
                text.len()
            );
            return Err(EINVAL);
        }
        let _operation = this.operation.lock();
        let guard = this.link.lock();
        let link = guard.as_ref().ok_or_else(code::enotconn)?;
        let len = text.len() as u32;
        link.source.copy_in(0, text)?;
        link.sink.fill(0, MAX_TEXT, 0)?;
        Self::register(
            this,
            link,
            &link.source_mr,
            &link.source,
            len,
            access::REMOTE_READ,
            Tag::RegisterSource,
        )?;
        let sink_access = access::LOCAL_WRITE | access::REMOTE_WRITE;
        let result = Self::register(
            this,
            link,
            &link.sink_mr,
            &link.sink,
            len,
            sink_access,
            Tag::RegisterSink,
        )
        .and_then(|()| Self::exchange(this, link, text));
        let cleanup = Self::invalidate(this, link, [&link.source_mr, &link.sink_mr]);
        result.and(cleanup)
    }

    /// Invalidates whichever of the source and sink MRs `mrs` are still registered, so their
    /// keys stop working before the buffers are used again. If that fails, the connection
    /// is abandoned (the MRs cannot be trusted any more).
    pub(super) fn invalidate(this: &Arc<Self>, link: &Link, mrs: [&Mr; 2]) -> Result {
        for (mr, tag) in mrs
            .into_iter()
            .zip([Tag::InvalidateSource, Tag::InvalidateSink])
        {
            Self::invalidate_one(this, link, mr, tag)?;
        }
        Ok(())
    }

    /// Invalidates `mr` under `tag` if it is still registered; as [`Session::invalidate`].
    pub(super) fn invalidate_one(this: &Arc<Self>, link: &Link, mr: &Mr, tag: Tag) -> Result {
        if !mr.is_valid() || this.inbox.lock().disconnected {
            return Ok(());
        }
        let invalidated = Self::post(this, link, SendOp::Invalidate { mr }, tag)
            .and_then(|()| this.completed(link, tag, "local invalidate"));
        if let Err(e) = invalidated {
            Self::abandon(this, link, "cannot invalidate a registration", e);
            return Err(e);
        }
        Ok(())
    }

    /// Gives up on the connection in the middle of an operation: disconnects and drains the
    /// QP, so the server cannot reach any buffer it was given and every posted request has
    /// completed before the caller frees anything, then queues the release.
    pub(super) fn abandon(this: &Arc<Self>, link: &Link, why: &str, e: Error) {
        pr_err!(
            "session {}: {} ({:?}); disconnecting\n",
            this.number,
            why,
            e
        );
        link.id.shut_down();
        this.inbox.lock().disconnected = true;
        let _ = this.queue.enqueue(this.clone());
    }

    fn exchange(this: &Arc<Self>, link: &Link, text: &[u8]) -> Result {
        let seq = this.seq.fetch_add(1, Relaxed);
        let message = Message {
            kind: Kind::Text,
            flags: 0,
            seq,
            length: text.len() as u32,
            source: link.source_mr.remote()?,
            sink: link.sink_mr.remote()?,
        };
        let (done, _, _) = Self::request(this, link, &message, text)?;
        if done.length as usize > MAX_TEXT {
            pr_err!("send: unexpected answer from the server\n");
            return Err(code::eproto());
        }
        let mut reply = this.reply.lock();
        reply.clear();
        reply.resize(done.length as usize, 0, GFP_KERNEL)?;
        link.sink.copy_out(0, &mut reply)?;
        this.served.fetch_add(1, Relaxed);
        this.served_bytes.fetch_add(done.length.into(), Relaxed);
        Ok(())
    }

    /// SENDs `message` followed by `payload`, waits for the SEND to complete and for the
    /// server's DONE, and re-posts the receive. Returns DONE, what its receive's completion
    /// reported, and when DONE arrived.
    pub(super) fn request(
        this: &Arc<Self>,
        link: &Link,
        message: &Message,
        payload: &[u8],
    ) -> Result<(Message, Outcome, Instant<Monotonic>)> {
        let seq = message.seq;
        link.send.copy_in(0, &message.encode())?;
        link.send.copy_in(HEADER_SIZE, payload)?;
        let total = (HEADER_SIZE + payload.len()) as u32;
        let local = link.id.dma_local(&link.send, 0, total)?;
        let send = SendOp::Send {
            local,
            invalidate: None,
        };
        Self::post(this, link, send, Tag::Send)?;
        if let Err(e) = this.completed(link, Tag::Send, "SEND") {
            Self::abandon(this, link, "no answer from the server", e);
            return Err(e);
        }
        this.send_messages.fetch_add(1, Relaxed);
        this.send_bytes.fetch_add(total.into(), Relaxed);
        Self::answer(this, link, seq, Patience::StepTimeout)
    }

    /// Waits for the server's next message, re-posts its receive, and returns it if it is
    /// DONE for `seq`, with what its receive's completion reported and when it arrived.
    pub(super) fn answer(
        this: &Arc<Self>,
        link: &Link,
        seq: u32,
        patience: Patience,
    ) -> Result<(Message, Outcome, Instant<Monotonic>)> {
        let waited = loop {
            match this.wait_completion(link, Inbox::take_received) {
                Err(e) if e == ETIMEDOUT && patience == Patience::UntilSignal => {}
                waited => break waited,
            }
        };
        let (slot, received) = match waited {
            Ok(received) => received,
            Err(e) => {
                // The server may still READ or WRITE the buffers this request advertised
                // (with `mem_mode=dma`, through the device-wide key).
                Self::abandon(this, link, "no answer from the server", e);
                return Err(e);
            }
        };
        let wc = received.outcome;
        if !wc.ok {
            pr_err!(
                "receive failed: {}\n",
                wc.status_name.to_str().unwrap_or("?")
            );
            return Err(EIO);
        }
        Self::post_recv(this, link, slot)?;
        let done = Message::decode(&received.header, wc.byte_len as usize)?;
        if done.kind != Kind::Done || done.seq != seq {
            pr_err!("unexpected answer from the server\n");
            return Err(code::eproto());
        }
        Ok((done, wc, received.arrived))
    }
}
