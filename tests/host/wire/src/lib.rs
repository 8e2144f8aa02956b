// SPDX-License-Identifier: GPL-2.0

//! Host unit tests of the parsing the transport applies to what arrives from the network
//! (`wire.rs`), of its T10-PI signature set-up (`protection.rs`) and of its latency
//! histograms (`histogram.rs`). All three are the module's own files, compiled here
//! unchanged, and without the standard library (as in the kernel): only the tests use
//! `std`.

#![no_std]

#[path = "../../../../nvmet_rdma_rs/wire.rs"]
#[allow(dead_code)]
mod wire;

#[path = "../../../../nvmet_rdma_rs/protection.rs"]
#[allow(dead_code)]
mod protection;

#[path = "../../../../nvmet_rdma_rs/histogram.rs"]
#[allow(dead_code)]
mod histogram;

#[cfg(test)]
mod protection_tests;

#[cfg(test)]
mod histogram_tests;

#[cfg(test)]
mod tests {
    extern crate std;

    use super::wire::*;
    use std::{vec, vec::Vec};

    fn connect_data(recfmt: u16, qid: u16, hrqsize: u16, hsqsize: u16, len: usize) -> Vec<u8> {
        let mut data = vec![0u8; len];
        for (at, value) in [(0, recfmt), (2, qid), (4, hrqsize), (6, hsqsize)] {
            if at + 2 <= len {
                data[at..at + 2].copy_from_slice(&value.to_le_bytes());
            }
        }
        data
    }

    #[test]
    fn linux_host_admin_and_io_queues_are_accepted() {
        // What drivers/nvme/host/rdma.c sends: admin hrqsize 32 / hsqsize 31,
        // I/O hrqsize = sqsize + 1, hsqsize = sqsize.
        let admin = ConnectData::parse(&connect_data(0, 0, 32, 31, 32), 128).unwrap();
        assert_eq!(
            (admin.qid, admin.recv_queue_size, admin.send_queue_size),
            (0, 32, 32)
        );
        let io = ConnectData::parse(&connect_data(0, 3, 128, 127, 56), 128).unwrap();
        assert_eq!(
            (io.qid, io.recv_queue_size, io.send_queue_size),
            (3, 128, 128)
        );
        assert_eq!(&io.accept_data()[0..4], &[0, 0, 128, 0]);
    }

    #[test]
    fn bad_connect_data_gets_the_nvme_rdma_cm_status() {
        let parse = |d: Vec<u8>| ConnectData::parse(&d, 128);
        assert_eq!(
            parse(connect_data(0, 0, 32, 31, 31)),
            Err(CmReject::InvalidLength)
        );
        assert_eq!(parse(vec![]), Err(CmReject::InvalidLength));
        assert_eq!(
            parse(connect_data(1, 0, 32, 31, 32)),
            Err(CmReject::InvalidRecordFormat)
        );
        assert_eq!(
            parse(connect_data(0, 0, 32, 32, 32)),
            Err(CmReject::InvalidHsqsize)
        );
        assert_eq!(
            parse(connect_data(0, 1, 128, 128, 32)),
            Err(CmReject::InvalidHsqsize)
        );
        assert_eq!(
            parse(connect_data(0, 1, 0, 15, 32)),
            Err(CmReject::InvalidHrqsize)
        );
        assert_eq!(
            parse(connect_data(0, 1, 129, 15, 32)),
            Err(CmReject::InvalidHrqsize)
        );
        assert_eq!(
            parse(connect_data(0, 1, 65535, 65535, 32)),
            Err(CmReject::InvalidHsqsize)
        );
        assert_eq!(CmReject::InvalidHrqsize.encode(), [0, 0, 5, 0]);
        assert_eq!(CmReject::NoResources.encode(), [0, 0, 6, 0]);
    }

    fn command(opcode: u8, sgl_type: u8, addr: u64, length: [u8; 4], key: [u8; 4]) -> [u8; 64] {
        let mut c = [0u8; 64];
        c[0] = opcode;
        c[24..32].copy_from_slice(&addr.to_le_bytes());
        c[32..36].copy_from_slice(&length);
        c[35..39].copy_from_slice(&key);
        c[39] = sgl_type;
        c
    }

    #[test]
    fn keyed_sgls_decode_address_24_bit_length_and_key() {
        let c = command(
            0x02,
            0x4f,
            0x1122_3344_5566_7788,
            [0xff, 0xff, 0xff, 0],
            [1, 2, 3, 4],
        );
        assert_eq!(
            data_pointer(&c),
            Ok(DataPointer::Keyed {
                addr: 0x1122_3344_5566_7788,
                len: 16 * 1024 * 1024 - 1,
                key: 0x0403_0201,
                invalidate: true
            })
        );
        let c = command(0x02, 0x40, 0, [0, 0, 0, 0], [0; 4]);
        assert!(matches!(
            data_pointer(&c),
            Ok(DataPointer::Keyed {
                len: 0,
                invalidate: false,
                ..
            })
        ));
    }

    #[test]
    fn unsupported_sgls_get_the_c_transport_status() {
        for (kind, status) in [
            (0x00, status::INVALID_FIELD), // data block, address subtype: not for RDMA
            (0x4e, status::INVALID_FIELD), // keyed, unknown subtype
            (0x20, status::SGL_INVALID_TYPE), // segment descriptor
            (0xf0, status::SGL_INVALID_TYPE), // vendor specific
        ] {
            let err = data_pointer(&command(0x02, kind, 0, [0; 4], [0; 4])).unwrap_err();
            assert_eq!(err.status, status | status::DNR, "type {kind:#x}");
            assert_eq!(err.error_loc, 24);
        }
    }

    #[test]
    fn in_capsule_data_is_checked_against_port_size_and_what_arrived() {
        let write = command(0x01, 0x01, 0, [0; 4], [0; 4]);
        let read = command(0x02, 0x01, 0, [0; 4], [0; 4]);
        assert_eq!(check_in_capsule(&write, 0, 4096, 4096, 4096), Ok(()));
        assert_eq!(check_in_capsule(&write, 512, 512, 4096, 1024), Ok(()));
        let offset = status::SGL_INVALID_OFFSET | status::DNR;
        assert_eq!(
            check_in_capsule(&write, 1, 4096, 4096, 4096)
                .unwrap_err()
                .status,
            offset
        );
        assert_eq!(
            check_in_capsule(&write, 0, 2048, 4096, 1024)
                .unwrap_err()
                .status,
            offset
        );
        assert_eq!(
            check_in_capsule(&write, u64::MAX, 1, 4096, 4096)
                .unwrap_err()
                .status,
            offset
        );
        assert_eq!(
            check_in_capsule(&write, 0, 1, 0, 4096).unwrap_err().status,
            offset
        );
        let err = check_in_capsule(&read, 0, 16, 4096, 4096).unwrap_err();
        assert_eq!(
            (err.status, err.error_loc),
            (status::INVALID_FIELD | status::DNR, 0)
        );
    }

    #[test]
    fn fabrics_commands_take_their_direction_from_the_fabrics_type() {
        let mut connect = [0u8; 64];
        connect[0] = 0x7f;
        connect[4] = 0x01;
        assert!(is_write(&connect));
        connect[4] = 0x04; // property get
        assert!(!is_write(&connect));
        assert!(is_write(&command(0x01, 0, 0, [0; 4], [0; 4])));
        assert!(!is_write(&command(0x02, 0, 0, [0; 4], [0; 4])));
    }

    #[test]
    fn commands_are_classed_by_their_opcode_for_the_histograms() {
        let mut connect = [0u8; 64];
        connect[0] = 0x7f;
        connect[4] = 0x01;
        assert_eq!(class(&connect), Class::Other);
        assert_eq!(class(&command(0x01, 0, 0, [0; 4], [0; 4])), Class::Write);
        assert_eq!(class(&command(0x02, 0, 0, [0; 4], [0; 4])), Class::Read);
        // Identify (admin, controller to host), Flush (no data), Write Zeroes (no data),
        // Dataset Management (host to controller).
        assert_eq!(class(&command(0x06, 0, 0, [0; 4], [0; 4])), Class::Read);
        assert_eq!(class(&command(0x00, 0, 0, [0; 4], [0; 4])), Class::Other);
        assert_eq!(class(&command(0x08, 0, 0, [0; 4], [0; 4])), Class::Other);
        assert_eq!(class(&command(0x09, 0, 0, [0; 4], [0; 4])), Class::Write);
    }
}
