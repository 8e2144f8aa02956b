// SPDX-License-Identifier: GPL-2.0

//! Fuzzes what a host controls in `nvmet_rdma_rs/wire.rs` (the module's own file): the
//! RDMA CM connect private data and the command capsule, with the port limits and the
//! received length a host can also influence. Beyond "never panics", each accepted
//! result is checked against the bounds the transport relies on.

#![no_main]

#[path = "../../../../../nvmet_rdma_rs/wire.rs"]
#[allow(dead_code)]
mod wire;

use libfuzzer_sys::fuzz_target;
use wire::*;

/// The input: 1 byte port queue size choice, 1 byte in-capsule size choice, 2 bytes
/// received length, 1 byte connect data length, then the connect data, then the capsule
/// (zero-padded to 64 bytes).
fn split(input: &[u8]) -> Option<(u32, u32, u32, &[u8], [u8; COMMAND_SIZE])> {
    let (&[queue, inline, r0, r1, connect_len], rest) = input.split_first_chunk::<5>()?;
    // The transport clamps the port's values to these ranges before parsing.
    let max_queue_size = [128, 256, 1, 32][usize::from(queue % 4)];
    let inline_size = [0, 4096, 8192, 16384][usize::from(inline % 4)];
    let received = u32::from(u16::from_le_bytes([r0, r1]));
    let connect_len = usize::from(connect_len).min(rest.len());
    let (connect, capsule) = rest.split_at(connect_len);
    let mut command = [0u8; COMMAND_SIZE];
    let n = capsule.len().min(COMMAND_SIZE);
    command[..n].copy_from_slice(&capsule[..n]);
    Some((max_queue_size, inline_size, received, connect, command))
}

fuzz_target!(|input: &[u8]| {
    let Some((max_queue_size, inline_size, received, connect, command)) = split(input) else {
        return;
    };

    if let Ok(data) = ConnectData::parse(connect, max_queue_size) {
        let limit = if data.qid == 0 {
            ADMIN_QUEUE_DEPTH
        } else {
            max_queue_size
        };
        assert!(connect.len() >= ConnectData::LEN);
        assert!((1..=limit).contains(&data.recv_queue_size));
        assert!((1..=limit).contains(&data.send_queue_size));
        let accept = data.accept_data();
        assert_eq!(
            u32::from(u16::from_le_bytes([accept[2], accept[3]])),
            data.recv_queue_size
        );
    }

    match data_pointer(&command) {
        Ok(DataPointer::Keyed { len, .. }) => {
            assert_eq!(command[39] >> 4, 0x4);
            assert!(len < 1 << 24);
        }
        Ok(DataPointer::InCapsule { offset, len }) => {
            assert_eq!(command[39], 0x01);
            if check_in_capsule(&command, offset, len, inline_size, received).is_ok() {
                let end = offset + u64::from(len);
                assert!(is_write(&command));
                assert!(end <= u64::from(inline_size) && end <= u64::from(received));
            }
        }
        Err(error) => {
            // Always "do not retry", always pointing at the data pointer.
            assert_ne!(error.status & status::DNR, 0);
            assert_eq!(error.error_loc, 24);
        }
    }
});
