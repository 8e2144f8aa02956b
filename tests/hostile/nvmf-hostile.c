// SPDX-License-Identifier: GPL-2.0
/*
 * nvmf-hostile: an NVMe/RDMA host that misbehaves on purpose, to check that a target
 * answers every malformed or out-of-order request with an NVMe error status or a clean
 * end of the queue, and keeps serving the hosts that behave.
 *
 * Built on rdma-core (librdmacm, libibverbs; the rxe provider in the test VM). Each case
 * opens its own connections; after each one, a well-behaved admin connection must still
 * work (connect, enable, Identify). The expected outcomes follow the pinned kernel's
 * drivers/nvme/target/rdma.c and nvmet core, and where the C transport trusts the host
 * more than it should, the stricter answer (noted at the case).
 *
 *   nvmf-hostile -a ADDR [-p PORT] -n SUBNQN [-S NSID] [-c CASE]...  named cases (default: all;
 *                                    storm needs -S, a namespace completing after seconds)
 *   nvmf-hostile -a ADDR [-p PORT] -n SUBNQN -s SEED -i N     N random cases from SEED
 *   -C: the target is the C nvmet-rdma (the control): the storm case expects its guard's
 *       answer (it lets the late admin queue in)
 *
 * Exit status 0 when every case ended as expected; each case prints one line.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SQE_SIZE 64
#define CQE_SIZE 16
#define RECV_SLOTS 32
/* Room for a capsule well past any in-capsule size a port may have. */
#define SEND_BUF_SIZE (64 * 1024)
/* Host memory the target may READ from or WRITE to through the data key. */
#define DATA_BUF_SIZE (4 * 1024 * 1024)
#define TIMEOUT_MS 8000

/* NVMe/RDMA and NVMe values (include/linux/nvme.h, nvme-rdma.h). */
#define OPC_FLUSH 0x00
#define OPC_WRITE 0x01
#define OPC_READ 0x02
#define OPC_ADMIN_IDENTIFY 0x06
#define OPC_FABRICS 0x7f
#define FCTYPE_PROPERTY_SET 0x00
#define FCTYPE_CONNECT 0x01
#define FLAGS_SGL 0x40 /* PSDT: SGL for data, MPTR a single SGL (nvmet requires it) */
#define SGL_INCAPSULE 0x01 /* data block, offset subtype */
#define SGL_KEYED 0x40 /* keyed data block, address subtype */
#define SGL_KEYED_INV 0x4f /* keyed data block, invalidate subtype */
#define SC_INVALID_FIELD 0x2
#define SC_SGL_INVALID_TYPE 0x11
#define SC_SGL_INVALID_OFFSET 0x16
#define SC_DNR 0x4000
#define CM_INVALID_RECFMT 2
#define CM_INVALID_HSQSIZE 4
#define CM_INVALID_HRQSIZE 5
#define AQ_DEPTH 32

static const char *opt_addr, *opt_port = "4420", *opt_nqn;
static bool verbose;
/* -C: the target is the C nvmet-rdma (the control), where a case expects its answer. */
static bool opt_c_target;
/* A namespace whose commands complete only after seconds (-S), for the storm case. */
static uint32_t opt_slow_nsid;
/* Bytes of host memory per connection the target may reach (the storm's many take less). */
static size_t data_buf_size = DATA_BUF_SIZE;

/* One RDMA connection acting as an NVMe/RDMA host queue. */
struct conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq; /* send and receive completions, apart */
	struct ibv_mr *recv_mr, *send_mr, *data_mr;
	uint8_t *recv_buf, *send_buf, *data_buf;
	bool gone; /* disconnected, or the QP failed */
	int reject; /* NVMe/RDMA CM status of a reject, -1 for other failures */
	uint16_t next_cid;
	unsigned int sends_pending;
};

/* The outcome of a command. */
enum outcome { ANSWERED, TORN_DOWN, TIMED_OUT };

struct response {
	uint64_t result;
	uint16_t cid;
	uint16_t status; /* status code, type and DNR (no phase, More or CRD bits) */
};

static void say(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* xorshift64*: the random mode's only source, so a seed replays a run exactly. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}
static uint32_t rnd_below(uint32_t n) { return n ? rnd() % n : 0; }

static void put16(uint8_t *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static void put24(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
}

/* Waits for the next CM event (up to ms); returns its type, or -1. */
static int cm_wait(struct conn *c, int ms, struct rdma_cm_event *copy)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int type;

	if (poll(&pfd, 1, ms) <= 0)
		return -1;
	if (rdma_get_cm_event(c->ch, &ev))
		return -1;
	type = ev->event;
	if (copy)
		*copy = *ev;
	if (type == RDMA_CM_EVENT_REJECTED) {
		const uint8_t *pd = ev->param.conn.private_data;

		c->reject = (pd && ev->param.conn.private_data_len >= 4) ? (pd[2] | pd[3] << 8) : -1;
	}
	rdma_ack_cm_event(ev);
	return type;
}

static void conn_free(struct conn *c)
{
	if (!c)
		return;
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->data_mr)
		ibv_dereg_mr(c->data_mr);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c->recv_buf);
	free(c->send_buf);
	free(c->data_buf);
	free(c);
}

/* Disconnects (waiting briefly for the target's answer) and frees everything. */
static void conn_close(struct conn *c)
{
	if (!c)
		return;
	if (!c->gone && !rdma_disconnect(c->id)) {
		uint64_t end = now_ms() + 2000;

		while (now_ms() < end) {
			int t = cm_wait(c, 100, NULL);

			if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_TIMEWAIT_EXIT)
				break;
		}
	}
	conn_free(c);
}

static int post_recv(struct conn *c, unsigned int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->recv_buf + slot * CQE_SIZE),
		.length = CQE_SIZE,
		.lkey = c->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

/*
 * Opens a queue: RDMA CM connect with the NVMe/RDMA private data (pd, pd_len bytes).
 * Returns the connection with c->gone clear when established; on a reject, c->gone is
 * set and c->reject holds the target's status.
 */
static struct conn *conn_open_raw(const uint8_t *pd, uint8_t pd_len)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res = NULL;
	struct ibv_qp_init_attr qpa = { 0 };
	struct rdma_conn_param param = { 0 };
	int i, t;

	if (!c)
		return NULL;
	c->reject = -1;
	c->gone = true;
	c->recv_buf = calloc(RECV_SLOTS, CQE_SIZE);
	c->send_buf = calloc(1, SEND_BUF_SIZE);
	c->data_buf = aligned_alloc(4096, data_buf_size);
	c->ch = rdma_create_event_channel();
	if (!c->recv_buf || !c->send_buf || !c->data_buf || !c->ch)
		goto fail;
	memset(c->data_buf, 0, data_buf_size);
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP))
		goto fail;
	if (rdma_getaddrinfo(opt_addr, opt_port, &hints, &res))
		goto fail;
	if (rdma_resolve_addr(c->id, NULL, res->ai_dst_addr, 2000) ||
	    cm_wait(c, TIMEOUT_MS, NULL) != RDMA_CM_EVENT_ADDR_RESOLVED)
		goto fail;
	if (rdma_resolve_route(c->id, 2000) ||
	    cm_wait(c, TIMEOUT_MS, NULL) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		goto fail;
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->scq = c->pd ? ibv_create_cq(c->id->verbs, 256, NULL, NULL, 0) : NULL;
	c->rcq = c->scq ? ibv_create_cq(c->id->verbs, RECV_SLOTS, NULL, NULL, 0) : NULL;
	if (!c->rcq)
		goto fail;
	c->recv_mr = ibv_reg_mr(c->pd, c->recv_buf, RECV_SLOTS * CQE_SIZE, IBV_ACCESS_LOCAL_WRITE);
	c->send_mr = ibv_reg_mr(c->pd, c->send_buf, SEND_BUF_SIZE, 0);
	c->data_mr = ibv_reg_mr(c->pd, c->data_buf, data_buf_size,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!c->recv_mr || !c->send_mr || !c->data_mr)
		goto fail;
	qpa.send_cq = c->scq;
	qpa.recv_cq = c->rcq;
	qpa.qp_type = IBV_QPT_RC;
	qpa.cap.max_send_wr = 128;
	qpa.cap.max_recv_wr = RECV_SLOTS;
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &qpa))
		goto fail;
	for (i = 0; i < RECV_SLOTS; i++)
		if (post_recv(c, i))
			goto fail;
	param.private_data = pd;
	param.private_data_len = pd_len;
	param.responder_resources = 16;
	param.initiator_depth = 16;
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	if (rdma_connect(c->id, &param))
		goto fail;
	t = cm_wait(c, TIMEOUT_MS, NULL);
	rdma_freeaddrinfo(res);
	if (t == RDMA_CM_EVENT_ESTABLISHED)
		c->gone = false;
	return c;
fail:
	if (res)
		rdma_freeaddrinfo(res);
	conn_free(c);
	return NULL;
}

/* A queue with well-formed private data: qid, host receive and send queue sizes. */
static struct conn *conn_open(uint16_t qid, uint16_t hrqsize, uint16_t hsqsize)
{
	uint8_t pd[32] = { 0 };

	put16(pd + 2, qid);
	put16(pd + 4, hrqsize);
	put16(pd + 6, hsqsize);
	return conn_open_raw(pd, sizeof(pd));
}

/* Sends len bytes of c->send_buf as one capsule and waits until it is gone. */
static int send_capsule(struct conn *c, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)c->send_buf,
		.length = len,
		.lkey = c->send_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	uint64_t end = now_ms() + TIMEOUT_MS;

	if (c->gone)
		return -1;
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		c->gone = true;
		return -1;
	}
	while (now_ms() < end) {
		int n = ibv_poll_cq(c->scq, 1, &wc);

		if (n < 0)
			break;
		if (n == 0) {
			usleep(50);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			say("  send: %s\n", ibv_wc_status_str(wc.status));
			c->gone = true;
			return -1;
		}
		if (wc.wr_id == 1)
			return 0;
	}
	c->gone = true;
	return -1;
}

/*
 * Waits until the next response arrives (ANSWERED, in *got) or the deadline end passes;
 * TORN_DOWN when the target ends the connection.
 */
static enum outcome next_response(struct conn *c, uint64_t end, struct response *got)
{
	struct ibv_wc wc;

	while (!c->gone && now_ms() < end) {
		int n = ibv_poll_cq(c->rcq, 1, &wc);
		int t;

		if (n < 0)
			break;
		if (n == 1) {
			const uint8_t *cqe;

			if (wc.status != IBV_WC_SUCCESS) {
				say("  completion: %s\n", ibv_wc_status_str(wc.status));
				c->gone = true;
				break;
			}
			if (wc.opcode != IBV_WC_RECV)
				continue;
			cqe = c->recv_buf + wc.wr_id * CQE_SIZE;
			memcpy(&got->result, cqe, 8);
			got->result = le64toh(got->result);
			got->cid = cqe[12] | cqe[13] << 8;
			/* Without the phase bit, and without More and CRD: nvmet sets More when
			 * its error log has an entry, which says nothing about the status. */
			got->status = ((cqe[14] | cqe[15] << 8) >> 1) & ~0x3800;
			post_recv(c, wc.wr_id);
			return ANSWERED;
		}
		t = cm_wait(c, 1, NULL);
		if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_DEVICE_REMOVAL)
			c->gone = true;
	}
	return c->gone ? TORN_DOWN : TIMED_OUT;
}

/*
 * Waits for the response to command cid. Responses to other commands (a burst's) are
 * counted in *others. Returns TORN_DOWN when the target ends the connection.
 */
static enum outcome wait_response(struct conn *c, uint16_t cid, struct response *r, int *others)
{
	uint64_t end = now_ms() + TIMEOUT_MS;
	struct response got;
	enum outcome o;

	while ((o = next_response(c, end, &got)) == ANSWERED) {
		if (got.cid == cid) {
			if (r)
				*r = got;
			return ANSWERED;
		}
		if (others)
			(*others)++;
	}
	return o;
}

/* Waits until the target ends the connection; false if it stays up for the timeout. */
static bool wait_torn_down(struct conn *c)
{
	return wait_response(c, 0xffff, NULL, NULL) == TORN_DOWN;
}

/*
 * A fresh submission queue entry, the next command id and no data, as capsule `slot` of
 * c->send_buf (slots beyond 0 for capsules posted together).
 */
static uint8_t *sqe_at(struct conn *c, unsigned int slot, uint8_t opcode, uint16_t *cid)
{
	uint8_t *s = c->send_buf + slot * SQE_SIZE;

	memset(s, 0, SQE_SIZE);
	s[0] = opcode;
	s[1] = FLAGS_SGL;
	*cid = c->next_cid++;
	if (c->next_cid == 0xffff)
		c->next_cid = 0;
	put16(s + 2, *cid);
	/* No data: a null keyed descriptor, as the Linux host sends (nvme_rdma_set_sg_null). */
	s[39] = SGL_KEYED;
	return s;
}

/* A fresh submission queue entry in c->send_buf with the next command id and no data. */
static uint8_t *sqe(struct conn *c, uint8_t opcode, uint16_t *cid)
{
	return sqe_at(c, 0, opcode, cid);
}

/* The data pointer: a keyed descriptor into c->data_buf at offset off. */
static void sgl_keyed(struct conn *c, uint8_t *s, size_t off, uint32_t len, uint32_t key, uint8_t type)
{
	put64(s + 24, (uintptr_t)(c->data_buf + off));
	put24(s + 32, len);
	put32(s + 35, key);
	s[39] = type;
}

/* The data pointer: in-capsule data at offset off. */
static void sgl_in_capsule(uint8_t *s, uint64_t off, uint32_t len)
{
	put64(s + 24, off);
	put32(s + 32, len);
	s[39] = SGL_INCAPSULE;
}

static enum outcome run(struct conn *c, size_t len, uint16_t cid, struct response *r)
{
	if (send_capsule(c, len))
		return c->gone ? (wait_torn_down(c), TORN_DOWN) : TIMED_OUT;
	return wait_response(c, cid, r, NULL);
}

/*
 * The fabrics Connect command for queue qid, its data (host ID, controller ID, NQNs)
 * through a keyed SGL (in the capsule for I/O queues when in_capsule is set).
 */
/* The keep-alive timeout admin Connects ask for, in ms (0: none). */
static uint32_t connect_kato;

/* The Connect command's 1024 bytes of data: host ID, controller ID, subsystem and host NQNs. */
static void connect_data(uint8_t *data, uint16_t cntlid)
{
	static const char hostnqn[] = "nqn.2026-11.io.rdma-rs:hostile";

	memset(data, 0, 1024);
	memcpy(data, "hostile-host-id!", 16);
	put16(data + 16, cntlid);
	snprintf((char *)data + 256, 256, "%s", opt_nqn);
	snprintf((char *)data + 512, 256, "%s", hostnqn);
}

static enum outcome nvmf_connect(struct conn *c, uint16_t qid, uint16_t sqsize, uint16_t cntlid,
				 bool in_capsule, struct response *r)
{
	uint16_t cid;
	uint8_t *s = sqe(c, OPC_FABRICS, &cid);
	uint8_t *data = in_capsule ? c->send_buf + SQE_SIZE : c->data_buf;

	s[4] = FCTYPE_CONNECT;
	put16(s + 42, qid);
	put16(s + 44, sqsize);
	if (qid == 0)
		put32(s + 48, connect_kato);
	connect_data(data, cntlid);
	if (in_capsule) {
		sgl_in_capsule(s, 0, 1024);
		return run(c, SQE_SIZE + 1024, cid, r);
	}
	sgl_keyed(c, s, 0, 1024, c->data_mr->rkey, SGL_KEYED);
	return run(c, SQE_SIZE, cid, r);
}

/* Property Set CC: enable the controller (4 KiB pages, 64 B SQEs, 16 B CQEs). */
static enum outcome nvmf_enable(struct conn *c, struct response *r)
{
	uint16_t cid;
	uint8_t *s = sqe(c, OPC_FABRICS, &cid);

	s[4] = FCTYPE_PROPERTY_SET;
	put32(s + 44, 0x14);
	put64(s + 48, 0x00460001);
	return run(c, SQE_SIZE, cid, r);
}

/* An admin queue, connected and enabled; *cntlid is its controller. NULL on failure. */
static struct conn *admin_queue(uint16_t *cntlid)
{
	struct conn *c = conn_open(0, AQ_DEPTH, AQ_DEPTH - 1);
	struct response r;

	if (!c || c->gone)
		goto fail;
	if (nvmf_connect(c, 0, AQ_DEPTH - 1, 0xffff, false, &r) != ANSWERED || r.status) {
		say("  admin connect: status %#x\n", r.status);
		goto fail;
	}
	*cntlid = r.result & 0xffff;
	if (nvmf_enable(c, &r) != ANSWERED || r.status) {
		say("  enable: status %#x\n", r.status);
		goto fail;
	}
	return c;
fail:
	conn_close(c);
	return NULL;
}

/* I/O queue qid (of depth) of controller cntlid, connected. */
static struct conn *io_queue_qid(uint16_t cntlid, uint16_t qid, uint16_t depth)
{
	struct conn *c = conn_open(qid, depth, depth - 1);
	struct response r;

	if (!c || c->gone || nvmf_connect(c, qid, depth - 1, cntlid, true, &r) != ANSWERED ||
	    r.status) {
		conn_close(c);
		return NULL;
	}
	return c;
}

/* An I/O queue (qid 1, depth) of controller cntlid, connected. */
static struct conn *io_queue(uint16_t cntlid, uint16_t depth)
{
	return io_queue_qid(cntlid, 1, depth);
}

/* Identify controller through a keyed SGL of len bytes at offset 0. */
static enum outcome identify(struct conn *c, uint32_t len, uint32_t key, struct response *r)
{
	uint16_t cid;
	uint8_t *s = sqe(c, OPC_ADMIN_IDENTIFY, &cid);

	s[40] = 1; /* CNS: controller */
	sgl_keyed(c, s, 0, len, key, SGL_KEYED);
	return run(c, SQE_SIZE, cid, r);
}

/* Read or write nlb blocks (512 B) at lba, as capsule `slot` of c->send_buf. */
static uint8_t *rw_sqe_at(struct conn *c, unsigned int slot, uint8_t opc, uint64_t lba, uint16_t nlb,
			  uint16_t *cid)
{
	uint8_t *s = sqe_at(c, slot, opc, cid);

	put32(s + 4, 1); /* nsid */
	put64(s + 40, lba);
	put16(s + 48, nlb - 1);
	return s;
}

/* Read or write nlb blocks (512 B) at lba. */
static uint8_t *rw_sqe(struct conn *c, uint8_t opc, uint64_t lba, uint16_t nlb, uint16_t *cid)
{
	return rw_sqe_at(c, 0, opc, lba, nlb, cid);
}

/* The target still serves a well-behaved host: a fresh admin queue identifies. */
static bool target_serves(void)
{
	uint16_t cntlid;
	struct conn *c = admin_queue(&cntlid);
	struct response r;
	bool ok;

	if (!c)
		return false;
	ok = identify(c, 4096, c->data_mr->rkey, &r) == ANSWERED && r.status == 0;
	/* The subsystem NQN sits at byte 768 of the Identify Controller data. */
	ok = ok && strncmp((char *)c->data_buf + 768, opt_nqn, strlen(opt_nqn)) == 0;
	conn_close(c);
	return ok;
}

static int failures;
static char why[480];

#define EXPECT(cond, ...)                                        \
	do {                                                     \
		if (!(cond)) {                                   \
			snprintf(why, sizeof(why), __VA_ARGS__); \
			goto out;                                \
		}                                                \
	} while (0)

static const char *outcome_name(enum outcome o)
{
	return o == ANSWERED ? "answered" : o == TORN_DOWN ? "torn down" : "timed out";
}

/* Expects command cid's status to be want (exactly, DNR included). */
#define EXPECT_STATUS(o, r, want, what)                                                      \
	EXPECT((o) == ANSWERED && (r).status == (want), "%s: %s, status %#x, expected %#x", \
	       what, outcome_name(o), (o) == ANSWERED ? (r).status : 0, want)

/*
 * An enabled admin queue and an I/O queue of `depth` on its controller, in *a and *q
 * (NULL where not had); false, with `why` set, if either cannot be had.
 */
static bool open_queues(struct conn **a, struct conn **q, uint16_t depth)
{
	uint16_t cntlid;

	*q = NULL;
	*a = admin_queue(&cntlid);
	if (!*a) {
		snprintf(why, sizeof(why), "no admin queue");
		return false;
	}
	*q = io_queue(cntlid, depth);
	if (!*q) {
		snprintf(why, sizeof(why), "no I/O queue");
		return false;
	}
	return true;
}

/* --- the cases -------------------------------------------------------------------- */

/* A capsule shorter than a command: the queue ends (C: "capsule size less than 64"). */
static bool case_truncated(void)
{
	uint16_t cntlid;
	struct conn *a = admin_queue(&cntlid);
	size_t sizes[] = { 0, 1, 16, 63 };
	bool ok = false;
	unsigned int i;

	conn_close(a);
	a = NULL;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		a = admin_queue(&cntlid);
		EXPECT(a, "no admin queue");
		memset(a->send_buf, 0xa5, SQE_SIZE);
		EXPECT(send_capsule(a, sizes[i]) == 0 || a->gone, "send failed");
		EXPECT(wait_torn_down(a), "a %zu-byte capsule left the queue up", sizes[i]);
		conn_close(a);
		a = NULL;
	}
	ok = true;
out:
	conn_close(a);
	return ok;
}

/* A capsule larger than the receive buffer: the receive fails, the queue ends. */
static bool case_oversized(void)
{
	uint16_t cntlid;
	struct conn *a = admin_queue(&cntlid), *q = NULL;
	uint16_t cid;
	bool ok = false;

	EXPECT(a, "no admin queue");
	/* Past any receive buffer (at most 16 KiB of in-capsule data on any port). */
	sqe(a, OPC_ADMIN_IDENTIFY, &cid);
	send_capsule(a, SEND_BUF_SIZE);
	EXPECT(wait_torn_down(a), "a %d-byte admin capsule left the queue up", SEND_BUF_SIZE);
	conn_close(a);
	/*
	 * The admin queue takes no in-capsule data: a byte more than the command ends the
	 * queue where its receive buffers hold just the command, and is ignored where they
	 * are an SRQ's (sized for I/O queues): either way an answer or a teardown.
	 */
	a = admin_queue(&cntlid);
	EXPECT(a, "no admin queue");
	sqe(a, OPC_ADMIN_IDENTIFY, &cid);
	a->send_buf[SQE_SIZE] = 0x5a;
	EXPECT(run(a, SQE_SIZE + 1, cid, NULL) != TIMED_OUT, "a 65-byte admin capsule: no answer, no teardown");
	conn_close(a);
	a = admin_queue(&cntlid);
	EXPECT(a, "no admin queue");
	q = io_queue(cntlid, 16);
	EXPECT(q, "no I/O queue");
	/* Past any port's in-capsule size (at most 16 KiB + the command). */
	rw_sqe(q, OPC_WRITE, 0, 8, &cid);
	sgl_in_capsule(q->send_buf, 0, 4096);
	send_capsule(q, SEND_BUF_SIZE);
	EXPECT(wait_torn_down(q), "a %d-byte capsule left the queue up", SEND_BUF_SIZE);
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * Every SGL descriptor type and subtype, zero-length, on a Flush (no data): data block
 * with offset subtype -> Invalid Field (in-capsule data is for writes only), other data
 * block subtypes -> Invalid Field, keyed address/invalidate -> success, other keyed
 * subtypes -> Invalid Field, any other type -> SGL Descriptor Type Invalid; all with DNR.
 * A PSDT other than "SGL, MPTR single" is refused by nvmet core (Invalid Field).
 */
static bool case_sgl_types(void)
{
	uint16_t cid, want;
	struct conn *a, *q;
	struct response r;
	enum outcome o;
	bool ok = false;
	int kind;

	if (!open_queues(&a, &q, 32))
		goto out;
	for (kind = 0; kind < 256; kind++) {
		uint8_t *s = sqe(q, OPC_FLUSH, &cid);

		put32(s + 4, 1);
		s[39] = kind;
		if (kind == SGL_KEYED || kind == SGL_KEYED_INV)
			want = 0;
		else if (kind >> 4 == 0 || kind >> 4 == 4)
			want = SC_INVALID_FIELD | SC_DNR;
		else
			want = SC_SGL_INVALID_TYPE | SC_DNR;
		o = run(q, SQE_SIZE, cid, &r);
		EXPECT(o == ANSWERED && r.status == want, "SGL type %#04x: %s, status %#x, expected %#x",
		       kind, outcome_name(o), r.status, want);
	}
	for (kind = 0; kind < 4; kind++) {
		uint8_t *s = sqe(q, OPC_FLUSH, &cid);

		if (kind == 1)
			continue;
		put32(s + 4, 1);
		s[1] = kind << 6;
		s[39] = SGL_KEYED;
		o = run(q, SQE_SIZE, cid, &r);
		EXPECT(o == ANSWERED && r.status == (SC_INVALID_FIELD | SC_DNR),
		       "PSDT %d: %s, status %#x", kind, outcome_name(o), r.status);
	}
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/* Keyed SGLs with a key the host never gave: the RDMA fails, the queue ends. */
static bool case_bad_keys(void)
{
	uint16_t cntlid, cid;
	struct conn *a = NULL, *q = NULL;
	struct response r;
	bool ok = false;
	int dir;

	for (dir = 0; dir < 3; dir++) {
		a = admin_queue(&cntlid);
		EXPECT(a, "no admin queue");
		if (dir == 0) {
			/* Identify: the target WRITEs to host memory. */
			EXPECT(identify(a, 4096, a->data_mr->rkey ^ 0x5a5a5a00, &r) == TORN_DOWN,
			       "Identify with a bad key: not torn down (status %#x)", r.status);
		} else {
			q = io_queue(cntlid, 16);
			EXPECT(q, "no I/O queue");
			/* Write: the target READs host memory; Read: it WRITEs. */
			rw_sqe(q, dir == 1 ? OPC_WRITE : OPC_READ, 0, 8, &cid);
			sgl_keyed(q, q->send_buf, 0, 4096, q->data_mr->rkey + 0x100, SGL_KEYED);
			EXPECT(run(q, SQE_SIZE, cid, &r) == TORN_DOWN,
			       "%s with a bad key: not torn down", dir == 1 ? "Write" : "Read");
		}
		conn_close(q);
		conn_close(a);
		q = a = NULL;
	}
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * Keyed lengths 0, 1, 16 MiB - 1 on a 4 KiB Read (8 blocks): nvmet core refuses a
 * transfer length that differs from the command's (SGL Data Block Invalid or, where the
 * buffer cannot be had, an internal error), the queue stays. An in-capsule length beyond
 * the port's size: SGL Offset Invalid.
 */
static bool case_lengths(void)
{
	uint32_t lens[] = { 0, 1, 4095, 4097, (1u << 24) - 1 };
	uint16_t cid;
	struct conn *a, *q;
	struct response r;
	enum outcome o;
	bool ok = false;
	unsigned int i;

	if (!open_queues(&a, &q, 16))
		goto out;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		rw_sqe(q, OPC_READ, 0, 8, &cid);
		sgl_keyed(q, q->send_buf, 0, lens[i], q->data_mr->rkey, SGL_KEYED);
		o = run(q, SQE_SIZE, cid, &r);
		EXPECT(o == ANSWERED && r.status != 0, "Read of 4 KiB with keyed length %u: %s, status %#x",
		       lens[i], outcome_name(o), r.status);
	}
	/* The right length works on the same queue. */
	rw_sqe(q, OPC_READ, 0, 8, &cid);
	sgl_keyed(q, q->send_buf, 0, 4096, q->data_mr->rkey, SGL_KEYED);
	o = run(q, SQE_SIZE, cid, &r);
	EXPECT_STATUS(o, r, 0, "Read of 4 KiB");
	/* In-capsule: a length the capsule cannot hold. */
	rw_sqe(q, OPC_WRITE, 0, 8, &cid);
	sgl_in_capsule(q->send_buf, 0, 0xffffffffu);
	o = run(q, SQE_SIZE + 4096, cid, &r);
	EXPECT_STATUS(o, r, SC_SGL_INVALID_OFFSET | SC_DNR, "in-capsule length 4 GiB - 1");
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * In-capsule offsets past the data: beyond the port's in-capsule size, wrapping around,
 * and (stricter than the C transport, which checks only the port's size and would use
 * stale bytes) past what this capsule carried. SGL Offset Invalid each time.
 */
static bool case_in_capsule_offsets(void)
{
	struct { uint64_t off; uint32_t len; size_t sent; } t[] = {
		{ 0, 4096, 1024 },		/* longer than what arrived */
		{ 512, 512, 512 },		/* past what arrived */
		{ 0, 8192, 4096 },		/* longer than the port's size */
		{ 1u << 20, 512, 4096 },	/* past any in-capsule size */
		{ UINT64_MAX - 255, 512, 4096 },	/* wraps */
	};
	char wrong[400] = "";
	uint16_t cid;
	struct conn *a, *q;
	struct response r;
	enum outcome o;
	bool ok = false;
	unsigned int i;

	if (!open_queues(&a, &q, 16))
		goto out;
	/* Every row is tried while the queue lasts, and each wrong answer named. */
	for (i = 0; i < sizeof(t) / sizeof(t[0]) && !q->gone; i++) {
		rw_sqe(q, OPC_WRITE, 0, t[i].len / 512, &cid);
		sgl_in_capsule(q->send_buf, t[i].off, t[i].len);
		o = run(q, SQE_SIZE + t[i].sent, cid, &r);
		if (o != ANSWERED || r.status != (SC_SGL_INVALID_OFFSET | SC_DNR)) {
			size_t at = strlen(wrong);

			snprintf(wrong + at, sizeof(wrong) - at, " offset %llu length %u (%zu sent): %s %#x;",
				 (unsigned long long)t[i].off, t[i].len, t[i].sent, outcome_name(o),
				 o == ANSWERED ? r.status : 0);
			say("  %s\n", wrong + at);
		}
	}
	EXPECT(!wrong[0], "expected SGL Offset Invalid for each, got:%s", wrong);
	/* In-capsule data on a Read is refused (Invalid Field). */
	rw_sqe(q, OPC_READ, 0, 8, &cid);
	sgl_in_capsule(q->send_buf, 0, 4096);
	o = run(q, SQE_SIZE + 4096, cid, &r);
	EXPECT_STATUS(o, r, SC_INVALID_FIELD | SC_DNR, "in-capsule data on a Read");
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * In-capsule data at a non-zero offset into the capsule's data area: a Write of one
 * block whose data starts at byte 1024, then one that ends at the last byte of a 4 KiB
 * in-capsule area (offset 3584), each followed by a keyed Read of the same block. The
 * block must read back as the bytes at the offset, not as those before it.
 */
static bool case_in_capsule_at_offset(void)
{
	static const uint64_t offsets[] = { 1024, 3584 };
	struct conn *a = NULL, *q = NULL;
	struct response r;
	enum outcome o;
	bool ok = false;
	unsigned int i;
	uint16_t cid;

	if (!open_queues(&a, &q, 16))
		goto out;
	for (i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		uint64_t off = offsets[i];
		uint8_t *data = q->send_buf + SQE_SIZE;

		rw_sqe(q, OPC_WRITE, 8 + i, 1, &cid);
		sgl_in_capsule(q->send_buf, off, 512);
		/* Before the offset, bytes that must not land; at it, the block's. */
		memset(data, 0xee, off);
		for (unsigned int b = 0; b < 512; b++)
			data[off + b] = (uint8_t)(b * 7 + i + 1);
		o = run(q, SQE_SIZE + off + 512, cid, &r);
		EXPECT_STATUS(o, r, 0, "an in-capsule Write at offset 1024 or 3584");
		rw_sqe(q, OPC_READ, 8 + i, 1, &cid);
		memset(q->data_buf, 0, 512);
		sgl_keyed(q, q->send_buf, 0, 512, q->data_mr->rkey, SGL_KEYED);
		o = run(q, SQE_SIZE, cid, &r);
		EXPECT_STATUS(o, r, 0, "the Read of the block written in-capsule");
		for (unsigned int b = 0; b < 512; b++)
			EXPECT(q->data_buf[b] == (uint8_t)(b * 7 + i + 1),
			       "in-capsule data at offset %llu: byte %u reads back %#x, written %#x",
			       (unsigned long long)off, b, q->data_buf[b], (uint8_t)(b * 7 + i + 1));
	}
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * Commands on a queue before its Connect: nvmet core refuses them (an error status), on
 * admin and I/O queues; an I/O queue Connect naming no controller is refused too.
 */
static bool case_before_connect(void)
{
	uint16_t cid;
	struct conn *q = conn_open(0, AQ_DEPTH, AQ_DEPTH - 1);
	struct response r;
	enum outcome o;
	bool ok = false;

	EXPECT(q && !q->gone, "no admin queue");
	o = identify(q, 4096, q->data_mr->rkey, &r);
	EXPECT(o == ANSWERED && r.status, "Identify before Connect: %s, status %#x", outcome_name(o), r.status);
	o = nvmf_enable(q, &r);
	EXPECT(o == ANSWERED && r.status, "Property Set before Connect: %s, status %#x", outcome_name(o), r.status);
	conn_close(q);
	q = conn_open(1, 16, 15);
	EXPECT(q && !q->gone, "no I/O queue");
	rw_sqe(q, OPC_READ, 0, 8, &cid);
	sgl_keyed(q, q->send_buf, 0, 4096, q->data_mr->rkey, SGL_KEYED);
	o = run(q, SQE_SIZE, cid, &r);
	EXPECT(o == ANSWERED && r.status, "Read before Connect: %s, status %#x", outcome_name(o), r.status);
	o = nvmf_connect(q, 1, 15, 0x7777, true, &r);
	EXPECT(o == ANSWERED && r.status, "I/O Connect to no controller: %s, status %#x", outcome_name(o), r.status);
	ok = true;
out:
	conn_close(q);
	return ok;
}

/*
 * Connect requests whose private data is shorter than struct nvme_rdma_cm_req (32
 * bytes), cut from a well-formed admin queue's: none, 1, 4 and 7 bytes (the record
 * format, qid, hrqsize and hsqsize end at byte 8), 8 and 31 (those fields whole, the
 * record still short). Each is refused with NVME_RDMA_CM_INVALID_LEN (an accepted one is
 * closed at once). Only iWARP (siw)
 * hands the target the bytes as sent: the IB CM (rxe) pads a REQ's private data to 56
 * bytes with zeros, and a padded request is a full one, so over IB the case is skipped.
 */
#define CM_INVALID_LEN 1

static bool case_short_private_data(void)
{
	static const uint8_t lens[] = { 0, 1, 4, 7, 8, 31 };
	char wrong[192] = "";
	uint8_t pd[32] = { 0 };
	struct conn *q = NULL;
	bool ok = false;
	unsigned int i;

	put16(pd + 4, AQ_DEPTH);
	put16(pd + 6, AQ_DEPTH - 1);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		q = conn_open_raw(lens[i] ? pd : NULL, lens[i]);
		EXPECT(q, "connect attempt with %u bytes failed locally", lens[i]);
		if (q->id->verbs->device->transport_type != IBV_TRANSPORT_IWARP) {
			printf("  short-private-data: skipped: the IB CM pads private data (run it over siw)\n");
			ok = true;
			goto out;
		}
		/* Every length is tried, and each wrong answer named. */
		if (!q->gone || q->reject != CM_INVALID_LEN) {
			size_t at = strlen(wrong);

			if (q->gone)
				snprintf(wrong + at, sizeof(wrong) - at, " %u bytes: refused with %d;", lens[i],
					 q->reject);
			else
				snprintf(wrong + at, sizeof(wrong) - at, " %u bytes: accepted;", lens[i]);
		}
		conn_close(q);
		q = NULL;
	}
	EXPECT(!wrong[0], "expected reject %d for each, got:%s", CM_INVALID_LEN, wrong);
	ok = true;
out:
	conn_close(q);
	return ok;
}

/*
 * Commands that may reach the target before its RDMA CM has reported the connection
 * established: the host posts its Connect and a Property Get (CAP) together as soon as
 * the connection is established on its side, while the target's CM may still be
 * handling the RTU (IB) or its MPA reply (iWARP). 64 fresh admin queues; on each both
 * commands are answered (the Connect with status 0) and the controller then enables.
 * None may be lost between the receive and the ESTABLISHED event.
 */
#define EARLY_ROUNDS 64
#define FCTYPE_PROPERTY_GET 0x04

static bool case_early_commands(void)
{
	struct conn *q = NULL;
	struct response r;
	bool ok = false;
	uint16_t cid;
	int round;

	for (round = 0; round < EARLY_ROUNDS; round++) {
		uint8_t *s;

		q = conn_open(0, AQ_DEPTH, AQ_DEPTH - 1);
		EXPECT(q && !q->gone, "round %d: no admin queue", round);
		s = sqe_at(q, 0, OPC_FABRICS, &cid);
		s[4] = FCTYPE_CONNECT;
		put16(s + 44, AQ_DEPTH - 1);
		connect_data(q->data_buf, 0xffff);
		sgl_keyed(q, s, 0, 1024, q->data_mr->rkey, SGL_KEYED);
		s = sqe_at(q, 1, OPC_FABRICS, &cid);
		s[4] = FCTYPE_PROPERTY_GET;
		s[40] = 1; /* 8 bytes */
		put32(s + 44, 0); /* CAP */
		{
			struct ibv_sge sge[2] = {
				{ (uintptr_t)q->send_buf, SQE_SIZE, q->send_mr->lkey },
				{ (uintptr_t)(q->send_buf + SQE_SIZE), SQE_SIZE, q->send_mr->lkey },
			};
			struct ibv_send_wr wr[2] = {
				{ .wr_id = 3000, .next = &wr[1], .sg_list = &sge[0], .num_sge = 1,
				  .opcode = IBV_WR_SEND },
				{ .wr_id = 3001, .sg_list = &sge[1], .num_sge = 1, .opcode = IBV_WR_SEND },
			}, *bad;
			uint64_t end = now_ms() + TIMEOUT_MS;
			bool connected = false, got = false;
			enum outcome o = ANSWERED;
			int n;

			EXPECT(ibv_post_send(q->id->qp, wr, &bad) == 0, "round %d: post failed", round);
			for (n = 0; n < 2 && (o = next_response(q, end, &r)) == ANSWERED; n++) {
				if (r.cid == cid) {
					got = true;
				} else {
					EXPECT(r.status == 0, "round %d: Connect status %#x", round, r.status);
					connected = true;
				}
			}
			EXPECT(o == ANSWERED && connected && got,
			       "round %d: Connect %s, Property Get %s, then %s", round,
			       connected ? "answered" : "lost", got ? "answered" : "lost", outcome_name(o));
		}
		EXPECT(nvmf_enable(q, &r) == ANSWERED && r.status == 0, "round %d: enable status %#x",
		       round, r.status);
		conn_close(q);
		q = NULL;
	}
	ok = true;
out:
	conn_close(q);
	return ok;
}

/*
 * Absurd queue sizes. In the CM private data: rejected with the NVMe/RDMA CM status
 * (hsqsize, hrqsize out of range, record format). In the Connect command: an error
 * status (sqsize 0, or an I/O queue's beyond the controller's MQES).
 */
static bool case_queue_sizes(void)
{
	struct { uint16_t qid, hrq, hsq, recfmt; int want; } t[] = {
		{ 0, AQ_DEPTH, 0xffff, 0, CM_INVALID_HSQSIZE },
		{ 0, AQ_DEPTH, AQ_DEPTH, 0, CM_INVALID_HSQSIZE },
		{ 0, 0, 15, 0, CM_INVALID_HRQSIZE },
		{ 0, 0xffff, 15, 0, CM_INVALID_HRQSIZE },
		{ 1, 16, 0xffff, 0, CM_INVALID_HSQSIZE },
		{ 1, 0xffff, 15, 0, CM_INVALID_HRQSIZE },
		{ 0, AQ_DEPTH, 15, 7, CM_INVALID_RECFMT },
	};
	uint16_t cntlid;
	struct conn *q = NULL, *a = NULL;
	struct response r;
	enum outcome o;
	bool ok = false;
	unsigned int i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint8_t pd[32] = { 0 };

		put16(pd, t[i].recfmt);
		put16(pd + 2, t[i].qid);
		put16(pd + 4, t[i].hrq);
		put16(pd + 6, t[i].hsq);
		q = conn_open_raw(pd, sizeof(pd));
		EXPECT(q, "connect attempt %u failed locally", i);
		EXPECT(q->gone && q->reject == t[i].want,
		       "qid %u hrqsize %u hsqsize %u recfmt %u: %s (reject status %d), expected reject %d",
		       t[i].qid, t[i].hrq, t[i].hsq, t[i].recfmt, q->gone ? "refused" : "accepted",
		       q->reject, t[i].want);
		conn_free(q);
		q = NULL;
	}
	/* Connect commands with sqsize 0 and beyond the admin queue's 32. */
	q = conn_open(0, AQ_DEPTH, AQ_DEPTH - 1);
	EXPECT(q && !q->gone, "no admin queue");
	o = nvmf_connect(q, 0, 0, 0xffff, false, &r);
	/* nvmet core answers it with an error status: silence is a failure too. */
	EXPECT(o == ANSWERED && r.status, "admin Connect with sqsize 0: %s, status %#x", outcome_name(o),
	       o == ANSWERED ? r.status : 0);
	conn_close(q);
	/* (An admin Connect's sqsize beyond 32 is taken by nvmet core, which bounds only
	 * I/O queues by MQES; the queue's real depth is the CM's, checked above.) */
	a = admin_queue(&cntlid);
	EXPECT(a, "no admin queue");
	q = conn_open(1, 16, 15);
	EXPECT(q && !q->gone, "no I/O queue");
	o = nvmf_connect(q, 1, 0xffff, cntlid, true, &r);
	EXPECT(o == ANSWERED && r.status, "I/O Connect with sqsize 65535: %s, status %#x", outcome_name(o),
	       o == ANSWERED ? r.status : 0);
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * Bursts beyond the queue depth: 4 times the depth of Reads sent back to back. The
 * target answers them all (RNR retries pace the sender) or ends the queue; nothing hangs.
 */
static bool case_burst(void)
{
	const uint16_t depth = 8;
	uint16_t cid = 0;
	struct conn *a, *q;
	struct ibv_send_wr wr[4 * 8], *bad;
	struct ibv_sge sge[4 * 8];
	struct response r;
	int i, others = 0;
	enum outcome o;
	bool ok = false;

	if (!open_queues(&a, &q, depth))
		goto out;
	for (i = 0; i < 4 * depth; i++) {
		uint8_t *s = rw_sqe_at(q, i, OPC_READ, i, 1, &cid);

		sgl_keyed(q, s, i * 512, 512, q->data_mr->rkey, SGL_KEYED);
		sge[i] = (struct ibv_sge){ (uintptr_t)s, SQE_SIZE, q->send_mr->lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = 1000 + i, .next = i + 1 < 4 * depth ? &wr[i + 1] : NULL,
					      .sg_list = &sge[i], .num_sge = 1, .opcode = IBV_WR_SEND };
	}
	EXPECT(ibv_post_send(q->id->qp, wr, &bad) == 0, "burst post failed");
	o = wait_response(q, cid, &r, &others);
	EXPECT(o != TIMED_OUT, "a burst of %d on a %u-deep queue: no answer, no teardown", 4 * depth, depth);
	say("  burst: %s, %d other answers\n", outcome_name(o), others);
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * sq_full_waits of this queue (qid 1, the host's source port) in nvmet_rdma_rs's
 * debugfs; -1 when the target is another transport (no such file), -2 when the file
 * has no line for the queue.
 */
static long long target_sq_full_waits(struct conn *q)
{
	FILE *f = fopen("/sys/kernel/debug/nvmet_rdma_rs/queues", "r");
	char line[512], port[16];
	long long waits = -2;

	if (!f)
		return -1;
	snprintf(port, sizeof(port), ":%u ", ntohs(rdma_get_src_port(q->id)));
	while (fgets(line, sizeof(line), f)) {
		const char *w = strstr(line, " sq_full_waits ");

		if (strstr(line, " qid 1 host ") && strstr(line, port) && w)
			waits = strtoll(w + strlen(" sq_full_waits "), NULL, 10);
	}
	fclose(f);
	return waits;
}

/*
 * Posts n capsules of q->send_buf (SQE_SIZE each) back to back and waits for their n
 * responses; false, with `why` set, unless all came with status 0.
 */
static bool run_back_to_back(struct conn *q, int n, const char *what)
{
	struct ibv_send_wr wr[16], *bad;
	struct ibv_sge sge[16];
	uint64_t end = now_ms() + TIMEOUT_MS;
	struct response r;
	enum outcome o = ANSWERED;
	int i;

	for (i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)(q->send_buf + i * SQE_SIZE), SQE_SIZE, q->send_mr->lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = 2000 + i, .next = i + 1 < n ? &wr[i + 1] : NULL,
					      .sg_list = &sge[i], .num_sge = 1, .opcode = IBV_WR_SEND };
	}
	EXPECT(ibv_post_send(q->id->qp, wr, &bad) == 0, "%s: post failed", what);
	for (i = 0; i < n && (o = next_response(q, end, &r)) == ANSWERED; i++)
		EXPECT(r.status == 0, "%s: command %u: status %#x", what, r.cid, r.status);
	EXPECT(o == ANSWERED, "%s: %d of %d answered, then %s", what, i, n, outcome_name(o));
	return true;
out:
	return false;
}

/*
 * More work requests than the send queue holds: a host whose receive queue is 1 deep
 * (HRQSIZE, the target's send queue) and whose send queue is 32 (HSQSIZE) sends four
 * 1 MiB Writes back to back (on rxe eight RDMA READs and a SEND each: the target's send
 * queue holds about one such command), then four 1 MiB Reads of the same blocks. Commands wait for
 * send queue space, oldest first, and are all served: every status is 0, the data reads
 * back as written, and nvmet_rdma_rs counts the waits (sq_full_waits).
 */
#define SQ_FULL_COMMANDS 4 /* DATA_BUF_SIZE in all */
#define SQ_FULL_BYTES (1 << 20)

static bool case_send_queue_full(void)
{
	uint16_t cntlid, cid;
	struct conn *a, *q = NULL;
	struct response r;
	long long waits;
	bool ok = false;
	size_t i;
	int pass;

	a = admin_queue(&cntlid);
	EXPECT(a, "no admin queue");
	q = conn_open(1, 1, 31);
	EXPECT(q && !q->gone, "no I/O queue with HRQSIZE 1, HSQSIZE 31");
	EXPECT(nvmf_connect(q, 1, 31, cntlid, true, &r) == ANSWERED && r.status == 0,
	       "I/O Connect: status %#x", r.status);
	for (pass = 0; pass < 2; pass++) {
		uint8_t opc = pass == 0 ? OPC_WRITE : OPC_READ;

		if (pass == 0)
			for (i = 0; i < SQ_FULL_COMMANDS * SQ_FULL_BYTES; i++)
				q->data_buf[i] = (uint8_t)(i * 7 + i / 4093);
		else
			memset(q->data_buf, 0, SQ_FULL_COMMANDS * SQ_FULL_BYTES);
		for (i = 0; i < SQ_FULL_COMMANDS; i++) {
			const uint16_t nlb = SQ_FULL_BYTES / 512;
			uint8_t *s = rw_sqe_at(q, i, opc, 65536 + i * nlb, nlb, &cid);

			sgl_keyed(q, s, i * SQ_FULL_BYTES, SQ_FULL_BYTES, q->data_mr->rkey, SGL_KEYED);
		}
		if (!run_back_to_back(q, SQ_FULL_COMMANDS, pass == 0 ? "Writes" : "Reads"))
			goto out;
	}
	for (i = 0; i < SQ_FULL_COMMANDS * SQ_FULL_BYTES; i++)
		EXPECT(q->data_buf[i] == (uint8_t)(i * 7 + i / 4093), "byte %zu read back %#x, wrote %#x", i,
		       q->data_buf[i], (uint8_t)(i * 7 + i / 4093));
	waits = target_sq_full_waits(q);
	EXPECT(waits != -2, "nvmet_rdma_rs's debugfs does not list the queue");
	EXPECT(waits != 0, "eight 1 MiB commands on a send queue for about one: none waited");
	printf("  send-queue-full: %lld waits%s\n", waits, waits < 0 ? " (not nvmet_rdma_rs: not counted)" : "");
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * Keep-alive: a controller made with a 1 s keep-alive timeout stays while the host sends
 * Keep Alive commands every 300 ms for 3 s; once they stop, nvmet core's timer ends the
 * controller and the transport its queue (`delete_ctrl`) within a few seconds.
 */
static bool case_keep_alive(void)
{
	uint16_t cntlid, cid;
	struct conn *a;
	struct response r;
	enum outcome o;
	bool ok = false;
	int i;

	connect_kato = 1000;
	a = admin_queue(&cntlid);
	connect_kato = 0;
	EXPECT(a, "no admin queue");
	for (i = 0; i < 10; i++) {
		usleep(300 * 1000);
		sqe(a, 0x18, &cid);
		o = run(a, SQE_SIZE, cid, &r);
		EXPECT(o == ANSWERED && r.status == 0, "Keep Alive %d: %s, status %#x", i, outcome_name(o),
		       r.status);
	}
	EXPECT(wait_torn_down(a), "the controller outlived its keep-alive timeout");
	ok = true;
out:
	conn_close(a);
	return ok;
}

/*
 * Disconnects in the middle of an RDMA READ: a 1 MiB Write (the target READs host
 * memory), then the host's QP, MR and connection go at once, after 0 to 9 ms.
 */
static bool case_disconnect_mid_read(void)
{
	uint16_t cid;
	struct conn *a = NULL, *q = NULL;
	bool ok = false;
	int i;

	for (i = 0; i < 10; i++) {
		if (!open_queues(&a, &q, 16))
			goto out;
		rw_sqe(q, OPC_WRITE, 0, 2048, &cid);
		sgl_keyed(q, q->send_buf, 0, 1 << 20, q->data_mr->rkey, SGL_KEYED);
		EXPECT(send_capsule(q, SQE_SIZE) == 0, "send failed");
		usleep(i * 1000);
		/* No disconnect handshake: the host vanishes. */
		q->gone = true;
		conn_free(q);
		q = NULL;
		conn_close(a);
		a = NULL;
	}
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * A reconnect storm: 132 I/O queues of two controllers, each with a Read in flight on the
 * slow namespace (-S, completing seconds later), and then the host vanishes. Each queue's teardown waits for its
 * Read, so for seconds more than 128 queues (NVMET_RDMA_BACKLOG) are being torn down: a
 * new controller's admin queue is refused (NVME_RDMA_CM_NO_RSC). Once the Reads have
 * completed, a new admin queue is served again. (The C transport's guard counts only
 * the disconnecting queues that never joined a controller, so this is ours only.)
 */
#define STORM_CTRLS 2
#define STORM_QUEUES 66 /* per controller: 132 in all */
#define CM_NO_RSC 6

static bool case_storm(void)
{
	struct conn *a[STORM_CTRLS] = { 0 }, *q[STORM_CTRLS * STORM_QUEUES] = { 0 }, *late = NULL;
	size_t saved = data_buf_size;
	uint16_t cntlid, cid;
	bool ok = false;
	int i, j, n = 0;
	uint64_t end;

	if (!opt_slow_nsid) {
		/* (tests/lib/nvmet.sh always gives one, and checks the guard's log line) */
		printf("  storm: skipped: needs -S NSID, a namespace whose commands complete after seconds\n");
		return true;
	}
	data_buf_size = 64 * 1024;
	for (i = 0; i < STORM_CTRLS; i++) {
		a[i] = admin_queue(&cntlid);
		EXPECT(a[i], "admin queue %d failed", i);
		for (j = 1; j <= STORM_QUEUES; j++, n++) {
			q[n] = io_queue_qid(cntlid, j, 4);
			EXPECT(q[n], "I/O queue %d of controller %u failed", j, cntlid);
		}
	}
	/* All Reads at once: the slow namespace completes each seconds after it came. */
	for (i = 0; i < n; i++) {
		uint8_t *s = rw_sqe(q[i], OPC_READ, 0, 8, &cid);

		put32(s + 4, opt_slow_nsid);
		sgl_keyed(q[i], s, 0, 4096, q[i]->data_mr->rkey, SGL_KEYED);
		EXPECT(send_capsule(q[i], SQE_SIZE) == 0, "the Read on queue %d was not sent", i);
	}
	/* The host vanishes (no disconnect handshake); the admin queues go too. */
	for (i = 0; i < n; i++) {
		q[i]->gone = true;
		conn_free(q[i]);
		q[i] = NULL;
	}
	for (i = 0; i < STORM_CTRLS; i++) {
		a[i]->gone = true;
		conn_free(a[i]);
		a[i] = NULL;
	}
	late = conn_open(0, AQ_DEPTH, AQ_DEPTH - 1);
	EXPECT(late, "the admin connect during the storm failed locally");
	if (opt_c_target)
		/* The C transport's guard counts the disconnecting queues whose controller is
		 * the new queue's: none yet (NULL), so only queues that never joined one. */
		EXPECT(!late->gone, "C: an admin queue during the teardown of %d queues of two controllers refused (reject status %d)",
		       n, late->reject);
	else
		EXPECT(late->gone && late->reject == CM_NO_RSC,
		       "an admin queue during the teardown of %d queues: %s (reject status %d), expected reject %d",
		       n, late->gone ? "refused" : "accepted", late->reject, CM_NO_RSC);
	conn_free(late);
	late = NULL;
	/* The Reads complete (the namespace's delay) and the queues go: served again. */
	end = now_ms() + 90000;
	while (!(late = admin_queue(&cntlid)) && now_ms() < end)
		sleep(1);
	EXPECT(late, "no admin queue is served 90 s after the storm");
	say("  storm: %d queues torn down at once; an admin queue is served again\n", n);
	ok = true;
out:
	for (i = 0; i < STORM_CTRLS * STORM_QUEUES; i++)
		conn_close(q[i]);
	for (i = 0; i < STORM_CTRLS; i++)
		conn_close(a[i]);
	conn_close(late);
	data_buf_size = saved;
	return ok;
}

/* --- fault injection on the data path ---------------------------------------------- */

/* Writes value to /sys/kernel/debug/ATTR/FILE (a fault-injection attribute). */
static bool fault_set(const char *attr, const char *file, const char *value)
{
	char path[128];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/sys/kernel/debug/%s/%s", attr, file);
	f = fopen(path, "w");
	if (!f)
		return false;
	ok = fputs(value, f) >= 0;
	return fclose(f) == 0 && ok;
}

/* Reads /sys/kernel/debug/ATTR/FILE as a number; -2 if it cannot be read. */
static long long fault_get(const char *attr, const char *file)
{
	char path[128];
	long long v = -2;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/%s/%s", attr, file);
	f = fopen(path, "r");
	if (!f)
		return -2;
	if (fscanf(f, "%lld", &v) != 1)
		v = -2;
	fclose(f);
	return v;
}

/* The text of kernel function `name`: its address and the next symbol's (/proc/kallsyms). */
static bool text_range(const char *name, unsigned long long *start, unsigned long long *end)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	unsigned long long addr, next = ~0ULL;
	char line[512], sym[256], type;

	*start = 0;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &addr, &type, sym) == 3 && (type == 'T' || type == 't') &&
		    strcmp(sym, name) == 0)
			*start = addr;
	rewind(f);
	while (*start && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx", &addr) == 1 && addr > *start && addr < next)
			next = addr;
	fclose(f);
	*end = next;
	return *start && next != ~0ULL;
}

/* Disarms fault-injection attribute attr. */
static void fault_disarm(const char *attr)
{
	fault_set(attr, "probability", "0");
	fault_set(attr, "times", "0");
}

/*
 * Arms attr (failslab or fail_page_alloc) to fail the first allocation, sleeping or not,
 * whose stack holds kernel function `function`, once. False if the kernel has no such
 * files or function.
 */
static bool fault_arm(const char *attr, const char *function)
{
	unsigned long long start, end;
	char v[32];
	bool ok;

	if (!text_range(function, &start, &end))
		return false;
	fault_disarm(attr);
	snprintf(v, sizeof(v), "%#llx", start);
	ok = fault_set(attr, "require-start", v);
	snprintf(v, sizeof(v), "%#llx", end);
	ok = ok && fault_set(attr, "require-end", v);
	ok = ok && fault_set(attr, "reject-start", "0") && fault_set(attr, "reject-end", "0");
	ok = ok && fault_set(attr, "stacktrace-depth", "32") && fault_set(attr, "ignore-gfp-wait", "N");
	ok = ok && fault_set(attr, "task-filter", "N") && fault_set(attr, "space", "0");
	ok = ok && fault_set(attr, "interval", "1") && fault_set(attr, "verbose", "1");
	if (ok && strcmp(attr, "fail_page_alloc") == 0)
		ok = fault_set(attr, "min-order", "0") && fault_set(attr, "ignore-gfp-highmem", "N");
	else if (ok)
		ok = fault_set(attr, "cache-filter", "N");
	ok = ok && fault_set(attr, "times", "1") && fault_set(attr, "probability", "100");
	if (!ok)
		fault_disarm(attr);
	return ok;
}

/*
 * Allocation failures on the data path of one I/O command, injected by the kernel's
 * fault injection (failslab, fail_page_alloc, with the stack-trace filter): the data
 * buffer (nvmet_req_alloc_sgls: its scatterlist, then a page) and the rdma_rw context
 * (rdma_rw_ctx_init: its SGE and work request arrays). Only allocations with that
 * function on their stack are candidates, and the first one after arming fails. For a
 * 128 KiB keyed Write and then Read (32 pages, which rdma_rw maps with a work request
 * array): the command is answered Internal Error (no DNR: a host retries it), the
 * failure must have been injected (`times` reads 0 after), and the queue goes on: the
 * same command again gets status 0, and the Read returns what the Write wrote. (A post
 * that fails is not injected: rxe's post allocates nothing.) Skipped without the
 * fault-injection files (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC,
 * CONFIG_FAULT_INJECTION_STACKTRACE_FILTER).
 */
#define SC_INTERNAL 0x6
#define FAULT_BYTES (128 * 1024)

static bool case_data_path_faults(void)
{
	static const struct {
		const char *attr, *function;
	} faults[] = {
		{ "failslab", "nvmet_req_alloc_sgls" },
		{ "fail_page_alloc", "nvmet_req_alloc_sgls" },
		{ "failslab", "rdma_rw_ctx_init" },
	};
	static const uint8_t opcodes[] = { OPC_WRITE, OPC_READ };
	const char *attr = NULL;
	struct conn *a = NULL, *q = NULL;
	struct response r;
	enum outcome o;
	bool ok = false;
	unsigned int i, j;
	uint16_t cid;

	if (fault_get("failslab", "times") == -2 || fault_get("fail_page_alloc", "times") == -2) {
		printf("  data-path-faults: skipped: no fault injection in this kernel\n");
		return true;
	}
	if (!open_queues(&a, &q, 16))
		goto out;
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		for (j = 0; j < 2; j++) {
			const char *what = opcodes[j] == OPC_WRITE ? "Write" : "Read";
			uint64_t lba = 1024 + i * (FAULT_BYTES / 512);
			long long left;

			if (opcodes[j] == OPC_WRITE)
				for (unsigned int b = 0; b < FAULT_BYTES; b++)
					q->data_buf[b] = (uint8_t)(b * 13 + i + 1);
			attr = faults[i].attr;
			EXPECT(fault_arm(attr, faults[i].function), "%s cannot be aimed at %s", attr,
			       faults[i].function);
			rw_sqe(q, opcodes[j], lba, FAULT_BYTES / 512, &cid);
			sgl_keyed(q, q->send_buf, opcodes[j] == OPC_READ ? FAULT_BYTES : 0, FAULT_BYTES,
				  q->data_mr->rkey, SGL_KEYED);
			o = run(q, SQE_SIZE, cid, &r);
			left = fault_get(attr, "times");
			fault_disarm(attr);
			attr = NULL;
			EXPECT(left == 0, "%s in %s on a 128 KiB %s: nothing was injected", faults[i].attr,
			       faults[i].function, what);
			EXPECT(o == ANSWERED && r.status == SC_INTERNAL,
			       "%s in %s on a 128 KiB %s: %s, status %#x, expected %#x", faults[i].attr,
			       faults[i].function, what, outcome_name(o), o == ANSWERED ? r.status : 0,
			       SC_INTERNAL);
			/* The queue goes on: the same command again. */
			rw_sqe(q, opcodes[j], lba, FAULT_BYTES / 512, &cid);
			sgl_keyed(q, q->send_buf, opcodes[j] == OPC_READ ? FAULT_BYTES : 0, FAULT_BYTES,
				  q->data_mr->rkey, SGL_KEYED);
			o = run(q, SQE_SIZE, cid, &r);
			EXPECT_STATUS(o, r, 0, "the same command after the injected failure");
		}
		EXPECT(memcmp(q->data_buf, q->data_buf + FAULT_BYTES, FAULT_BYTES) == 0,
		       "after %s in %s: the Read does not return what the Write wrote", faults[i].attr,
		       faults[i].function);
		say("  data-path-faults: %s in %s: Internal Error, then served\n", faults[i].attr,
		    faults[i].function);
	}
	ok = true;
out:
	if (attr)
		fault_disarm(attr);
	conn_close(q);
	conn_close(a);
	return ok;
}

/*
 * Random capsules (seeded): random lengths, opcodes, flags and SGL descriptors, on admin
 * and I/O queues. Any answer or teardown is fine; a hang or a target that stops serving
 * is not.
 */
static bool case_random_one(void)
{
	uint16_t cid;
	struct conn *a, *q, *c;
	size_t len;
	bool ok = false;
	unsigned int n, i;

	if (!open_queues(&a, &q, 16))
		goto out;
	n = 1 + rnd_below(8);
	for (i = 0; i < n; i++) {
		uint8_t *s;
		enum outcome o;
		struct response r;

		static const uint8_t opcodes[] = { OPC_READ, OPC_WRITE, OPC_FLUSH, OPC_FABRICS,
						   OPC_ADMIN_IDENTIFY };
		uint8_t opcode = rnd_below(3) ? opcodes[rnd_below(5)] : rnd();

		c = rnd_below(4) ? q : a;
		if (c->gone)
			break;
		/* An Asynchronous Event Request is answered only when an event happens. */
		if (c == a && opcode == 0x0c)
			opcode = OPC_ADMIN_IDENTIFY;
		s = sqe(c, opcode, &cid);
		for (unsigned int b = 4; b < SQE_SIZE; b++)
			if (rnd_below(4) == 0)
				s[b] = rnd();
		if (rnd_below(2))
			sgl_keyed(c, s, rnd_below(DATA_BUF_SIZE), rnd_below(1 << 24),
				  rnd_below(4) ? c->data_mr->rkey : (uint32_t)rnd(),
				  rnd_below(2) ? SGL_KEYED : rnd());
		if (rnd_below(8) == 0)
			s[1] = rnd();
		len = rnd_below(4) ? SQE_SIZE + rnd_below(8192) : rnd_below(SEND_BUF_SIZE + 1);
		for (size_t b = SQE_SIZE; b < len; b++)
			c->send_buf[b] = rnd();
		o = run(c, len, cid, &r);
		EXPECT(o != TIMED_OUT, "capsule %u (%zu bytes, opcode %#x): no answer, no teardown", i,
		       len, s[0]);
	}
	ok = true;
out:
	conn_close(q);
	conn_close(a);
	return ok;
}

static const struct {
	const char *name;
	bool (*run)(void);
} cases[] = {
	{ "truncated-capsule", case_truncated },
	{ "oversized-capsule", case_oversized },
	{ "sgl-types", case_sgl_types },
	{ "bad-keys", case_bad_keys },
	{ "lengths", case_lengths },
	{ "in-capsule-offsets", case_in_capsule_offsets },
	{ "in-capsule-at-offset", case_in_capsule_at_offset },
	{ "before-connect", case_before_connect },
	{ "short-private-data", case_short_private_data },
	{ "early-commands", case_early_commands },
	{ "queue-sizes", case_queue_sizes },
	{ "burst", case_burst },
	{ "send-queue-full", case_send_queue_full },
	{ "keep-alive", case_keep_alive },
	{ "disconnect-mid-read", case_disconnect_mid_read },
	{ "storm", case_storm },
	{ "data-path-faults", case_data_path_faults },
};

static void check(const char *name, bool (*fn)(void))
{
	uint64_t t0 = now_ms();
	bool ok;

	why[0] = 0;
	ok = fn();
	if (ok && !target_serves()) {
		ok = false;
		snprintf(why, sizeof(why), "afterwards, a well-behaved host is not served");
	}
	printf("case %s: %s (%llu ms)%s%s\n", name, ok ? "ok" : "FAILED",
	       (unsigned long long)(now_ms() - t0), ok ? "" : ": ", ok ? "" : why);
	fflush(stdout);
	if (!ok)
		failures++;
}

static void usage(void)
{
	unsigned int i;

	fprintf(stderr, "usage: nvmf-hostile -a ADDR [-p PORT] -n SUBNQN [-S SLOW_NSID] [-C] [-v] [-c CASE]... | [-s SEED -i N]\ncases:");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(stderr, " %s", cases[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *only[32];
	unsigned int n_only = 0, i, j;
	unsigned long long seed = 0, iterations = 0;
	bool random_mode = false;
	int opt;

	while ((opt = getopt(argc, argv, "a:p:n:c:s:i:S:vC")) != -1) {
		switch (opt) {
		case 'a': opt_addr = optarg; break;
		case 'p': opt_port = optarg; break;
		case 'n': opt_nqn = optarg; break;
		case 'c':
			if (n_only == 32)
				usage();
			only[n_only++] = optarg;
			break;
		case 's': seed = strtoull(optarg, NULL, 0); random_mode = true; break;
		case 'i': iterations = strtoull(optarg, NULL, 0); break;
		case 'S': opt_slow_nsid = strtoul(optarg, NULL, 0); break;
		case 'v': verbose = true; break;
		case 'C': opt_c_target = true; break;
		default: usage();
		}
	}
	if (!opt_addr || !opt_nqn)
		usage();
	if (!target_serves()) {
		fprintf(stderr, "nvmf-hostile: the target does not serve a well-behaved host at %s:%s\n",
			opt_addr, opt_port);
		return 1;
	}
	if (random_mode) {
		printf("random mode: seed %llu, %llu iterations\n", seed, iterations);
		for (i = 0; i < iterations; i++) {
			char name[64];

			rng_state = (seed + 1) * 0x9e3779b97f4a7c15ULL + i;
			rnd();
			snprintf(name, sizeof(name), "random-%llu-%u", seed, i);
			check(name, case_random_one);
		}
	} else {
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			bool wanted = n_only == 0;

			for (j = 0; j < n_only; j++)
				wanted |= strcmp(only[j], cases[i].name) == 0;
			if (wanted)
				check(cases[i].name, cases[i].run);
		}
	}
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}
