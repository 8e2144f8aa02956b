// SPDX-License-Identifier: GPL-2.0

//! The NVMe and NVMe-oF wire values the C headers define, under names a transport can check
//! its own protocol code against (a transport that parses capsules without the bindings,
//! so that its parser also builds and is tested on the host, asserts that it agrees).
//!
//! C headers: [`include/linux/nvme.h`], [`include/linux/nvme-rdma.h`].
//!
//! [`include/linux/nvme.h`]: srctree/include/linux/nvme.h
//! [`include/linux/nvme-rdma.h`]: srctree/include/linux/nvme-rdma.h

use super::bindings;

/// Bytes of an NVMe command (`struct nvme_command`).
pub(crate) const COMMAND_SIZE: usize = size_of::<bindings::nvme_command>();
/// Bytes of an NVMe completion queue entry (`struct nvme_completion`).
pub(crate) const COMPLETION_SIZE: usize = size_of::<bindings::nvme_completion>();
/// Bytes of the private data of an NVMe/RDMA connect request (`struct nvme_rdma_cm_req`).
pub(crate) const RDMA_CM_REQ_SIZE: usize = size_of::<bindings::nvme_rdma_cm_req>();
/// Entries of an admin queue (`NVME_AQ_DEPTH`).
pub(crate) const ADMIN_QUEUE_DEPTH: u32 = bindings::NVME_AQ_DEPTH;
/// PI type 3 of a namespace's data protection settings (`NVME_NS_DPS_PI_TYPE3`).
pub(crate) const PI_TYPE3: u32 = bindings::NVME_NS_DPS_PI_TYPE3;

/// NVMe status values (`NVME_SC_*`, `NVME_STATUS_*`).
pub(crate) mod status {
    use super::bindings;

    /// The SGL descriptor type is invalid.
    pub(crate) const SGL_INVALID_TYPE: u32 = bindings::NVME_SC_SGL_INVALID_TYPE;
    /// Do not retry.
    pub(crate) const DNR: u32 = bindings::NVME_STATUS_DNR;
    /// The end-to-end guard check failed.
    pub(crate) const GUARD_CHECK: u32 = bindings::NVME_SC_GUARD_CHECK;
    /// The end-to-end application tag check failed.
    pub(crate) const APPTAG_CHECK: u32 = bindings::NVME_SC_APPTAG_CHECK;
    /// The end-to-end reference tag check failed.
    pub(crate) const REFTAG_CHECK: u32 = bindings::NVME_SC_REFTAG_CHECK;
    /// Invalid protection information.
    pub(crate) const INVALID_PI: u32 = bindings::NVME_SC_INVALID_PI;
}

/// The protection information bits of a read or write command's control field
/// (`NVME_RW_PRINFO_*`).
pub(crate) mod prinfo {
    use super::bindings;

    /// The controller inserts or strips the PI.
    pub(crate) const PRACT: u32 = bindings::NVME_RW_PRINFO_PRACT;
    /// Check the reference tag.
    pub(crate) const PRCHK_REF: u32 = bindings::NVME_RW_PRINFO_PRCHK_REF;
    /// Check the application tag.
    pub(crate) const PRCHK_APP: u32 = bindings::NVME_RW_PRINFO_PRCHK_APP;
    /// Check the guard.
    pub(crate) const PRCHK_GUARD: u32 = bindings::NVME_RW_PRINFO_PRCHK_GUARD;
}
