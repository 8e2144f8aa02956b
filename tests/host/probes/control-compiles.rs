// Probe: control: safe code using the layers as the transport does, which must compile
// (shows the runner compiles a correct probe).
// expect: ok

use crate::nvmet::abi;
use crate::rdma::{rw, Device, WorkCompletion};
use kernel::prelude::*;

/// What a completion handler reads of its completion: `None` if the request succeeded.
fn failure(wc: &WorkCompletion) -> Option<(bool, &'static CStr)> {
    (!wc.is_ok()).then(|| (wc.is_flush(), wc.status_name()))
}

/// A keyed SGL's remote buffer, and the direction of its transfer.
fn remote(addr: u64, rkey: u32, write: bool) -> (rw::Remote, rw::Direction) {
    let dir = if write {
        rw::Direction::FromRemote
    } else {
        rw::Direction::ToRemote
    };
    (rw::Remote { addr, rkey }, dir)
}

/// What a queue's QP is sized by.
fn rdma_rw_mrs(device: &Device, port: u32, depth: u32) -> u32 {
    depth * rw::mr_factor(device, port, 256)
}

/// The transfer end of a context that was never posted.
fn not_posted() -> rw::TransferEnd<'static> {
    rw::TransferEnd::NotPosted
}

/// A queue's capsule size.
const CAPSULE_SIZE: usize = abi::COMMAND_SIZE + abi::COMPLETION_SIZE;
