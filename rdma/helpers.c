// SPDX-License-Identifier: GPL-2.0
/*
 * Wrappers of `static inline` kernel functions for the Rust RDMA layer.
 * Compiled into every module that uses the layer (rdma/rdma.mk); not exported.
 */
#include "helpers.h"

const char *rdma_rs_ib_device_name(const struct ib_device *device)
{
	return dev_name(&device->dev);
}

bool rdma_rs_protocol_iwarp(const struct ib_device *device, u32 port_num)
{
	return rdma_protocol_iwarp(device, port_num);
}

bool rdma_rs_protocol_roce(const struct ib_device *device, u32 port_num)
{
	return rdma_protocol_roce(device, port_num);
}
