// SPDX-License-Identifier: GPL-2.0

//! krping's `bench` on a session: many SENDs or RDMA READs/WRITEs in flight, timed.

#![forbid(unsafe_code)]

use super::{BenchProgress, Link, Patience, Session, Tag};
use crate::bench::{BenchOptions, BenchResult, Mode};
use crate::protocol::{Kind, Message, FLAG_DUPLEX, MAX_DUPLEX_DEPTH, MAX_TEXT};
use crate::rdma::{access, code, DmaBuf, Mr, RemoteBuf, SendOp};
use core::sync::atomic::Ordering::Relaxed;
use kernel::{
    fmt,
    prelude::*,
    sync::Arc,
    time::{Instant, Monotonic},
};

impl Session {
    /// debugfs `bench`: runs one benchmark; its result is read back from `bench`.
    pub(crate) fn bench(this: &Arc<Self>, options: &BenchOptions) -> Result {
        let _operation = this.operation.lock();
        let guard = this.link.lock();
        let link = guard.as_ref().ok_or_else(code::enotconn)?;
        let options = &options.fit(link.txdepth)?;
        *this.bench_result.lock() = None;
        let device = link.id.device().ok_or(ENODEV)?;
        let size = options.size;
        let buf = DmaBuf::new(device, size as usize)?;
        if options.mode != Mode::Slat && buf.pages(0, size as usize) > device.max_fast_reg_pages() {
            pr_err!(
                "bench: size={} is more than one {} registration maps\n",
                size,
                device.name().to_str().unwrap_or("?")
            );
            return Err(EINVAL);
        }
        let samples = KVVec::with_capacity(options.count as usize, GFP_KERNEL)?;
        let run = {
            let mut inbox = this.inbox.lock();
            let run = inbox.bench.run.wrapping_add(1);
            inbox.bench = BenchProgress {
                run,
                completed: 0,
                failed: None,
                samples,
            };
            run
        };
        let start = Instant::<Monotonic>::now();
        let outcome = if options.mode == Mode::Slat {
            Self::bench_send(this, link, options)
        } else {
            Self::bench_rdma(this, link, options, &buf, run)
        };
        let elapsed = start.elapsed().as_nanos() as u64;
        let mut samples = core::mem::take(&mut this.inbox.lock().bench.samples);
        outcome?;
        let result = BenchResult::new(*options, &mut samples, elapsed);
        pr_info!(
            "bench: {:?} size={} count={} depth={}: median {} ns, {} ops/s\n",
            options.mode,
            size,
            options.count,
            options.depth,
            result.latency[1],
            result.ops_per_second()
        );
        *this.bench_result.lock() = Some(result);
        Ok(())
    }

    /// `slat`: SEND `size` bytes, await DONE; one sample per round trip.
    fn bench_send(this: &Arc<Self>, link: &Link, options: &BenchOptions) -> Result {
        let payload = [0u8; MAX_TEXT];
        for _ in 0..options.count {
            if kernel::current!().signal_pending() {
                return Err(EINTR);
            }
            let seq = this.seq.fetch_add(1, Relaxed);
            let message = Message::new(Kind::Echo, seq, options.size);
            let posted = Instant::<Monotonic>::now();
            let (_, _, arrived) =
                Self::request(this, link, &message, &payload[..options.size as usize])?;
            let nanos = (arrived - posted).as_nanos() as u64;
            this.inbox.lock().bench.samples.push(nanos, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// `wlat`, `rlat`, `bw`: RDMA WRITEs or READs against the server's scratch buffer,
    /// `depth` at a time; with `duplex`, the server WRITEs into a sink of the client's
    /// meanwhile, and the run ends with its second DONE.
    fn bench_rdma(
        this: &Arc<Self>,
        link: &Link,
        options: &BenchOptions,
        buf: &DmaBuf,
        run: u32,
    ) -> Result {
        let seq = this.seq.fetch_add(1, Relaxed);
        let mut request = Message::new(Kind::Bench, seq, options.size);
        let duplex_sink = if options.duplex {
            let sink = Self::duplex_sink(this, link, options.size)?;
            request.flags = FLAG_DUPLEX;
            request.sink = sink.remote()?;
            request.source = RemoteBuf {
                addr: 0,
                rkey: options.depth.min(MAX_DUPLEX_DEPTH),
                len: options.count,
            };
            Some(sink)
        } else {
            None
        };
        let ran = Self::request(this, link, &request, &[])
            .and_then(|(done, _, _)| Self::post_all(this, link, options, buf, run, &done));
        let Some(sink) = duplex_sink else {
            return ran;
        };
        // The server's second DONE: its WRITEs into the sink have all completed. Until then
        // it may write there, so a run that ends before it (from the BENCH on) abandons the
        // connection. The server keeps fewer WRITEs in flight than the client may, so it
        // may finish well after the client: its DONE is awaited until a signal.
        let finished = ran
            .and_then(|()| Self::answer(this, link, seq, Patience::UntilSignal))
            .and_then(|(done, _, _)| {
                if done.flags & FLAG_DUPLEX == 0 {
                    pr_err!("bench: the server did not confirm its duplex WRITEs\n");
                    return Err(code::eproto());
                }
                Ok(())
            });
        if let Err(e) = finished {
            if !this.inbox.lock().disconnected {
                Self::abandon(
                    this,
                    link,
                    "the server may still WRITE into the duplex sink",
                    e,
                );
            }
            return Err(e);
        }
        Self::invalidate_one(this, link, &sink, Tag::InvalidateSink)
    }

    /// Posts the run's `count` READs or WRITEs against the scratch buffer `done`
    /// advertised, `depth` in flight, and waits for the last.
    fn post_all(
        this: &Arc<Self>,
        link: &Link,
        options: &BenchOptions,
        buf: &DmaBuf,
        run: u32,
        done: &Message,
    ) -> Result {
        let remote = done.sink;
        if done.kind != Kind::Done || remote.len < options.size {
            pr_err!("bench: the server advertised no usable scratch buffer\n");
            return Err(code::eproto());
        }
        let qp = link.id.qp().ok_or(EINVAL)?;
        let mut posted = 0;
        while posted < options.count {
            if kernel::current!().signal_pending() {
                return Err(EINTR);
            }
            this.wait_bench(link, posted - (options.depth - 1).min(posted))?;
            let local = link.id.dma_local(buf, 0, options.size)?;
            let op = match options.mode {
                Mode::Rlat => SendOp::Read {
                    local,
                    remote,
                    invalidate: None,
                },
                _ => SendOp::Write { local, remote },
            };
            let session = this.clone();
            let start = Instant::<Monotonic>::now();
            qp.post_send(op, move |wc| {
                let nanos = start.elapsed().as_nanos() as u64;
                let mut inbox = session.inbox.lock();
                let bench = &mut inbox.bench;
                if bench.run != run {
                    return;
                }
                bench.completed += 1;
                if !wc.is_ok() {
                    bench.failed.get_or_insert(wc.into());
                } else if bench.samples.len() < bench.samples.capacity() {
                    // Within the reserved capacity: no allocation.
                    let _ = bench.samples.push(nanos, GFP_ATOMIC);
                }
                drop(inbox);
                session.changed.notify_all();
            })?;
            posted += 1;
        }
        this.wait_bench(link, options.count)
    }

    /// The sink of the server's duplex WRITEs: `size` bytes registered for remote writes.
    fn duplex_sink(this: &Arc<Self>, link: &Link, size: u32) -> Result<Mr> {
        let device = link.id.device().ok_or(ENODEV)?;
        let pd = link.id.pd().ok_or(ENODEV)?;
        let buf = DmaBuf::new(device, size as usize)?;
        let mr = Mr::new(pd, buf.pages(0, size as usize))?;
        let access = access::LOCAL_WRITE | access::REMOTE_WRITE;
        Self::register(this, link, &mr, &buf, size, access, Tag::RegisterSink)?;
        Ok(mr)
    }

    /// Waits until at least `completed` operations of the running benchmark completed;
    /// `EIO` (with the status in the log) if one failed. The step's timeout runs from the
    /// last completion: `depth` large transfers in flight on a slow link may together
    /// take longer than it, each making progress.
    fn wait_bench(&self, link: &Link, completed: u32) -> Result {
        let failed = loop {
            let before = self.inbox.lock().bench.completed;
            let waited = self.wait_completion(link, |inbox| {
                let bench = &mut inbox.bench;
                match bench.failed.take() {
                    Some(wc) => Some(Some(wc)),
                    None => (bench.completed >= completed).then_some(None),
                }
            });
            match waited {
                Err(e) if e == ETIMEDOUT && self.inbox.lock().bench.completed > before => {}
                waited => break waited?,
            }
        };
        if let Some(wc) = failed {
            pr_err!(
                "bench: work request failed: {} (status {})\n",
                wc.status_name.to_str().unwrap_or("?"),
                wc.status
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// debugfs `bench`: the last run's results.
    pub(crate) fn show_bench(this: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*this.bench_result.lock() {
            Some(result) => write!(f, "{}", result),
            None => writeln!(f, "no results (write options to run a benchmark)"),
        }
    }
}
