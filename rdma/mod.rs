// SPDX-License-Identifier: GPL-2.0

//! Safe Rust abstractions over the kernel's RDMA verbs.
//!
//! This layer is shared by source: every module of the project includes it with
//! `#[path = "../rdma/mod.rs"] mod rdma;` and links its C helpers (see `rdma/rdma.mk`).
//! Module code uses its types and no `bindings::`: the demo pair and `nvmet_rdma_rs` hold
//! no `unsafe` of their own (their files `forbid` it; the crate roots `deny` it, since the
//! layers are their modules and the module parameters' macros expand `unsafe` there).
//! Each crate root defines `MODULE_NAME`, the C string the RDMA core records as the
//! owner of the objects the layer creates (`rdma res show`).
//!
//! C headers: [`include/rdma/ib_verbs.h`], [`include/rdma/rdma_cm.h`], [`include/rdma/rw.h`].
//!
//! [`include/rdma/ib_verbs.h`]: srctree/include/rdma/ib_verbs.h
//! [`include/rdma/rdma_cm.h`]: srctree/include/rdma/rdma_cm.h
//! [`include/rdma/rw.h`]: srctree/include/rdma/rw.h

// A binding layer: the one place (with `nvmet/`) where `unsafe` belongs.
#![allow(unsafe_code)]
// Each module uses a different part of the layer.
#![allow(dead_code)]

pub(crate) mod addr;
pub(crate) mod bindings;
pub(crate) mod client;
pub(crate) mod cm;
pub(crate) mod cq;
pub(crate) mod cqe;
pub(crate) mod device;
pub(crate) mod device_log;
pub(crate) mod dma;
pub(crate) mod kernel_gaps;
pub(crate) mod lifecycle;
pub(crate) mod mr;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod qp_handle;
pub(crate) mod rw;
pub(crate) mod sgl;
pub(crate) mod signature;
pub(crate) mod slot_post;
pub(crate) mod srq;
pub(crate) mod wc;

// Each module uses a different part of the layer, so some re-exports go unused.
#[allow(unused_imports)]
pub(crate) use addr::SocketAddr;
#[allow(unused_imports)]
pub(crate) use client::{ClientHandler, ClientRegistration, IbClient};
#[allow(unused_imports)]
pub(crate) use cm::{
    CmEvent, CmEventKind, CmHandler, CmId, ConnectRequest, HandlerHeld, IdContext, QpCaps,
};
#[allow(unused_imports)]
pub(crate) use cq::{Cq, PollContext};
#[allow(unused_imports)]
pub(crate) use cqe::{Cqe, CqeHandler};
#[allow(unused_imports)]
pub(crate) use device::{Device, DeviceName};
#[allow(unused_imports)]
pub(crate) use device_log::DeviceLog;
#[allow(unused_imports)]
pub(crate) use dma::DmaBuf;
#[allow(unused_imports)]
pub(crate) use kernel_gaps::clock::{Clock, Stamp};
#[allow(unused_imports)]
pub(crate) use kernel_gaps::once::PublishOnce;
#[allow(unused_imports)]
pub(crate) use kernel_gaps::workqueue::OwnedQueue;
#[allow(unused_imports)]
pub(crate) use mr::{access, Mr};
#[allow(unused_imports)]
pub(crate) use pd::{GlobalRkeyOptIn, GlobalRkeyParam, Pd};
#[allow(unused_imports)]
pub(crate) use qp::{Local, Qp, RemoteBuf, SendOp};
#[allow(unused_imports)]
pub(crate) use srq::Srq;
#[allow(unused_imports)]
pub(crate) use wc::WorkCompletion;

use core::ptr::NonNull;
use kernel::prelude::*;

/// Converts a pointer the RDMA core returns (valid, or an `ERR_PTR`, never null) to a
/// `Result`.
fn from_err_ptr<T>(ptr: *mut T) -> Result<NonNull<T>> {
    let ptr = kernel::error::from_err_ptr(ptr)?;
    NonNull::new(ptr).ok_or(ENOMEM)
}

/// A C call's return value as a `Result`: 0 is `Ok`, anything else an error, as C's
/// `if (ret)` reads it (the kernel crate's `to_result` also takes positive values as
/// `Ok`, and is an out-of-line call here, on every post).
#[inline]
pub(crate) fn to_result(ret: core::ffi::c_int) -> Result {
    if ret == 0 {
        Ok(())
    } else {
        Err(Error::from_errno(ret))
    }
}

/// The kernel error for a positive errno constant from the bindings, for the codes
/// `kernel::error::code` does not name.
pub(crate) fn errno(code: u32) -> Error {
    Error::from_errno(-(code as i32))
}

/// Error codes that `kernel::error::code` does not name.
pub(crate) mod code {
    use kernel::error::Error;

    /// `EPROTO`: a peer broke the protocol.
    pub(crate) fn eproto() -> Error {
        super::errno(super::bindings::EPROTO)
    }

    /// `ENOTCONN`: no connection.
    pub(crate) fn enotconn() -> Error {
        super::errno(super::bindings::ENOTCONN)
    }

    /// `ECONNREFUSED`: the peer rejected the connection.
    pub(crate) fn econnrefused() -> Error {
        super::errno(super::bindings::ECONNREFUSED)
    }

    /// `EHOSTUNREACH`: the peer cannot be reached.
    pub(crate) fn ehostunreach() -> Error {
        super::errno(super::bindings::EHOSTUNREACH)
    }

    /// `EOPNOTSUPP`: the operation is not supported.
    pub(crate) fn eopnotsupp() -> Error {
        super::errno(super::bindings::EOPNOTSUPP)
    }

    /// `EISCONN`: connected already.
    pub(crate) fn eisconn() -> Error {
        super::errno(super::bindings::EISCONN)
    }
}
