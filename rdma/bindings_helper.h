/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C headers the shared RDMA layer binds to. bindgen turns this file into
 * rdma_bindings_generated.rs in each module's build directory (rdma/rdma.mk).
 */
#include <linux/dma-mapping.h>
#include <linux/socket.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include "helpers.h"
