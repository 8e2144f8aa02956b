/* SPDX-License-Identifier: GPL-2.0 */
/* The RDMA layer's headers plus the nvmet core's (drivers/nvme/target/nvmet.h). */
#include "bindings_helper.h"
#include <linux/nvme.h>
#include <linux/nvme-rdma.h>
#include "nvmet.h"
/* The transport's tracepoints (their keys and the functions that fire them). */
#include "../nvmet/rdma_rs_events.h"
