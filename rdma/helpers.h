/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Out-of-line wrappers of `static inline` kernel functions the Rust layer calls
 * (the rust/helpers/ convention). Each one is a single call, nothing more.
 */
#ifndef RDMA_RS_HELPERS_H
#define RDMA_RS_HELPERS_H

#include <rdma/ib_verbs.h>

const char *rdma_rs_ib_device_name(const struct ib_device *device);
bool rdma_rs_protocol_iwarp(const struct ib_device *device, u32 port_num);
bool rdma_rs_protocol_roce(const struct ib_device *device, u32 port_num);

#endif /* RDMA_RS_HELPERS_H */
