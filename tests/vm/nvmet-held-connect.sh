#!/bin/bash
# Races pinned, not hoped for: nvmet_rdma_rs's test hold points (test_hooks.rs, built in
# by the test suites) hold a host's connect request for 3 s in the RDMA CM handler, at
# "parsed" (no queue yet) and at "listed" (the queue made and listed, not yet accepted),
# and the port's removal, then the device's removal, land inside it every time: the log
# must show the connect held before the action starts, and the action may return only
# once the connect went on (both wait for the handler). Then no queue is left, the port
# or device comes back, and a host is served with verified I/O. An rmmod during a held
# connect is refused while the connect is held (the port holds the module). Unload,
# kmemleak.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

transport=nvmet_rdma_rs
hooks=/sys/kernel/debug/nvmet_rdma_rs
hold_ms=3000

# log_count REGEX: how many lines of the kernel log match (one body: the whole log).
log_count() { dmesg | grep -cE -- "$1" || true; }
# log_count_above REGEX N: more than N lines match.
log_count_above() { [ "$(log_count "$1")" -gt "$2" ]; }

# held_connect_start POINT: the hold armed at POINT, a host's connect started in the
# background (it may fail: its CM times out after 3 s), and waited for until the log shows
# it held. Sets connect_pid and went_on (the "goes on" lines so far).
held_connect_start() {
	local point=$1 held
	held=$(log_count "test hook: connect from .* held at $point for $hold_ms ms")
	went_on=$(log_count "test hook: connect from .* goes on from $point")
	echo "$hold_ms" >"$hooks/test_hold_${point}_ms"
	timeout 60 nvme connect -t rdma -n "$NQN" -a "$RRS_IP4_A" -s 4420 --ctrl-loss-tmo=1 >/dev/null 2>&1 &
	connect_pid=$!
	wait_until 20 log_count_above "test hook: connect from .* held at $point for $hold_ms ms" "$held"
	# (the first queue's request is held: the handler holds it $hold_ms ms from now)
	[ "$(log_count "test hook: connect from .* goes on from $point")" = "$went_on" ] ||
		fail "the held connect went on before the action started"
}

# held_connect_end POINT: the action has returned: the connect must have gone on by now
# (the action waited for it); the hold disarmed, the host's connect ended, no host left.
held_connect_end() {
	local point=$1 what=$2
	[ "$(log_count "test hook: connect from .* goes on from $point")" -gt "$went_on" ] ||
		fail "$what returned while the connect was still held at $point: it did not land inside the connect"
	echo 0 >"$hooks/test_hold_${point}_ms"
	wait "$connect_pid" || true
	nvme disconnect-all >/dev/null 2>&1 || true
	wait_until 30 bash -c "! ls /sys/class/nvme 2>/dev/null | grep -q nvme"
}

# served: a host connects and its verified writes read back.
served() {
	local dev
	dev=$(host_connect "$RRS_IP4_A" 4420)
	fio_verify "$dev" "$1" --rw=randwrite --bs=4k --iodepth=8 --size=1M
	host_disconnect
}

body_start "nvmet-held-connect: port and device removal inside a held connect"
kmemleak_start
nvmet_rxe_target "$transport"
# A host connect the target accepted and then closed inside the hold may have missed the
# end (a reject after the host's RTU is dropped by its CM): its Connect command then
# waits out the admin timeout, 60 s by default, and the device's removal waits for that
# host controller too. 10 s keeps the test short.
echo 10 >/sys/module/nvme_core/parameters/admin_timeout
[ -e "$hooks/test_hold_listed_ms" ] ||
	fail "nvmet_rdma_rs was built without its test hold points (make RRS_TEST_HOOKS=1)"
served before

for point in parsed listed; do
	step "the port removed inside a connect held at $point"
	held_connect_start "$point"
	t0=$SECONDS
	nvmet_unlink 1 "$NQN"
	rmdir "$NVMET/ports/1"
	echo "the port's removal returned after $((SECONDS - t0)) s"
	held_connect_end "$point" "the port's removal"
	nvmet_assert_idle "$transport"
	nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
	nvmet_link 1 "$NQN"
	served "after-port-removal-at-$point"

	step "the device removed inside a connect held at $point"
	held_connect_start "$point"
	t0=$SECONDS
	rdma link delete rxe0
	echo "the device's removal returned after $((SECONDS - t0)) s"
	held_connect_end "$point" "the device's removal"
	wait_until 10 test ! -e /sys/class/infiniband/rxe0
	wait_until 20 bash -c "! grep -q qid $hooks/queues"
	rdma_link_add rxe0 rxe veth0
	wait_until 30 bash -c "nvme discover -t rdma -a $RRS_IP4_A -s 4420 >/dev/null 2>&1"
	served "after-device-removal-at-$point"
done

step "rmmod inside a held connect: refused while the connect is still held (the port holds the module)"
# (a longer hold: the refusal must come while the connect is held, however slow the
# guest is to start rmmod)
hold_ms=10000
held_connect_start listed
if rmmod "$transport" 2>/dev/null; then fail "rmmod took the transport away under an enabled port"; fi
[ "$(log_count "test hook: connect from .* goes on from listed")" = "$went_on" ] ||
	fail "the connect went on before rmmod was refused: the refusal did not land inside it"
wait_until 20 log_count_above "test hook: connect from .* goes on from listed" "$went_on"
held_connect_end listed "the wait"
hold_ms=3000
served after-rmmod-refused

step "tear down and unload"
nvmet_clear
modprobe -r nvme-rdma
nvmet_assert_idle "$transport"
rmmod "$transport"
rdma_link_delete rxe0
kmemleak_check
echo "nvmet-held-connect: ok"
