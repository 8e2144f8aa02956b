# The fault-injection phases of the demo pair (rdma_server, rdma_client; tests/faults/
# lib.sh does the injecting): each module's load, the client's connect through ctl,
# send, ping (fast registration, RDMA READ/WRITE, server invalidation), the rxe device
# removed under a connection, and the unload. Candidates are allocations under either
# module's text (loaded one after the other, their text is one range); a load's are
# those under the loading module's text (fi_target_load). After every case: the pair
# recovers (a connect through ctl, a send whose reply comes back). The server listens
# on the device's address: after the device's removal it is reloaded (by design it
# does not listen again by itself). Sourced after scripts/guest/lib.sh and
# tests/faults/lib.sh; not run.
# shellcheck shell=bash

FD_IP=$RRS_IP4_A
FD_DEMO=/sys/kernel/debug/rdma_demo
FD_CONNS=/sys/kernel/debug/rdma_server/connections

# Where an injected failure is rightly absorbed (tests/faults/lib.sh, fi_judge_absorbed):
# a text of the injected-at frames -> why.
FI_ABSORBED_REASON[ib_send_cm_dreq]="the disconnect request of a connection being closed could not be sent: the connection ends all the same, and the peer learns it as of a request lost on the wire (its QP's errors)"
FI_ABSORBED_REASON[ib_send_cm_drep]="the disconnect reply to the peer's disconnect request could not be sent: the connection ends all the same, and the peer's request times out as one lost on the wire"

fd_setup() {
	kmemleak_start
	veth_setup
	rdma_link_add rxe0 rxe veth0
	fi_setup
	fd_load_both || fail "the demo pair does not load"
	fd_retarget
	fd_works || fail "the demo pair does not work before any injection"
}

fd_load_both() {
	[ -d /sys/module/rdma_server ] || modprobe rdma_server addr="$FD_IP" || return 1
	[ -d /sys/module/rdma_client ] || modprobe rdma_client server="$FD_IP" || return 1
}

fd_unload_both() {
	if [ -d /sys/module/rdma_client ]; then rmmod rdma_client || return 1; fi
	if [ -d /sys/module/rdma_server ]; then rmmod rdma_server || return 1; fi
}

# fd_retarget: candidates are allocations under the pair's text. Loaded one after the
# other the two usually make one range; when another module's text lies between them
# (module memory is first fit: a hole left by an unloaded module) the range narrows to
# the client's, the side the phases drive, and says so.
fd_retarget() {
	local out
	# (its effects are the kernel's and files: a subshell loses nothing)
	if out=$(fi_target_modules rdma_server rdma_client); then echo "$out"; return 0; fi
	echo "note: $out: aiming at rdma_client's text only"
	fi_target_modules rdma_client || fail "cannot aim at the demo pair's text"
}

fd_connected() { grep -q "^connected 1" "$FD_DEMO/stats"; }
fd_disconnected() { grep -q "^connected 0" "$FD_DEMO/stats"; }
fd_server_idle() { ! grep -q . "$FD_CONNS"; }

# fd_works: the client is (or gets) connected, and a send comes back.
fd_works() {
	local text="recovered $FI_CASE_ID"
	fd_load_both || { echo "the modules do not load"; return 1; }
	fd_connected || echo connect >"$FD_DEMO/ctl" || { echo "connect through ctl fails"; return 1; }
	echo "$text" >"$FD_DEMO/send" || { echo "send fails"; return 1; }
	[ "$(cat "$FD_DEMO/reply")" = "$text" ] || { echo "reply: $(cat "$FD_DEMO/reply")"; return 1; }
}

# --- the server's load
fd_server_load_prep() {
	fd_unload_both || return 1
	fi_target_load rdma_server modprobe rdma_server addr="$FD_IP"
}
fd_server_load_op() { modprobe rdma_server addr="$FD_IP"; }
fd_server_load_check() {
	if [ -d /sys/module/rdma_server ]; then fi_same_place rdma_server || return 1; fi
	fd_works
}

# --- the client's load (its init connects)
fd_client_load_prep() {
	if [ -d /sys/module/rdma_client ]; then rmmod rdma_client || return 1; fi
	[ -d /sys/module/rdma_server ] || modprobe rdma_server addr="$FD_IP"
	fi_wait 20 fd_server_idle || return 1
	fi_target_load rdma_client modprobe rdma_client server="$FD_IP"
	fi_wait 20 fd_server_idle
}
fd_client_load_op() { modprobe rdma_client server="$FD_IP"; }
fd_client_load_check() {
	if [ -d /sys/module/rdma_client ]; then
		fi_same_place rdma_client || return 1
		# (its control files are its only interface)
		[ -e "$FD_DEMO/ctl" ] || { echo "rdma_client loaded without its rdma_demo/ files (its init went on without them): no interface, and modprobe said nothing"; return 1; }
	fi
	fd_works
}

# --- connect through ctl
fd_connect_prep() {
	fd_connected || fd_works || return 1
	echo disconnect >"$FD_DEMO/ctl"
	fi_wait 20 fd_disconnected && fi_wait 20 fd_server_idle
}
fd_connect_op() { echo connect >"$FD_DEMO/ctl"; }
fd_check() { fd_works; }

# --- send, ping
fd_connected_prep() { fd_connected || fd_works; }
fd_send_op() { echo "fault case $FI_CASE_ID" >"$FD_DEMO/send"; }
fd_ping_op() { echo "count=2,size=65536,validate,mem_mode=reg,server_inv" >"$FD_DEMO/ping"; }
fd_ping_check() {
	fd_works || return 1
	echo "count=1,size=4096,validate" >"$FD_DEMO/ping" || { echo "ping fails after the case"; return 1; }
}

# --- the device removed under a connection, and back
fd_removal_run() {
	"$@" rdma link delete rxe0 || return 1
	fi_wait 20 test ! -e /sys/class/infiniband/rxe0 || return 2
	fi_wait 20 fd_disconnected || return 3
	fi_wait 20 fd_server_idle || return 4
	rdma link add rxe0 type rxe netdev veth0 || return 5
	fi_wait 10 test -e /sys/class/infiniband/rxe0 || return 5
}
fd_removal_op() { fd_removal_run; }
fd_removal_task_op() { fd_removal_run fi_in_task; }
fd_removal_check() {
	[ -e /sys/class/infiniband/rxe0 ] || { rdma link add rxe0 type rxe netdev veth0 && fi_wait 10 test -e /sys/class/infiniband/rxe0; }
	# (the server's listener went with the device: it listens again once reloaded)
	fd_unload_both || { echo "rmmod fails after the device's removal"; return 1; }
	fd_load_both && fd_retarget >/dev/null && fd_works
}

# --- unload while connected
fd_unload_prep() {
	fd_works || return 1
	fd_retarget >/dev/null
}
fd_unload_op() { rmmod rdma_client && rmmod rdma_server; }
fd_unload_task_op() { fi_in_task rmmod rdma_client && fi_in_task rmmod rdma_server; }
fd_unload_check() {
	fd_unload_both || { echo "rmmod fails after the case"; return 1; }
	fd_load_both && fd_works
}

fd_sweep_both() {
	fi_sweep failslab "$@"
	FI_MAX_CASES=${FI_MAX_PAGE_CASES:-5} fi_sweep fail_page_alloc "$@"
}

# The phases (each leaves both modules loaded and the client connected).
fd_phase_server_load() {
	fi_phase demo-server-load
	# (a load case costs three loads: fewer of them)
	FI_MAX_CASES=${FI_MAX_CASES:-6} fd_sweep_both 60 fd_server_load_op fd_server_load_check fd_server_load_prep
	fd_retarget_after_load
}
fd_phase_client_load() {
	fi_phase demo-client-load
	FI_MAX_CASES=${FI_MAX_CASES:-6} fd_sweep_both 90 fd_client_load_op fd_client_load_check fd_client_load_prep
	fd_retarget_after_load
}
# (the load phases leave the modules loaded in either order: reload them one after the
# other so that their text is one range)
# (At the top level: fi_abort, not set -e, so that the summary is printed.)
fd_retarget_after_load() {
	fd_unload_both || fi_abort "the demo pair does not unload after the phase"
	fd_load_both || fi_abort "the demo pair does not load after the phase"
	fd_retarget
	fd_works || fi_fail "the pair does not work after the phase"
}
fd_phase_connect() {
	fi_phase demo-connect
	fd_sweep_both 90 fd_connect_op fd_check fd_connect_prep
}
fd_phase_send() {
	fi_phase demo-send
	fd_sweep_both 60 fd_send_op fd_check fd_connected_prep
}
fd_phase_ping() {
	fi_phase demo-ping
	fd_sweep_both 60 fd_ping_op fd_ping_check fd_connected_prep
}
fd_phase_removal() {
	fi_phase demo-device-removal
	fd_sweep_both 90 fd_removal_op fd_removal_check fd_connected_prep
	fi_one task 0 90 fd_removal_task_op fd_removal_check fd_connected_prep
}
fd_phase_unload() {
	fi_phase demo-unload
	fd_sweep_both 60 fd_unload_op fd_unload_check fd_unload_prep
	fi_one task 0 60 fd_unload_task_op fd_unload_check fd_unload_prep
	fd_retarget_after_load
}

fd_teardown() {
	fi_phase teardown
	fd_unload_both || fi_fail "rmmod of the demo pair failed at the end"
	rdma_link_delete rxe0
	fi_kmemleak
}
