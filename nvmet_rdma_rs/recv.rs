// SPDX-License-Identifier: GPL-2.0

//! Receive slots: where command capsules (and their in-capsule data) land.
//!
//! A queue has slots of its own, posted on its QP, one per command the host may send; or,
//! with `use_srq`, it shares the slots of a shared receive queue with the other queues of
//! its device and completion vector (see `srq`). Either way the slots are allocated
//! once, never move (the C side points into them), and a completion runs its slot's
//! [`CqeHandler`].

// Still holds `unsafe`: lifecycle and slot-ownership promises the binding layers cannot
// check yet (issue 15; Documentation/nvmet-rdma-rs.md, "Where `unsafe` lives").
#![allow(unsafe_code)]

use crate::rdma::{
    cqe::impl_has_cqe,
    qp_handle::{QpHandle, Range, RecvWr},
    CmHandler, CmId, Cqe, Device, DmaBuf, QpCqeHandler, Srq,
};
use crate::wire::COMMAND_SIZE;
use kernel::{
    prelude::*,
    sync::{Arc, SetOnce},
};

/// One receive slot.
#[repr(C)]
pub(crate) struct CmdSlot {
    cqe: Cqe<CmdSlot>,
    /// The receive into the slot's capsule (and in-capsule data), made once the slot is
    /// in place ([`RecvSlots::prepare_on_qp`], [`RecvSlots::prepare_shared`]).
    wr: SetOnce<RecvWr>,
    /// The slot's number in its [`RecvSlots`].
    pub(crate) index: u32,
}

impl_has_cqe!(CmdSlot, cqe);

/// A set of receive slots, their capsule buffers and in-capsule data buffers.
///
/// # Invariants
///
/// Slots never move; their work requests point into them and into the buffers, which live
/// as long as the set. Shared slots are posted on `srq`. Every QP on that SRQ belongs to a
/// queue that holds this set (through its `Io`) and destroys its QP before it lets the set
/// go, so when the set drops, no QP can consume its receives and its `Arc<Srq>` is the
/// last one: the SRQ is destroyed (field order: first) before the buffers its receives
/// point to are freed.
pub(crate) struct RecvSlots {
    srq: Option<Arc<Srq>>,
    capsules: DmaBuf,
    /// Per slot: its in-capsule data buffer (none when `inline_size` is 0).
    inline: KVec<DmaBuf>,
    inline_size: u32,
    /// (`kvmalloc`ed: an SRQ's are many pages.)
    cmds: KVVec<CmdSlot>,
    /// The key the buffers are registered with.
    lkey: u32,
}

impl RecvSlots {
    /// `count` slots on `device` with `inline_size` bytes of in-capsule data each,
    /// registered with `lkey`; posted on `srq` if given, else on the QP of the queue that
    /// owns them. (Their completions find their queue through the QP they arrive on.)
    pub(crate) fn new(
        device: &Device,
        lkey: u32,
        count: u32,
        inline_size: u32,
        srq: Option<Arc<Srq>>,
    ) -> Result<Self> {
        let capsules = DmaBuf::new(device, count as usize * COMMAND_SIZE)?;
        let mut inline = KVec::new();
        if inline_size > 0 {
            inline.reserve(count as usize, GFP_KERNEL)?;
            for _ in 0..count {
                inline.push(
                    DmaBuf::new_page_aligned(device, inline_size as usize)?,
                    GFP_KERNEL,
                )?;
            }
        }
        let mut cmds = KVVec::with_capacity(count as usize, GFP_KERNEL)?;
        for index in 0..count {
            cmds.push(
                CmdSlot {
                    cqe: Cqe::on_qp(),
                    wr: SetOnce::new(),
                    index,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            srq,
            capsules,
            inline,
            inline_size,
            cmds,
            lkey,
        })
    }

    /// The ranges slot `index` receives into: its capsule, and its in-capsule data.
    fn ranges(&self, index: usize) -> (Range<'_>, Option<Range<'_>>) {
        let capsule = Range {
            buf: &self.capsules,
            offset: index * COMMAND_SIZE,
            len: COMMAND_SIZE as u32,
        };
        let data = self.inline.get(index).map(|buf| Range {
            buf,
            offset: 0,
            len: self.inline_size,
        });
        (capsule, data)
    }

    /// Makes the receives of a queue's own slots, on the QP of `id`, whose handler holds
    /// the set where `find` finds it (so that the slots live as long as the QP's
    /// completions can reach them).
    pub(crate) fn prepare_on_qp<Q>(
        &self,
        id: &CmId<Q>,
        find: impl for<'a> Fn(&'a Q) -> Option<&'a RecvSlots>,
    ) -> Result
    where
        Q: CmHandler,
        CmdSlot: QpCqeHandler<Connection = Q>,
    {
        for cmd in self.cmds.iter() {
            let index = cmd.index as usize;
            let (capsule, data) = self.ranges(index);
            let wr = id.recv_wr(
                |queue| find(queue)?.cmds.get(index).map(|cmd| &cmd.cqe),
                capsule,
                data,
            )?;
            if !cmd.wr.populate(wr) {
                return Err(EBUSY);
            }
        }
        Ok(())
    }

    /// Makes the receives of an SRQ's slots, on the set's SRQ.
    pub(crate) fn prepare_shared(&self) -> Result {
        let srq = self.srq.as_ref().ok_or(EINVAL)?;
        for cmd in self.cmds.iter() {
            let (capsule, data) = self.ranges(cmd.index as usize);
            // SAFETY: the slots never move and live as long as the set, with the buffers
            // (type invariant); the SRQ is destroyed before they are freed, and only
            // queues' QPs (of `CmId<Queue>`s, as `Cqe::on_qp` asks) take from it.
            let wr = unsafe { srq.recv_wr_unchecked(&cmd.cqe, self.lkey, capsule, data)? };
            if !cmd.wr.populate(wr) {
                return Err(EBUSY);
            }
        }
        Ok(())
    }

    /// Slots in the set.
    pub(crate) fn count(&self) -> u32 {
        self.cmds.len() as u32
    }

    /// The SRQ the slots belong to.
    ///
    /// # Panics
    ///
    /// If they are a queue's own; only the SRQ sets (`srq.rs`) hand out shared sets.
    pub(crate) fn srq(&self) -> &Arc<Srq> {
        self.srq.as_ref().expect("an SRQ's receive slots")
    }

    /// Whether the slots belong to an SRQ.
    pub(crate) fn is_shared(&self) -> bool {
        self.srq.is_some()
    }

    /// The capsule buffer (slot `i`'s command at `i * COMMAND_SIZE`).
    pub(crate) fn capsules(&self) -> &DmaBuf {
        &self.capsules
    }

    /// Slot `index`'s in-capsule data buffer, if the slots have one.
    pub(crate) fn inline_data(&self, index: u32) -> Option<&DmaBuf> {
        self.inline.get(index as usize)
    }

    /// Posts shared slot `index` on the set's SRQ; `EINVAL` for a queue's own slots.
    pub(crate) fn post_shared(&self, index: u32) -> Result {
        if self.srq.is_none() {
            return Err(EINVAL);
        }
        self.post_slot(None, index)
    }

    /// Posts slot `index` (again): on the SRQ, or on `qp`, the owning queue's QP.
    pub(crate) fn post(&self, qp: &QpHandle, index: u32) -> Result {
        self.post_slot(Some(qp), index)
    }

    fn post_slot(&self, qp: Option<&QpHandle>, index: u32) -> Result {
        let slot = self.cmds.get(index as usize).ok_or(EINVAL)?;
        let at = index as usize * COMMAND_SIZE;
        self.capsules.sync_range_for_device(at, COMMAND_SIZE);
        if let Some(data) = self.inline.get(index as usize) {
            data.sync_range_for_device(0, self.inline_size as usize);
        }
        let wr = slot.wr.as_ref().ok_or(EINVAL)?;
        match (&self.srq, qp) {
            (Some(srq), _) => srq.post(wr),
            (None, Some(qp)) => qp.post_recv(wr),
            (None, None) => Err(EINVAL),
        }
    }
}
