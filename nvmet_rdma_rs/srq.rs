// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: the `use_srq` and `srq_size` module parameters, with the C
//! transport's meaning and limits. With `use_srq=1`, the queues of a device take their
//! commands from SRQs instead of receive queues of their own: one SRQ per completion
//! vector (at most the device's `max_srq`), `srq_size` receives deep (at most its
//! `max_srq_wr`); a queue uses the SRQ of its completion vector. The SRQs of a device are
//! made with its first queue and go with its last one. A device without SRQs serves its
//! queues with their own receive queues, as the C transport does.
//!
//! (Unlike the C transport, whose device state takes the in-capsule size of the port that
//! made it, ports with different in-capsule sizes get SRQs of their own, so no host is
//! told it may send more than a shared slot holds.)

#![forbid(unsafe_code)]

use crate::rdma::{Device, Pd};
use crate::recv::{SharedSlots, SlotSet};
use kernel::{prelude::*, sync::Arc};

// (Declared in the crate root, with the other uses of `unsafe` the parameters' macros
// expand.)
pub(crate) use crate::{srq_size, use_srq};

/// The SRQs of one device for one in-capsule size.
pub(crate) struct SrqSet {
    /// The device, as an address: only compared.
    device: usize,
    inline_size: u32,
    /// One per completion vector; empty if the device has no SRQs.
    srqs: KVec<Arc<SharedSlots>>,
}

impl SrqSet {
    /// Makes the SRQs of `device` for `inline_size` bytes of in-capsule data, all their
    /// receives posted.
    pub(crate) fn new(device: &Device, inline_size: u32) -> Result<Self> {
        let mut set = Self {
            device: device.as_raw() as usize,
            inline_size,
            srqs: KVec::new(),
        };
        let (max_srq, max_srq_wr) = device.srq_limits();
        let name = device.name().to_str().unwrap_or("?");
        if max_srq == 0 || max_srq_wr == 0 {
            pr_info!("SRQ requested but not supported by {}\n", name);
            return Ok(set);
        }
        let count = device.completion_vectors().min(max_srq);
        let size = (srq_size.get() as u32).min(max_srq_wr);
        let pd = Pd::new(device, None)?;
        for _ in 0..count {
            let srq = SlotSet::shared(device, &pd, size, inline_size)?;
            set.srqs.push(srq, GFP_KERNEL)?;
        }
        // (debug only: made with a device's first queue, it comes and goes with them)
        pr_debug!(
            "{}: {} SRQ(s) of {} receives ({} bytes in-capsule)\n",
            name,
            count,
            size,
            inline_size
        );
        Ok(set)
    }

    /// Whether the set serves `device` for `inline_size`.
    pub(crate) fn serves(&self, device: &Device, inline_size: u32) -> bool {
        self.device == device.as_raw() as usize && self.inline_size == inline_size
    }

    /// Whether the set belongs to `device` (an address, as a queue keeps it).
    pub(crate) fn is_on(&self, device: usize) -> bool {
        self.device == device
    }

    /// The SRQ for completion vector `vector`, if the device has SRQs.
    pub(crate) fn for_vector(&self, vector: u32) -> Option<Arc<SharedSlots>> {
        let count = self.srqs.len();
        (count > 0).then(|| self.srqs[vector as usize % count].clone())
    }
}
