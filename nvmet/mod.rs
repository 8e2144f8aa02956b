// SPDX-License-Identifier: GPL-2.0

//! Safe Rust abstractions over the kernel's NVMe target core (nvmet), for a fabrics
//! transport.
//!
//! A transport implements [`Transport`] (the `struct nvmet_fabrics_ops` callbacks, with
//! safe arguments) and holds a [`Registration`] while it is loaded. Its queues embed an
//! [`SqCq`] and name it with [`impl_has_sq_cq!`]; its requests embed an `nvmet_req` and
//! name it with [`impl_has_request!`]: the step from the C object the core passes back to
//! the transport's own is then written once, here. Ports come as a [`PortConfig`] while
//! they are enabled and as an [`EnabledPort`] afterwards; controllers as [`Ctrl`] (borrowed
//! in a callback) or [`CtrlId`] (an identity to compare).
//!
//! This layer is shared by source like `rdma/`: a transport's crate root includes it with
//! `#[path = "../nvmet/mod.rs"] mod nvmet;`, beside `mod rdma;`, whose bindings (generated
//! from the transport's header, which includes `drivers/nvme/target/nvmet.h`) it uses.
//!
//! C header: [`drivers/nvme/target/nvmet.h`].
//!
//! [`drivers/nvme/target/nvmet.h`]: srctree/drivers/nvme/target/nvmet.h

// A binding layer: the one place (with `rdma/`) where `unsafe` belongs.
#![allow(unsafe_code)]

pub(crate) mod abi;
pub(crate) mod ctrl;
pub(crate) mod global;
mod kunit;
pub(crate) mod port;
pub(crate) mod request;
pub(crate) mod sq;
pub(crate) mod trace;
pub(crate) mod transport;
pub(crate) mod workqueue;

pub(crate) use ctrl::{Ctrl, CtrlId};
pub(crate) use port::{EnabledPort, PortConfig, PortHold};
pub(crate) use request::{HasRequest, Request};
pub(crate) use sq::{HasSqCq, SqCq};
pub(crate) use transport::{OpsRef, Registration, Transport};

use crate::rdma::bindings;
