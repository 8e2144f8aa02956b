/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The tracepoints of nvmet_rdma_rs: a command's steps through the transport and a
 * queue's life. Rust calls them through nvmet/trace.rs (a static key per event: a
 * disabled one is a NOP); rdma_rs_events.c defines them. Usable with tracefs
 * (events/nvmet_rdma_rs/), trace-cmd, perf and bpftrace.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM nvmet_rdma_rs

#if !defined(_NVMET_RDMA_RS_EVENTS_H) || defined(TRACE_HEADER_MULTI_READ)
#define _NVMET_RDMA_RS_EVENTS_H

#include <linux/tracepoint.h>

/* The NVMe/RDMA CM reject statuses (NVMe over Fabrics, RDMA transport binding). */
#define nvmet_rdma_rs_show_reject(reason)				\
	__print_symbolic(reason,					\
		{ 1, "INVALID_LENGTH" },				\
		{ 2, "INVALID_RECFMT" },				\
		{ 4, "INVALID_HSQSIZE" },				\
		{ 5, "INVALID_HRQSIZE" },				\
		{ 6, "NO_RESOURCES" })

/* A command's step: its queue, NVMe queue id, command id, response slot, opcode and
 * (once the core completed it) status. */
DECLARE_EVENT_CLASS(nvmet_rdma_rs_req,
	TP_PROTO(u32 queue, u16 qid, u16 cid, u32 slot, u8 opcode, u16 status),
	TP_ARGS(queue, qid, cid, slot, opcode, status),
	TP_STRUCT__entry(
		__field(u32, queue)
		__field(u16, qid)
		__field(u16, cid)
		__field(u32, slot)
		__field(u8, opcode)
		__field(u16, status)
	),
	TP_fast_assign(
		__entry->queue = queue;
		__entry->qid = qid;
		__entry->cid = cid;
		__entry->slot = slot;
		__entry->opcode = opcode;
		__entry->status = status;
	),
	TP_printk("queue=%u qid=%u cid=%u slot=%u opcode=0x%02x status=0x%x",
		  __entry->queue, __entry->qid, __entry->cid, __entry->slot,
		  __entry->opcode, __entry->status)
);

#define NVMET_RDMA_RS_REQ_EVENT(name)					\
DEFINE_EVENT(nvmet_rdma_rs_req, nvmet_rdma_rs_req_##name,		\
	TP_PROTO(u32 queue, u16 qid, u16 cid, u32 slot, u8 opcode, u16 status), \
	TP_ARGS(queue, qid, cid, slot, opcode, status))

/* Its capsule arrived and the core took the command (nvmet_req_init). */
NVMET_RDMA_RS_REQ_EVENT(recv);
/* The RDMA READ of its data from the host completed. */
NVMET_RDMA_RS_REQ_EVENT(read);
/* The core executes it (req->execute). */
NVMET_RDMA_RS_REQ_EVENT(submit);
/* The core completed it (queue_response), with its status. */
NVMET_RDMA_RS_REQ_EVENT(complete);
/* Its data is in the host's memory (the RDMA WRITEs completed). */
NVMET_RDMA_RS_REQ_EVENT(written);
/* Its response's SEND completed. */
NVMET_RDMA_RS_REQ_EVENT(sent);
/* Its response slot is free again. */
NVMET_RDMA_RS_REQ_EVENT(free);

TRACE_EVENT(nvmet_rdma_rs_connect_request,
	TP_PROTO(u16 port, u16 qid, u32 recv_depth, u32 send_depth),
	TP_ARGS(port, qid, recv_depth, send_depth),
	TP_STRUCT__entry(
		__field(u16, port)
		__field(u16, qid)
		__field(u32, recv_depth)
		__field(u32, send_depth)
	),
	TP_fast_assign(
		__entry->port = port;
		__entry->qid = qid;
		__entry->recv_depth = recv_depth;
		__entry->send_depth = send_depth;
	),
	TP_printk("port=%u qid=%u depth=%u/%u", __entry->port, __entry->qid,
		  __entry->recv_depth, __entry->send_depth)
);

TRACE_EVENT(nvmet_rdma_rs_reject,
	TP_PROTO(u16 port, u8 reason),
	TP_ARGS(port, reason),
	TP_STRUCT__entry(
		__field(u16, port)
		__field(u8, reason)
	),
	TP_fast_assign(
		__entry->port = port;
		__entry->reason = reason;
	),
	TP_printk("port=%u reason=%s", __entry->port,
		  nvmet_rdma_rs_show_reject(__entry->reason))
);

/* A queue's event: accepted, established, closing (with why) or released (with the
 * commands it served). */
DECLARE_EVENT_CLASS(nvmet_rdma_rs_queue,
	TP_PROTO(u32 queue, u16 port, u16 qid, u64 count, const char *why),
	TP_ARGS(queue, port, qid, count, why),
	TP_STRUCT__entry(
		__field(u32, queue)
		__field(u16, port)
		__field(u16, qid)
		__field(u64, count)
		__string(why, why)
	),
	TP_fast_assign(
		__entry->queue = queue;
		__entry->port = port;
		__entry->qid = qid;
		__entry->count = count;
		__assign_str(why);
	),
	TP_printk("queue=%u port=%u qid=%u count=%llu %s", __entry->queue, __entry->port,
		  __entry->qid, __entry->count, __get_str(why))
);

#define NVMET_RDMA_RS_QUEUE_EVENT(name)					\
DEFINE_EVENT(nvmet_rdma_rs_queue, nvmet_rdma_rs_queue_##name,		\
	TP_PROTO(u32 queue, u16 port, u16 qid, u64 count, const char *why), \
	TP_ARGS(queue, port, qid, count, why))

/* Accepted (count: response slots). */
NVMET_RDMA_RS_QUEUE_EVENT(accept);
/* The connection is established. */
NVMET_RDMA_RS_QUEUE_EVENT(established);
/* The teardown starts (why: the cause). */
NVMET_RDMA_RS_QUEUE_EVENT(close);
/* Released (count: commands served). */
NVMET_RDMA_RS_QUEUE_EVENT(release);

TRACE_EVENT(nvmet_rdma_rs_device_removal,
	TP_PROTO(const char *device, u32 queues),
	TP_ARGS(device, queues),
	TP_STRUCT__entry(
		__string(device, device)
		__field(u32, queues)
	),
	TP_fast_assign(
		__assign_str(device);
		__entry->queues = queues;
	),
	TP_printk("device=%s queues=%u", __get_str(device), __entry->queues)
);

#endif /* _NVMET_RDMA_RS_EVENTS_H */

/* Outside the guard: define_trace.h reads the header again to define the events. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rdma_rs_events
#include <trace/define_trace.h>
