// SPDX-License-Identifier: GPL-2.0

//! Safe Rust abstractions over the kernel's RDMA verbs.
//!
//! This layer is shared by source: every module of the project includes it with
//! `#[path = "../rdma/mod.rs"] mod rdma;` and links its C helpers (see `rdma/rdma.mk`).
//! All `unsafe` code of the project lives here; module code uses the safe types.
//!
//! C headers: [`include/rdma/ib_verbs.h`], [`include/rdma/rdma_cm.h`], [`include/rdma/rw.h`].
//!
//! [`include/rdma/ib_verbs.h`]: srctree/include/rdma/ib_verbs.h
//! [`include/rdma/rdma_cm.h`]: srctree/include/rdma/rdma_cm.h
//! [`include/rdma/rw.h`]: srctree/include/rdma/rw.h

// Each module uses a different part of the layer.
#![allow(dead_code)]

pub(crate) mod bindings;
pub(crate) mod client;
pub(crate) mod device;
pub(crate) mod device_log;

pub(crate) use client::{ClientHandler, ClientRegistration, IbClient};
pub(crate) use device::Device;
pub(crate) use device_log::{DeviceLog, DEVICE_LOG};
