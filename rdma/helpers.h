/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Out-of-line wrappers of `static inline` kernel functions the Rust layer calls
 * (the rust/helpers/ convention). Each one is a single call, nothing more.
 */
#ifndef RDMA_RS_HELPERS_H
#define RDMA_RS_HELPERS_H

#include <linux/blk-integrity.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

const char *rdma_rs_ib_device_name(const struct ib_device *device);
bool rdma_rs_protocol_iwarp(const struct ib_device *device, u32 port_num);
bool rdma_rs_protocol_roce(const struct ib_device *device, u32 port_num);
void rdma_rs_ib_dealloc_pd(struct ib_pd *pd);
int rdma_rs_ib_dereg_mr(struct ib_mr *mr);
void rdma_rs_ib_update_fast_reg_key(struct ib_mr *mr, u8 newkey);
int rdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr);
int rdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);
int rdma_rs_ib_post_srq_recv(struct ib_srq *srq, const struct ib_recv_wr *wr,
			     const struct ib_recv_wr **bad_wr);
struct ib_srq *rdma_rs_ib_create_srq(struct ib_pd *pd, struct ib_srq_init_attr *attr);
void rdma_rs_ib_destroy_srq(struct ib_srq *srq);
u64 rdma_rs_ib_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
			      enum dma_data_direction direction);
void rdma_rs_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				 enum dma_data_direction direction);
int rdma_rs_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr);
void rdma_rs_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
					enum dma_data_direction dir);
void rdma_rs_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					   enum dma_data_direction dir);
struct workqueue_struct *rdma_rs_alloc_workqueue(const char *name);
bool rdma_rs_percpu_ref_tryget_live(struct percpu_ref *ref);
void rdma_rs_percpu_ref_put(struct percpu_ref *ref);
void rdma_rs_sg_set_dma(struct scatterlist *sg, u64 dma_addr, unsigned int len);
bool rdma_rs_ib_device_try_get(struct ib_device *device);
void rdma_rs_sg_set_buf(struct scatterlist *sg, const void *buf, unsigned int len, bool last);
bool rdma_rs_ib_uses_virt_dma(struct ib_device *dev);
bool rdma_rs_ib_dma_pci_p2p_dma_supported(struct ib_device *dev);
const struct blk_integrity *rdma_rs_bdev_get_integrity(struct block_device *bdev);
u64 rdma_rs_get_cycles(void);

#endif /* RDMA_RS_HELPERS_H */
