// SPDX-License-Identifier: GPL-2.0

//! What arrives from the network, parsed in plain Rust: the NVMe/RDMA connect request
//! (RDMA CM private data) and the data pointer (SGL descriptor) of a command capsule.
//!
//! Nothing here touches the kernel: every function takes bytes and returns values or the
//! status the C transport (`drivers/nvme/target/rdma.c`) answers with.

#![forbid(unsafe_code)]

/// A command capsule's size: the 64-byte NVMe submission queue entry.
pub(crate) const COMMAND_SIZE: usize = 64;

/// The admin queue's depth (`NVME_AQ_DEPTH`).
pub(crate) const ADMIN_QUEUE_DEPTH: u32 = 32;

/// Queue sizes of NVMe/RDMA (`include/linux/nvme-rdma.h`).
pub(crate) mod queue_size {
    /// A port's default limit (`NVME_RDMA_DEFAULT_QUEUE_SIZE`).
    pub(crate) const DEFAULT: u32 = 128;
    /// The largest queue (`NVME_RDMA_MAX_QUEUE_SIZE`).
    pub(crate) const MAX: u32 = 256;
    /// The largest queue of a controller with T10-PI (`NVME_RDMA_MAX_METADATA_QUEUE_SIZE`).
    pub(crate) const MAX_METADATA: u32 = 128;
}

/// NVMe status codes this transport produces (`include/linux/nvme.h`).
pub(crate) mod status {
    /// Invalid field in command.
    pub(crate) const INVALID_FIELD: u16 = 0x2;
    /// Data transfer error.
    pub(crate) const DATA_XFER_ERROR: u16 = 0x4;
    /// Internal error.
    pub(crate) const INTERNAL: u16 = 0x6;
    /// SGL descriptor type invalid.
    pub(crate) const SGL_INVALID_TYPE: u16 = 0x11;
    /// SGL offset invalid.
    pub(crate) const SGL_INVALID_OFFSET: u16 = 0x16;
    /// Do not retry.
    pub(crate) const DNR: u16 = 0x4000;
}

/// Reject status codes of the NVMe/RDMA connect request (`enum nvme_rdma_cm_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmReject {
    /// Private data too short.
    InvalidLength = 1,
    /// Unknown record format.
    InvalidRecordFormat = 2,
    /// Host send queue size out of range.
    InvalidHsqsize = 4,
    /// Host receive queue size out of range.
    InvalidHrqsize = 5,
    /// No resources for the queue.
    NoResources = 6,
}

impl CmReject {
    /// The reject's private data (`struct nvme_rdma_cm_rej`): record format 0, status.
    pub(crate) fn encode(self) -> [u8; 4] {
        let status = (self as u16).to_le_bytes();
        [0, 0, status[0], status[1]]
    }
}

/// A queue's connect request (`struct nvme_rdma_cm_req`), validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnectData {
    /// The queue id: 0 for the admin queue.
    pub(crate) qid: u16,
    /// Commands the host may have outstanding: our receive queue size (`hsqsize + 1`).
    pub(crate) recv_queue_size: u32,
    /// Responses the host can take at once: our send queue size (`hrqsize`).
    pub(crate) send_queue_size: u32,
}

fn le16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

impl ConnectData {
    /// The length of `struct nvme_rdma_cm_req`.
    pub(crate) const LEN: usize = 32;

    /// Parses and checks the private data of a connect request. The admin queue is at most
    /// [`ADMIN_QUEUE_DEPTH`] deep, an I/O queue at most `max_queue_size`; neither may be
    /// empty.
    pub(crate) fn parse(private_data: &[u8], max_queue_size: u32) -> Result<Self, CmReject> {
        if private_data.len() < Self::LEN {
            return Err(CmReject::InvalidLength);
        }
        if le16(private_data, 0) != 0 {
            return Err(CmReject::InvalidRecordFormat);
        }
        let qid = le16(private_data, 2);
        let hrqsize = u32::from(le16(private_data, 4));
        let hsqsize = u32::from(le16(private_data, 6));
        let limit = if qid == 0 {
            ADMIN_QUEUE_DEPTH
        } else {
            max_queue_size
        };
        let recv_queue_size = hsqsize + 1;
        if recv_queue_size > limit {
            return Err(CmReject::InvalidHsqsize);
        }
        if hrqsize == 0 || hrqsize > limit {
            return Err(CmReject::InvalidHrqsize);
        }
        Ok(Self {
            qid,
            recv_queue_size,
            send_queue_size: hrqsize,
        })
    }

    /// The accept's private data (`struct nvme_rdma_cm_rep`): record format 0 and the
    /// controller's receive queue size.
    pub(crate) fn accept_data(&self) -> [u8; 32] {
        let mut rep = [0u8; 32];
        let crqsize = (self.recv_queue_size as u16).to_le_bytes();
        rep[2..4].copy_from_slice(&crqsize);
        rep
    }
}

/// Where a command's data is, from its SGL descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataPointer {
    /// In the capsule, `offset` bytes after the submission queue entry.
    InCapsule {
        /// Offset into the in-capsule data.
        offset: u64,
        /// Length in bytes.
        len: u32,
    },
    /// In host memory, reached by RDMA with `key`.
    Keyed {
        /// Host address.
        addr: u64,
        /// Length in bytes (24 bits: up to 16 MiB - 1); 0 for a command without data.
        len: u32,
        /// The host's rkey.
        key: u32,
        /// The host asked us to invalidate `key` with the response.
        invalidate: bool,
    },
}

/// A status for the command and the byte offset of the field at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommandError {
    /// NVMe status, including [`status::DNR`] where the C transport sets it.
    pub(crate) status: u16,
    /// Byte offset of the offending field in the submission queue entry.
    pub(crate) error_loc: u16,
}

/// Offset of the data pointer in a submission queue entry.
const DPTR: usize = 24;
/// Offset of the opcode.
const OPCODE: usize = 0;

const SGL_FMT_DATA_DESC: u8 = 0x0;
const KEY_SGL_FMT_DATA_DESC: u8 = 0x4;
const SGL_FMT_ADDRESS: u8 = 0x0;
const SGL_FMT_OFFSET: u8 = 0x1;
const SGL_FMT_INVALIDATE: u8 = 0xf;

/// The opcode of fabrics commands (Connect, Property Get and Set, ...).
const FABRICS: u8 = 0x7f;

/// What a command is, for the latency histograms: an admin or NVM command moving data to
/// the host (Read, Identify) or from it (Write), or anything else (no data, both ways,
/// and fabrics commands: a queue's Connect carries data, but is not I/O).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Class {
    /// Data from controller to host.
    Read = 0,
    /// Data from host to controller.
    Write = 1,
    /// The rest.
    Other = 2,
}

/// The [`Class`] of `command`, from its opcode's data transfer bits.
pub(crate) fn class(command: &[u8; COMMAND_SIZE]) -> Class {
    match command[OPCODE] {
        FABRICS => Class::Other,
        opcode if opcode & 3 == 1 => Class::Write,
        opcode if opcode & 3 == 2 => Class::Read,
        _ => Class::Other,
    }
}

/// The opcode and command identifier of `command`, for its trace events.
pub(crate) fn opcode_and_id(command: &[u8; COMMAND_SIZE]) -> (u8, u16) {
    (
        command[OPCODE],
        u16::from_le_bytes([command[2], command[3]]),
    )
}

/// Whether `command` moves data from host to controller (`nvme_is_write`).
pub(crate) fn is_write(command: &[u8; COMMAND_SIZE]) -> bool {
    if command[OPCODE] == FABRICS {
        // A fabrics command's type is at byte 4.
        command[4] & 1 != 0
    } else {
        command[OPCODE] & 1 != 0
    }
}

/// Decodes the SGL descriptor of `command`, as `nvmet_rdma_map_sgl` does.
pub(crate) fn data_pointer(command: &[u8; COMMAND_SIZE]) -> Result<DataPointer, CommandError> {
    let sgl = &command[DPTR..DPTR + 16];
    // (byte by byte: a slice copy is an out-of-line call in the kernel's code for size)
    let addr = u64::from_le_bytes([
        sgl[0], sgl[1], sgl[2], sgl[3], sgl[4], sgl[5], sgl[6], sgl[7],
    ]);
    let kind = sgl[15];
    let invalid_field = CommandError {
        status: status::INVALID_FIELD | status::DNR,
        error_loc: DPTR as u16,
    };
    match (kind >> 4, kind & 0xf) {
        (SGL_FMT_DATA_DESC, SGL_FMT_OFFSET) => Ok(DataPointer::InCapsule {
            offset: addr,
            len: u32::from_le_bytes([sgl[8], sgl[9], sgl[10], sgl[11]]),
        }),
        (SGL_FMT_DATA_DESC, _) => Err(invalid_field),
        (KEY_SGL_FMT_DATA_DESC, subtype @ (SGL_FMT_ADDRESS | SGL_FMT_INVALIDATE)) => {
            Ok(DataPointer::Keyed {
                addr,
                len: u32::from_le_bytes([sgl[8], sgl[9], sgl[10], 0]),
                key: u32::from_le_bytes([sgl[11], sgl[12], sgl[13], sgl[14]]),
                invalidate: subtype == SGL_FMT_INVALIDATE,
            })
        }
        (KEY_SGL_FMT_DATA_DESC, _) => Err(invalid_field),
        _ => Err(CommandError {
            status: status::SGL_INVALID_TYPE | status::DNR,
            error_loc: DPTR as u16,
        }),
    }
}

/// Checks in-capsule data of `len` bytes at `offset`: only a write carries it, and it must
/// lie within the port's in-capsule size (`inline_size`) and what actually arrived
/// (`received`, the bytes after the submission queue entry).
pub(crate) fn check_in_capsule(
    command: &[u8; COMMAND_SIZE],
    offset: u64,
    len: u32,
    inline_size: u32,
    received: u32,
) -> Result<(), CommandError> {
    if !is_write(command) {
        return Err(CommandError {
            status: status::INVALID_FIELD | status::DNR,
            error_loc: OPCODE as u16,
        });
    }
    let end = offset.saturating_add(u64::from(len));
    if end > u64::from(inline_size) || end > u64::from(received) {
        return Err(CommandError {
            status: status::SGL_INVALID_OFFSET | status::DNR,
            error_loc: DPTR as u16,
        });
    }
    Ok(())
}
