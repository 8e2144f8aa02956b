// SPDX-License-Identifier: GPL-2.0

//! Receive slots: where command capsules (and their in-capsule data) land.
//!
//! A queue has slots of its own, posted on its QP, one per command the host may send; or,
//! with `use_srq`, it shares the slots of a shared receive queue with the other queues of
//! its device and completion vector (see `srq`), which the SRQ owns. Either way the slots
//! are allocated once, never move (the C side points into them), and a completion runs
//! its slot's [`QpRecvHandler`] with the queue of the QP it arrived on and the receive's
//! token ([`Received`]): the slot's buffers, which only that token posts again (with
//! [`RecvSlots::post`], once the command is done with them).

#![forbid(unsafe_code)]

use crate::rdma::{
    cqe::{impl_has_recv_cqe, QpRecvHandler, Received, RecvCqe},
    qp_handle::{OpenQp, QpHandle, Range, RecvWr},
    CmHandler, CmId, Device, DmaBuf, Pd, PublishOnce, Srq,
};
use crate::wire::COMMAND_SIZE;
use kernel::{prelude::*, sync::Arc};

/// One receive slot.
#[repr(C)]
pub(crate) struct CmdSlot {
    cqe: RecvCqe<CmdSlot>,
    /// The receive into the slot's capsule (and in-capsule data), made once the slot is
    /// in place ([`RecvSlots::prepare_on_qp`], [`SlotSet::shared`]).
    wr: PublishOnce<RecvWr>,
    /// The slot's number in its [`SlotSet`].
    pub(crate) index: u32,
}

impl_has_recv_cqe!(CmdSlot, cqe);

/// A set of receive slots, their capsule buffers and in-capsule data buffers.
///
/// (Slots never move: a queue's own set lives in the queue, an SRQ's in the SRQ; the
/// receives made for them hold their buffers.)
pub(crate) struct SlotSet {
    capsules: DmaBuf,
    /// Per slot: its in-capsule data buffer (none when `inline_size` is 0).
    inline: KVec<DmaBuf>,
    inline_size: u32,
    /// (`kvmalloc`ed: an SRQ's are many pages.)
    cmds: KVVec<CmdSlot>,
}

/// An SRQ and the slots its receives land in.
pub(crate) type SharedSlots = Srq<SlotSet, CmdSlot>;

impl SlotSet {
    /// `count` slots on `device` with `inline_size` bytes of in-capsule data each.
    fn new(device: &Device, count: u32, inline_size: u32) -> Result<Self> {
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
                    cqe: RecvCqe::new(),
                    wr: PublishOnce::new(),
                    index,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            capsules,
            inline,
            inline_size,
            cmds,
        })
    }

    /// An SRQ on `pd` (of `device`) of `count` slots with `inline_size` bytes of
    /// in-capsule data each, its receives made and posted.
    pub(crate) fn shared(
        device: &Device,
        pd: &Arc<Pd>,
        count: u32,
        inline_size: u32,
    ) -> Result<Arc<SharedSlots>> {
        let sges = if inline_size > 0 { 2 } else { 1 };
        let srq = Srq::new(pd, count, sges, Self::new(device, count, inline_size)?)?;
        let set = srq.contents();
        for cmd in set.cmds.iter() {
            let index = cmd.index as usize;
            let (wr, received) = srq.recv_wr(|set| set.bound(index))?;
            if !cmd.wr.populate(wr) {
                return Err(EBUSY);
            }
            post_shared(&srq, cmd.index, true, received)?;
        }
        Ok(srq)
    }

    /// Slot `index` and the ranges it receives into: its capsule, and its in-capsule
    /// data; `None` past the last slot.
    fn bound(&self, index: usize) -> Option<(&CmdSlot, Range<'_>, Option<Range<'_>>)> {
        let slot = self.cmds.get(index)?;
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
        Some((slot, capsule, data))
    }

    /// Slot `index`'s receive, handed to the device: its capsule synced for it, and its
    /// in-capsule data buffer if `data_taken` (the CPU took it).
    #[inline]
    fn to_device(&self, index: u32, data_taken: bool) -> Result<&RecvWr> {
        let slot = self.cmds.get(index as usize).ok_or(EINVAL)?;
        // (one check for the set: its buffers are mapped for one device, which needs syncs
        // for all of them or for none; rxe and siw need none)
        if self.capsules.needs_sync() {
            let at = index as usize * COMMAND_SIZE;
            self.capsules.sync_range_for_device(at, COMMAND_SIZE);
            if let (true, Some(data)) = (data_taken, self.inline.get(index as usize)) {
                data.sync_range_for_device(0, self.inline_size as usize);
            }
        }
        slot.wr.as_ref().ok_or(EINVAL)
    }
}

/// Posts slot `index` of an SRQ's set (again) on the SRQ, with `received`, its token;
/// `data_taken`: the CPU took its in-capsule data buffer.
fn post_shared(srq: &SharedSlots, index: u32, data_taken: bool, received: Received) -> Result {
    srq.post(srq.contents().to_device(index, data_taken)?, received)
        .map_err(|(e, _)| e)
}

/// Where a queue's commands arrive: slots of its own, or an SRQ's.
pub(crate) enum RecvSlots {
    /// The queue's own slots, posted on its QP.
    Own(SlotSet),
    /// An SRQ's slots, shared with the other queues of a device and completion vector.
    Shared(Arc<SharedSlots>),
}

impl RecvSlots {
    /// `count` slots of a queue's own on `device`, with `inline_size` bytes of in-capsule
    /// data each; their receives are made by [`RecvSlots::prepare_on_qp`].
    pub(crate) fn own(device: &Device, count: u32, inline_size: u32) -> Result<Self> {
        Ok(Self::Own(SlotSet::new(device, count, inline_size)?))
    }

    fn set(&self) -> &SlotSet {
        match self {
            Self::Own(set) => set,
            Self::Shared(srq) => srq.contents(),
        }
    }

    /// Makes and posts the receives of a queue's own slots, on `qp`, the QP of `id`, whose
    /// handler holds these slots where `find` finds them (so that they live as long as the
    /// QP's completions can reach them). Nothing to do for an SRQ's.
    pub(crate) fn prepare_on_qp<Q>(
        &self,
        id: &CmId<Q>,
        qp: &QpHandle,
        find: impl for<'a> Fn(&'a Q) -> Option<&'a RecvSlots>,
    ) -> Result
    where
        Q: CmHandler,
        CmdSlot: QpRecvHandler<Connection = Q>,
    {
        let Self::Own(set) = self else {
            return Ok(());
        };
        for cmd in set.cmds.iter() {
            let index = cmd.index as usize;
            let (wr, received) = id.recv_wr(|queue| match find(queue)? {
                Self::Own(set) => set.bound(index),
                Self::Shared(_) => None,
            })?;
            if !cmd.wr.populate(wr) {
                return Err(EBUSY);
            }
            self.post(qp.open().as_ref(), cmd.index, true, received)?;
        }
        Ok(())
    }

    /// Whether the slots belong to an SRQ.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Self::Shared(_))
    }

    /// The capsule buffer (slot `i`'s command at `i * COMMAND_SIZE`).
    pub(crate) fn capsules(&self) -> &DmaBuf {
        &self.set().capsules
    }

    /// Slot `index`'s in-capsule data buffer, if the slots have one.
    pub(crate) fn inline_data(&self, index: u32) -> Option<&DmaBuf> {
        self.set().inline.get(index as usize)
    }

    /// Posts slot `index` (again), with `received`, its token (the command that arrived
    /// in it is done with its buffers): on the SRQ, or through `open`, a pass of the
    /// owning queue's QP (`ENOTCONN` without one: the QP's drain began); `data_taken`: the
    /// CPU took its in-capsule data buffer since it was last posted.
    pub(crate) fn post(
        &self,
        open: Option<&OpenQp<'_>>,
        index: u32,
        data_taken: bool,
        received: Received,
    ) -> Result {
        match self {
            Self::Own(set) => open
                .ok_or_else(crate::rdma::code::enotconn)?
                .post_recv(set.to_device(index, data_taken)?, received)
                .map_err(|(e, _)| e),
            Self::Shared(srq) => post_shared(srq, index, data_taken, received),
        }
    }
}
