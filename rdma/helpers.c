// SPDX-License-Identifier: GPL-2.0
/*
 * Wrappers of `static inline` kernel functions for the Rust RDMA layer.
 * Compiled into every module that uses the layer (rdma/rdma.mk); not exported.
 */
#include <linux/timex.h>

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

void rdma_rs_ib_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

int rdma_rs_ib_dereg_mr(struct ib_mr *mr)
{
	return ib_dereg_mr(mr);
}

void rdma_rs_ib_update_fast_reg_key(struct ib_mr *mr, u8 newkey)
{
	ib_update_fast_reg_key(mr, newkey);
}

int rdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr)
{
	return ib_post_send(qp, wr, bad_wr);
}

int rdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	return ib_post_recv(qp, wr, bad_wr);
}

int rdma_rs_ib_post_srq_recv(struct ib_srq *srq, const struct ib_recv_wr *wr,
			     const struct ib_recv_wr **bad_wr)
{
	return ib_post_srq_recv(srq, wr, bad_wr);
}

struct ib_srq *rdma_rs_ib_create_srq(struct ib_pd *pd, struct ib_srq_init_attr *attr)
{
	return ib_create_srq(pd, attr);
}

void rdma_rs_ib_destroy_srq(struct ib_srq *srq)
{
	ib_destroy_srq(srq);
}

u64 rdma_rs_ib_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
			      enum dma_data_direction direction)
{
	return ib_dma_map_single(dev, cpu_addr, size, direction);
}

void rdma_rs_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				 enum dma_data_direction direction)
{
	ib_dma_unmap_single(dev, addr, size, direction);
}

int rdma_rs_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

void rdma_rs_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
					enum dma_data_direction dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

void rdma_rs_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					   enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

/* A one-entry scatterlist describing an already DMA-mapped range, for ib_map_mr_sg(). */
void rdma_rs_sg_set_dma(struct scatterlist *sg, u64 dma_addr, unsigned int len)
{
	sg_init_table(sg, 1);
	sg_dma_address(sg) = dma_addr;
	sg_dma_len(sg) = len;
}

struct workqueue_struct *rdma_rs_alloc_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_MEM_RECLAIM | WQ_UNBOUND, 0, name);
}

/* Points a list entry at a buffer and marks it the list's last entry, or not. */
void rdma_rs_sg_set_buf(struct scatterlist *sg, const void *buf, unsigned int len, bool last)
{
	sg_set_buf(sg, buf, len);
	if (last)
		sg_mark_end(sg);
	else
		sg_unmark_end(sg);
}

bool rdma_rs_ib_uses_virt_dma(struct ib_device *dev)
{
	return ib_uses_virt_dma(dev);
}

bool rdma_rs_ib_device_try_get(struct ib_device *device)
{
	return ib_device_try_get(device);
}

bool rdma_rs_ib_dma_pci_p2p_dma_supported(struct ib_device *dev)
{
	return ib_dma_pci_p2p_dma_supported(dev);
}

const struct blk_integrity *rdma_rs_bdev_get_integrity(struct block_device *bdev)
{
	return bdev_get_integrity(bdev);
}

/* percpu_ref_tryget_live() and percpu_ref_put() are static inline. */
bool rdma_rs_percpu_ref_tryget_live(struct percpu_ref *ref)
{
	return percpu_ref_tryget_live(ref);
}

void rdma_rs_percpu_ref_put(struct percpu_ref *ref)
{
	percpu_ref_put(ref);
}

u64 rdma_rs_get_cycles(void)
{
	return get_cycles();
}
