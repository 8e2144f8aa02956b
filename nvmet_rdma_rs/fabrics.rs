// SPDX-License-Identifier: GPL-2.0

//! The transport's answers to the nvmet core (`struct nvmet_fabrics_ops`), through the
//! [`crate::nvmet`] binding: ports, responses, controller deletion, the addresses
//! discovery and debugfs show, and the NVMe/RDMA limits.

#![forbid(unsafe_code)]

use crate::command::{RspOwner, RspSlot};
use crate::listener::PortListener;
use crate::nvmet::{
    transport::{flags, trtype},
    Ctrl, CtrlId, PortConfig, Transport,
};
use crate::port::why;
use crate::queue::Queue;
use crate::target::{NvmetRdma, Target};
use crate::wire::queue_size;
use kernel::{
    prelude::*,
    sync::{Arc, ArcBorrow},
};

/// `NVMET_RDMA_MAX_MDTS`: 2^8 pages (1 MiB) per command.
const MAX_MDTS: u8 = 8;
// (what the queues size their `rdma_rw` resources for)
const _: () = assert!(1 << MAX_MDTS == crate::queue::MAX_TRANSFER_PAGES);
/// `NVMET_RDMA_MAX_METADATA_MDTS`, with protection information.
const MAX_METADATA_MDTS: u8 = 5;

#[vtable]
impl Transport for NvmetRdma {
    type Port = Arc<PortListener>;
    type Queue = Queue;
    type Request = RspSlot;

    const TRTYPE: u32 = trtype::RDMA;
    const MSDBD: u32 = 1;
    const FLAGS: u32 = flags::KEYED_SGLS | flags::METADATA_SUPPORTED;

    fn add_port(config: PortConfig<'_>) -> Result<Arc<PortListener>> {
        PortListener::enable(config)
    }

    fn remove_port(port: Arc<PortListener>) {
        port.disable();
    }

    fn queue_response(queue: ArcBorrow<'_, Queue>, rsp: &RspSlot, owner: RspOwner<'_>) {
        crate::command::queue_response(queue, rsp, owner);
    }

    /// Disconnects the queues of controller `ctrl`.
    fn delete_ctrl(ctrl: CtrlId) {
        if let Some(target) = Target::get() {
            target.close_queues(|queue| queue.ctrl() == Some(ctrl), why::CTRL_DELETED);
        }
    }

    fn disc_traddr(
        queue: &Queue,
        port: Option<&Arc<PortListener>>,
        configured: &[u8],
        out: &mut [u8],
    ) {
        if port.is_some_and(|port| port.port().listens_on_any()) {
            // The wildcard is no address to give a host: name the one this host reached.
            queue.local_address().write_ip(out);
        } else {
            // (both are the core's `NVMF_TRADDR_SIZE` fields; a bounded copy keeps a
            // length-mismatch panic, which objtool takes for a fall-through, out of it)
            let n = out.len().min(configured.len());
            out[..n].copy_from_slice(&configured[..n]);
        }
    }

    fn host_traddr(ctrl: CtrlId, out: &mut [u8]) -> Result<usize> {
        let target = Target::get().ok_or(ENODEV)?;
        // Not `sqs[0]`: `nvmet_sq_destroy` clears it when the admin queue goes, while the
        // controller (and its debugfs `host_traddr`) lives on with its I/O queues. A queue
        // on the list is alive while the list is locked; all of a controller's queues come
        // from its host.
        let mut written = None;
        target.for_each_queue(|queue| {
            if written.is_none() && queue.ctrl() == Some(ctrl) {
                written = Some(queue.peer().write_ip(out));
            }
        });
        written.ok_or_else(crate::rdma::code::enotconn)
    }

    fn get_mdts(ctrl: &Ctrl) -> u8 {
        if ctrl.pi_support() {
            MAX_METADATA_MDTS
        } else {
            MAX_MDTS
        }
    }

    fn get_max_queue_size(ctrl: &Ctrl) -> u16 {
        let size = if ctrl.pi_support() {
            queue_size::MAX_METADATA
        } else {
            queue_size::MAX
        };
        size as u16
    }
}
