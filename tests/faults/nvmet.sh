# The fault-injection phases of nvmet_rdma_rs (tests/faults/lib.sh does the injecting):
# load, unload, port enable, port disable with a host connected, connect (and the first
# I/O and the disconnect), I/O, device removal (and the device's return, which repairs
# the port's listener), and the regression of issue 14 finding 3 (a port or controller
# going away closes its queues even when every allocation fails). Each phase sweeps the
# Kth candidate allocation (fi_sweep) for failslab and then fail_page_alloc, and after
# every case checks that the target recovered: no queue is left once the host is gone,
# and a fresh host connects and reads back what it wrote. Sourced after
# scripts/guest/lib.sh, tests/lib/nvmet.sh and tests/faults/lib.sh; not run.
# shellcheck shell=bash

FN_IP=$RRS_IP4_A
: "${NQN:?tests/lib/nvmet.sh first}"
FN_MOD=nvmet_rdma_rs
FN_QUEUES=/sys/kernel/debug/nvmet_rdma_rs/queues
NQN2=nqn.2026-11.io.rdma-rs:faults2
# The host's options: one I/O queue of 16 (few allocations per connect); for a host that
# must ride out a failed queue, a quick reconnect and a short loss timeout.
FN_OPTS=",nr_io_queues=1,queue_size=16"
FN_RECONNECT=",reconnect_delay=1,ctrl_loss_tmo=6"
# For a host whose subsystem leaves a port that still listens: no reconnect (its attempts
# would make short-lived queues on that port while the test counts them).
FN_NORECONNECT=",ctrl_loss_tmo=0"

# Where an injected failure is rightly absorbed (tests/faults/lib.sh, fi_judge_absorbed):
# a text of the injected-at frames -> why.
FI_ABSORBED_REASON[nvmet_req_alloc_sgls]="an I/O command's data buffer: that command is answered Internal Error without DNR and the host retries it (nvmet-hostile's data-path-faults asserts the status)"
FI_ABSORBED_REASON[rdma_rw_ctx_init]="an I/O command's rdma_rw context: that command is answered Internal Error without DNR and the host retries it (nvmet-hostile's data-path-faults asserts the status)"
FI_ABSORBED_REASON[ib_send_cm_dreq]="the disconnect request of a queue being closed could not be sent: the queue ends all the same, and the host learns it as of a request lost on the wire (its QP's errors or its keep-alive)"
FI_ABSORBED_REASON[ib_send_cm_drep]="the disconnect reply to the host's disconnect request could not be sent: the queue ends all the same, and the host's request times out as one lost on the wire"
FI_ABSORBED_REASON[debugfs_start_creating]="a debugfs entry of the transport: it loads and serves without its diagnostics files (the kernel's debugfs convention; the sweep's load check notes it)"
# (the same, where the compiler left the failing allocation's stack without
# debugfs_start_creating: clang's KASAN kernel shows debugfs_create_dir -> debugfs_get_inode)
FI_ABSORBED_REASON[debugfs_get_inode]=${FI_ABSORBED_REASON[debugfs_start_creating]}

# fn_setup: rxe0 on a veth pair, the host and the target, namespace 1 of $NQN (null_blk)
# on port 1 (4420, enabled); port 2 (4421) made but not enabled; injection aimed at the
# transport.
fn_setup() {
	kmemleak_start
	veth_setup
	rdma_link_add rxe0 rxe veth0
	fi_setup
	modprobe nvme-rdma
	modprobe nvmet
	modprobe null_blk nr_devices=2 memory_backed=1 gb=1
	# (a command the target loses is retried after 15 s, not 60)
	local p
	for p in admin_timeout io_timeout; do
		[ ! -w "/sys/module/nvme_core/parameters/$p" ] || echo 15 >"/sys/module/nvme_core/parameters/$p"
	done
	head -c 262144 /dev/urandom >/tmp/fi-pattern
	{ head -c 65536 /tmp/fi-pattern; head -c 4096 /tmp/fi-pattern; } >/tmp/fi-expect
	nvmet_subsystem "$NQN"
	nvmet_namespace "$NQN" 1 /dev/nullb0
	nvmet_port 1 ipv4 "$FN_IP" 4420
	nvmet_port 2 ipv4 "$FN_IP" 4421
	modprobe "$FN_MOD"
	nvmet_link 1 "$NQN"
	fn_retarget
}

# fn_retarget: candidates are allocations under the transport's text (it moves with
# every load).
fn_retarget() { fi_target_modules "$FN_MOD" || fail "cannot aim at $FN_MOD's text"; }

# (The helpers below avoid starting processes where they can: under TCG each costs a
# good part of a second.)

# fn_ctrls [NQN]: the host controllers of the subsystem, in any state.
fn_ctrls() {
	local c nqn
	for c in /sys/class/nvme/nvme*; do
		if [ ! -e "$c/subsysnqn" ] || ! read -r nqn <"$c/subsysnqn"; then continue; fi
		[ "$nqn" = "${1:-$NQN}" ] && echo "${c##*/}"
	done
	return 0
}

# fn_live_ctrl: the live host controller of $NQN (fails if none).
fn_live_ctrl() {
	local c nqn state
	for c in /sys/class/nvme/nvme*; do
		if [ ! -e "$c/state" ] || ! read -r nqn <"$c/subsysnqn" || ! read -r state <"$c/state"; then continue; fi
		[ "$nqn" = "$NQN" ] && [ "$state" = live ] && { echo "${c##*/}"; return 0; }
	done
	return 1
}

fn_no_ctrl() { ! compgen -G "/sys/class/nvme/nvme*" >/dev/null; }
fn_live_or_none() { fn_live_ctrl >/dev/null || fn_no_ctrl; }

# fn_drop_hosts: deletes every host controller (of any subsystem) and waits for them to go.
fn_drop_hosts() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/delete_controller" ] && { echo 1 >"$c/delete_controller"; } 2>/dev/null
	done
	fi_wait 30 fn_no_ctrl || { echo "host controllers stay: $(ls /sys/class/nvme)"; return 1; }
}

# fn_port_queues [PORT]: how many target queues the port has (all ports: every queue).
# (Lines are "queue N port P qid Q ...". The pattern is not "* port ${1:-*} *": a "*"
# that comes from a quoted expansion is a literal star, and without PORT nothing would
# ever be counted.)
fn_port_queues() {
	local line n=0
	# (a load whose debugfs files could not be made: diagnostics only, nothing to count)
	[ -e "$FN_QUEUES" ] || { echo 0; return 0; }
	while read -r line; do
		if [ -z "${1:-}" ]; then
			[[ $line != "queue "* ]] || n=$((n + 1))
		else
			[[ $line != *" port $1 "* ]] || n=$((n + 1))
		fi
	done <"$FN_QUEUES"
	echo "$n"
}
fn_no_queue() { [ "$(fn_port_queues "$@")" = 0 ]; }

fn_enabled_ports() {
	local p s n=0
	for p in "$NVMET"/ports/*; do
		for s in "$p"/subsystems/*; do [ -L "$s" ] && { n=$((n + 1)); break; }; done
	done
	echo "$n"
}
fn_refcnt_is() { local r; read -r r <"/sys/module/$FN_MOD/refcnt" && [ "$r" = "$1" ]; }

# fn_idle: no host controller, no queue on the target, and the transport held once per
# enabled port only.
fn_idle() {
	fn_drop_hosts || return 1
	fi_wait 30 fn_no_queue || { echo "queues stay:"; cat "$FN_QUEUES"; return 1; }
	fi_wait 10 fn_refcnt_is "$(fn_enabled_ports)" || { echo "refcnt $(cat "/sys/module/$FN_MOD/refcnt"), $(fn_enabled_ports) ports enabled"; return 1; }
}

# fn_dev CTRL: the block device of namespace 1 of CTRL, once it is there (10 s).
fn_dev() {
	local i b nsid
	for ((i = 0; i < 50; i++)); do
		for b in /sys/block/"$1"n*; do
			if [ ! -e "$b/nsid" ] || ! read -r nsid <"$b/nsid"; then continue; fi
			[ "$nsid" = 1 ] && [ -b "/dev/${b##*/}" ] && { echo "/dev/${b##*/}"; return 0; }
		done
		fi_sleep 0.2
	done
	return 1
}

# fn_verify DEV OFFSET_KIB: writes 64 KiB of the pattern at OFFSET (keyed: the target
# RDMA READs it) and 4 KiB after it (in the capsule), reads both back (RDMA WRITE) and
# compares.
fn_verify() {
	local dev=$1 off=$2
	dd if=/tmp/fi-pattern of="$dev" bs=64k count=1 seek=$((off / 64)) oflag=direct status=none || return 1
	dd if=/tmp/fi-pattern of="$dev" bs=4k count=1 seek=$((off / 4 + 16)) oflag=direct status=none || return 1
	dd if="$dev" of=/tmp/fi-back bs=4k count=17 skip=$((off / 4)) iflag=direct status=none || return 1
	cmp -s /tmp/fi-expect /tmp/fi-back || { echo "what was written at $off KiB does not read back"; return 2; }
}

# fn_healthy [SERVICE]: the target serves: no queue left, a fresh host connects to the
# port, writes, reads back, and disconnects; no queue left again.
fn_healthy() {
	local svc=${1:-4420} c dev
	fn_idle || return 1
	c=$(fabrics_connect "$FN_IP" "$svc" "$FN_OPTS") || { echo "a fresh host cannot connect to port $svc"; return 1; }
	dev=$(fn_dev "$c") || { echo "$c has no namespace 1"; return 1; }
	fn_verify "$dev" 1024 || return 1
	fabrics_disconnect "$c"
	fn_idle
}

# --- load: modprobe with a device present (candidates: under the text the module will
# have, see fi_target_load)
fn_load_prep() {
	[ ! -L "$NVMET/ports/1/subsystems/$NQN" ] || nvmet_unlink 1 "$NQN"
	fi_target_load "$FN_MOD" modprobe "$FN_MOD"
}
fn_load_op() { modprobe "$FN_MOD"; }
fn_load_check() {
	# A load that failed: the next case's load (or the phase's end) loads it again. One
	# that went through despite the failure must give a working transport.
	[ -d /sys/module/$FN_MOD ] || return 0
	fi_same_place "$FN_MOD" || return 1
	[ -e "$FN_QUEUES" ] || echo "note: $FN_MOD loaded without its debugfs files (diagnostics only)"
	nvmet_link 1 "$NQN" || return 1
	fn_healthy 4420 || return 1
	nvmet_unlink 1 "$NQN"
	rmmod "$FN_MOD" || { echo "rmmod fails"; return 1; }
}

# --- unload: rmmod after a host came and went
fn_unload_prep() {
	[ -d /sys/module/$FN_MOD ] || modprobe "$FN_MOD"
	fn_retarget >/dev/null
	[ -L "$NVMET/ports/1/subsystems/$NQN" ] || nvmet_link 1 "$NQN"
	fn_healthy 4420 || return 1
	nvmet_unlink 1 "$NQN"
}
fn_unload_op() { rmmod "$FN_MOD"; }
fn_unload_task_op() { fi_in_task rmmod "$FN_MOD"; }
fn_unload_check() {
	if [ -d /sys/module/$FN_MOD ]; then rmmod "$FN_MOD" || { echo "rmmod fails after the case"; return 1; }; fi
}

# --- port enable: linking the subsystem into port 2 (nvmet's add_port: a listener)
fn_enable_op() { ln -s "$NVMET/subsystems/$NQN" "$NVMET/ports/2/subsystems/$NQN"; }
fn_enable_task_op() { fi_in_task ln -s "$NVMET/subsystems/$NQN" "$NVMET/ports/2/subsystems/$NQN"; }
fn_enable_check() {
	# Enabled or not, port 2 can be enabled (again), serves, and goes away cleanly.
	[ -L "$NVMET/ports/2/subsystems/$NQN" ] || nvmet_link 2 "$NQN" || { echo "port 2 cannot be enabled after the case"; return 1; }
	fn_healthy 4421 || return 1
	nvmet_unlink 2 "$NQN"
	! grep -q "^port 2 " /sys/kernel/debug/nvmet_rdma_rs/ports || { echo "port 2 still listed after its unlink"; return 1; }
}

# --- port disable: unlinking port 2's only subsystem while a host uses the port
fn_disable_prep() {
	fn_idle
	nvmet_link 2 "$NQN"
	fabrics_connect "$FN_IP" 4421 "$FN_OPTS$FN_RECONNECT" >/dev/null || return 1
	[ "$(fn_port_queues 2)" -ge 2 ] || { cat "$FN_QUEUES"; return 1; }
}
fn_disable_wait() {
	# The port's queues end (within 20 s), whatever failed.
	fi_wait 20 fn_no_queue 2 && return 0
	echo "port 2 is disabled but keeps $(fn_port_queues 2) queue(s):"
	cat "$FN_QUEUES"
	return 3
}
fn_disable_op() { nvmet_unlink 2 "$NQN" || return 1; fn_disable_wait; }
fn_disable_task_op() { fi_in_task rm "$NVMET/ports/2/subsystems/$NQN" || return 1; fn_disable_wait; }
fn_disable_check() {
	[ ! -L "$NVMET/ports/2/subsystems/$NQN" ] || { echo "the link is still there"; return 1; }
	fn_idle || return 1
	fn_enable_check
}

# --- a controller going away while its port stays: unlinking a second subsystem from
# port 1 (nvmet's delete_ctrl for its controllers; port 1 keeps $NQN)
fn_delctrl_prep() {
	fn_idle
	[ -d "$NVMET/subsystems/$NQN2" ] || { nvmet_subsystem "$NQN2"; nvmet_namespace "$NQN2" 1 /dev/nullb1; }
	nvmet_link 1 "$NQN2"
	NQN=$NQN2 fabrics_connect "$FN_IP" 4420 "$FN_OPTS$FN_NORECONNECT" >/dev/null || return 1
	[ "$(fn_port_queues 1)" -ge 2 ] || { cat "$FN_QUEUES"; return 1; }
}
fn_delctrl_task_op() {
	fi_in_task rm "$NVMET/ports/1/subsystems/$NQN2" || return 1
	fi_wait 20 fn_no_queue 1 && return 0
	echo "the controller's subsystem left port 1 but $(fn_port_queues 1) queue(s) stay:"
	cat "$FN_QUEUES"
	return 3
}
fn_delctrl_check() {
	[ -L "$NVMET/ports/1/subsystems/$NQN" ] || { echo "port 1 lost $NQN"; return 1; }
	fn_healthy 4420
}

# --- connect: a host connects (admin and one I/O queue), reads a block, disconnects
fn_connect_op() {
	local c dev rc=0
	c=$(fabrics_connect "$FN_IP" 4420 "$FN_OPTS") || return 1
	if dev=$(fn_dev "$c"); then
		dd if="$dev" of=/dev/null bs=4k count=1 iflag=direct status=none || rc=2
	else
		rc=3
	fi
	fabrics_disconnect "$c" || rc=4
	return $rc
}
fn_connect_check() { fn_healthy 4420; }

# --- I/O: a connected host (reconnecting) writes in the capsule and keyed, reads back;
# what it was told was written must read back after the case
fn_io_prep() {
	if ! fn_live_ctrl >/dev/null; then
		fn_idle
		fabrics_connect "$FN_IP" 4420 "$FN_OPTS$FN_RECONNECT" >/dev/null || return 1
	fi
	fn_dev "$(fn_live_ctrl)" >/dev/null
}
fn_io_op() {
	local dev rc=0
	rm -f /tmp/fi-acked
	dev=$(fn_dev "$(fn_live_ctrl)") || return 3
	dd if=/tmp/fi-pattern of="$dev" bs=4k count=8 seek=$((4096 / 4)) oflag=direct status=none || rc=1
	if dd if=/tmp/fi-pattern of="$dev" bs=128k count=2 seek=$((8192 / 128)) oflag=direct status=none; then
		touch /tmp/fi-acked
	else
		rc=1
	fi
	dd if="$dev" of=/dev/null bs=128k count=2 skip=$((8192 / 128)) iflag=direct status=none || rc=2
	return $rc
}
fn_io_check() {
	local c dev
	# A host whose queue ended reconnects (or gives up after ctrl_loss_tmo; then anew).
	fi_wait 30 fn_live_or_none || { echo "the host controller is neither live nor gone after 30 s: $(fn_ctrls "$NQN")"; return 1; }
	if ! c=$(fn_live_ctrl); then
		fn_idle
		c=$(fabrics_connect "$FN_IP" 4420 "$FN_OPTS$FN_RECONNECT") || { echo "no host can connect after the case"; return 1; }
	fi
	dev=$(fn_dev "$c") || return 1
	if [ -e /tmp/fi-acked ]; then
		dd if="$dev" of=/tmp/fi-back bs=128k count=2 skip=$((8192 / 128)) iflag=direct status=none || return 1
		cmp -s /tmp/fi-pattern /tmp/fi-back || { echo "an acknowledged write does not read back"; return 2; }
	fi
	fn_verify "$dev" 2048
}

# --- device removal with a host connected, then the device's return (the port repairs
# its listener by itself)
fn_removal_prep() {
	fn_idle
	fabrics_connect "$FN_IP" 4420 "$FN_OPTS" >/dev/null || return 1
}
# (no pipe into grep -q: under pipefail the writer's SIGPIPE would fail the match)
fn_listening_again() { [[ $(fi_case_log) == *"nvmet_rdma_rs: port 1: listening again"* ]]; }
fn_removal_run() {
	"$@" rdma link delete rxe0 || return 1
	fi_wait 20 test ! -e /sys/class/infiniband/rxe0 || return 2
	fi_wait 20 fn_no_queue || return 2
	rdma link add rxe0 type rxe netdev veth0 || return 3
	fi_wait 10 test -e /sys/class/infiniband/rxe0 || return 3
	# (the repair tries every 5 s)
	fi_wait 20 fn_listening_again && return 0
	echo "port 1 does not listen again 20 s after rxe0 came back"
	return 5
}
fn_removal_op() { fn_removal_run; }
fn_removal_task_op() { fn_removal_run fi_in_task; }
fn_removal_check() {
	[ -e /sys/class/infiniband/rxe0 ] || { rdma link add rxe0 type rxe netdev veth0 && fi_wait 10 test -e /sys/class/infiniband/rxe0; }
	fn_healthy 4420
}

# fn_port1_back: after a phase that unloads: the transport loaded, port 1 enabled, aimed.
# (At the top level: set -e would end the run without the summary, hence fi_abort.)
fn_port1_back() {
	[ -d /sys/module/$FN_MOD ] || modprobe "$FN_MOD" || fi_abort "$FN_MOD does not load after the phase"
	[ -L "$NVMET/ports/1/subsystems/$NQN" ] || nvmet_link 1 "$NQN" || fi_abort "port 1 cannot be enabled after the phase"
	fn_retarget
}
fn_drop_hosts_or_abort() { fn_drop_hosts || fi_abort "host controllers do not go away"; }

# fn_sweep_both LIMIT OP CHECK [PREP]: the phase's sweep with failslab, then fail_page_alloc.
fn_sweep_both() {
	fi_sweep failslab "$@"
	FI_MAX_CASES=${FI_MAX_PAGE_CASES:-5} fi_sweep fail_page_alloc "$@"
}

# The phases (each leaves the target as fn_setup made it: port 1 enabled, no host).
fn_phase_load() {
	fi_phase load
	fn_drop_hosts_or_abort
	# (a load case costs three loads: fewer of them)
	FI_MAX_CASES=${FI_MAX_CASES:-6} fn_sweep_both 60 fn_load_op fn_load_check fn_load_prep
	fn_port1_back
}
fn_phase_unload() {
	fi_phase unload
	FI_NOTHING_TO_INJECT[unload]="unloading an idle transport allocates nothing (its task-mode case fails every allocation of rmmod, and the module unloads all the same)"
	fn_drop_hosts_or_abort
	fn_sweep_both 60 fn_unload_op fn_unload_check fn_unload_prep
	fi_one task 0 60 fn_unload_task_op fn_unload_check fn_unload_prep
	fn_port1_back
}
fn_phase_port_enable() {
	fi_phase port-enable
	fn_drop_hosts_or_abort
	fn_sweep_both 60 fn_enable_op fn_enable_check
	fi_one task 0 60 fn_enable_task_op fn_enable_check
}
fn_phase_port_disable() {
	fi_phase port-disable
	fn_sweep_both 60 fn_disable_op fn_disable_check fn_disable_prep
}
# Issue 14 finding 3: close_queues collected the queues into a vector first and, when
# that allocation failed, closed none; the port (or controller) went and its queues
# stayed. Every allocation of the admin's command fails here: the queues must end.
fn_phase_close_queues() {
	fi_phase close-queues
	FI_NOTHING_TO_INJECT[close-queues]="closing queues allocates nothing (its cases fail every allocation of the command and check that the queues end all the same)"
	fi_one task 0 60 fn_disable_task_op fn_disable_check fn_disable_prep
	[ "$FI_RC" = 0 ] || fi_fail "port 2 disabled with every allocation failing: its queues did not end (issue 14 finding 3)"
	fi_one task 0 60 fn_delctrl_task_op fn_delctrl_check fn_delctrl_prep
	[ "$FI_RC" = 0 ] || fi_fail "a controller deleted with every allocation failing: its queues did not end (issue 14 finding 3)"
	fi_one task 0 90 fn_removal_task_op fn_removal_check fn_removal_prep
	[ "$FI_RC" = 0 ] || fi_fail "rxe0 removed with every allocation failing: status $FI_RC"
}
fn_phase_connect() {
	fi_phase connect
	fn_drop_hosts_or_abort
	fn_sweep_both 90 fn_connect_op fn_connect_check fn_idle
}
fn_phase_io() {
	fi_phase io
	fn_sweep_both 90 fn_io_op fn_io_check fn_io_prep
	fn_drop_hosts_or_abort
}
fn_phase_removal() {
	fi_phase device-removal
	fn_sweep_both 90 fn_removal_op fn_removal_check fn_removal_prep
	fn_drop_hosts_or_abort
}

# fn_teardown: everything goes; rmmod must succeed; nothing leaked.
fn_teardown() {
	fi_phase teardown
	fn_drop_hosts || fi_fail "host controllers stay at teardown"
	nvmet_clear || fi_fail "nvmet's configuration cannot be cleared"
	modprobe -r nvme-rdma || fi_fail "nvme-rdma does not unload"
	fi_wait 20 fn_no_queue || fi_fail "queues left at teardown: $(cat "$FN_QUEUES")"
	rmmod "$FN_MOD" || fi_fail "rmmod $FN_MOD failed at the end"
	rdma_link_delete rxe0
	fi_kmemleak
}
