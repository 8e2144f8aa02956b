# krping's loop through the demo pair over one RDMA provider, as a guest test body.
# usage (from a tests/vm script): demo_ping_test rxe|siw
# shellcheck shell=bash

demo_ping_test() {
	local provider=$1 ip=$RRS_IP4_A
	local ping=/sys/kernel/debug/rdma_demo/ping
	body_start "demo_ping_test $*"
	kmemleak_start
	veth_setup
	rdma_link_add "${provider}0" "$provider" veth0
	modprobe rdma_server addr="$ip"
	modprobe rdma_client server="$ip" unsafe_global_rkey=1
	assert_dmesg "rdma_client: session 0: connected to $ip:7174"

	step "ping with validate: sizes around page boundaries, both memory modes, server invalidation"
	for size in 1 4095 4096 4097 65536 1048576; do
		for mode in mem_mode=dma mem_mode=reg mem_mode=reg,server_inv; do
			echo "count=2,size=$size,validate,$mode" >"$ping" || fail "ping size=$size $mode failed"
		done
	done
	assert_dmesg "rdma_client: ping: 2 iterations of 1048576 bytes \(Reg, validated, server_inv\) done"
	grep -q "read_msgs 36 " /sys/kernel/debug/rdma_demo/stats || fail "stats: $(cat /sys/kernel/debug/rdma_demo/stats)"

	step "verbose: each iteration logs what came back (the server's WRITE of what it READ)"
	echo "count=2,size=16,validate,verbose" >"$ping" || fail "verbose ping failed"
	# (iteration N's source is the bytes N, N+1, ...: iteration 1 brings back 01 to 10)
	assert_dmesg "rdma_client: ping: iteration 0: 16 bytes back, the first 16: 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f$"
	assert_dmesg "rdma_client: ping: iteration 1: 16 bytes back, the first 16: 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10$"
	echo "count=1,size=100,verbose" >"$ping" || fail "verbose ping of 100 bytes failed"
	assert_dmesg "rdma_client: ping: iteration 0: 100 bytes back, the first 64: 00 01 .* 3e 3f$"

	step "fr: krping's fast-registration loop alone (no message to the server)"
	local before
	before=$(cat /sys/kernel/debug/rdma_demo/stats)
	echo "count=50,size=65536,fr" >"$ping" || fail "fr loop failed"
	assert_dmesg "rdma_client: ping: 50 iterations of 65536 bytes \(Reg, fr\) done"
	[ "$(cat /sys/kernel/debug/rdma_demo/stats)" = "$before" ] ||
		fail "the fr loop moved the message counters: $before -> $(cat /sys/kernel/debug/rdma_demo/stats)"
	expect_write_error "$ping" "count=1,fr,validate" "Invalid argument"
	assert_dmesg "ping: fr is a registration loop alone"
	echo "count=2,size=4096,validate" >"$ping" || fail "ping after the fr loop failed"

	step "read_inv: RDMA READ with invalidate where the device has it (iWARP), refused elsewhere"
	if [ "$provider" = siw ]; then
		for size in 1 4096 65536 1048576; do
			echo "count=2,size=$size,validate,read_inv,server_inv" >"$ping" || fail "ping read_inv size=$size failed"
		done
		echo "count=2,size=4097,validate,mem_mode=dma,read_inv" >"$ping" || fail "ping read_inv with mem_mode=dma failed"
		assert_dmesg "rdma_client: ping: 2 iterations of 1048576 bytes \(Reg, validated, server_inv, read_inv\) done"
	else
		expect_write_error "$ping" "count=1,read_inv" "Operation not supported"
		assert_dmesg "ping: read_inv needs RDMA READ with invalidate, which ${provider}0"
	fi

	step "bench: every mode produces numbers"
	local bench=/sys/kernel/debug/rdma_demo/bench
	grep -q "no results" "$bench" || fail "bench before any run: $(cat "$bench")"
	for options in mode=wlat,size=4096,count=200 mode=rlat,size=4096,count=200 \
		mode=slat,size=64,count=200 mode=bw,size=65536,count=200,depth=8 mode=bw,size=1048576,count=8; do
		echo "$options" >"$bench" || fail "bench $options failed"
		local mode=${options%%,*} out
		out=$(cat "$bench")
		echo "$out" | grep -q "^mode ${mode#mode=} " || fail "bench $options: $out"
		for key in lat_min_us lat_median_us lat_p99_us lat_max_us mb_s ops_s; do
			echo "$out" | grep -Eq "^$key [0-9]+(\.[0-9]+)?$" || fail "bench $options: no $key in: $out"
		done
		# A real run takes time: a zero would mean nothing was timed. The bandwidth is the
		# operations' bytes over the same time (64 B at a slow kernel's 127 ops/s is 0.00
		# MB/s at two decimals, so it is checked against ops_s x size, ops_s being whole;
		# 1 MiB operations on a KASAN kernel under load run below one per second, ops_s 0,
		# and then mb_s is what shows they were timed).
		echo "$out" | grep -Eq "^lat_median_us 0\.000$" && fail "bench $options measured nothing: $out"
		echo "$out" | grep -Eq "^ops_s 0$" && echo "$out" | grep -Eq "^mb_s 0\.00$" &&
			fail "bench $options measured nothing: $out"
		echo "$out" | awk '$1 == "mode" { size = $4 } $1 == "ops_s" { ops = $2 } $1 == "mb_s" { mb = $2 }
			END { exit !(mb >= (ops - 1) * size / 1e6 - 0.01 && mb <= (ops + 1) * size / 1e6 + 0.01) }' ||
			fail "bench $options: mb_s does not match ops_s x size: $out"
		echo "$options: $(echo "$out" | grep -E 'lat_median_us|mb_s' | tr '\n' ' ')"
	done
	expect_write_error "$bench" "size=64" "Invalid argument"
	assert_dmesg "bench: mode=wlat\|rlat\|slat\|bw is required"
	expect_write_error "$bench" "mode=wlat,depth=4" "Invalid argument"
	expect_write_error "$bench" "mode=slat,size=2000" "Invalid argument"
	expect_write_error "$bench" "mode=bw,depth=65" "Invalid argument"
	expect_write_error "$bench" "mode=rlat,count=0" "Invalid argument"
	expect_write_error "$bench" "mode=foo" "Invalid argument"
	assert_dmesg "bench: bad option 'mode=foo'"

	step "duplex: the server WRITEs into the client during the client's bw (krping's duplex)"
	local conns=/sys/kernel/debug/rdma_server/connections writes_before writes_after a b c d pid
	# (the server's WRITE counter: "write <messages>/<bytes>" of the newest connection)
	writes_before=$(tail -n 1 "$conns" | sed -E 's/.* write ([0-9]+)\/([0-9]+) .*/\1 \2/')
	echo "mode=bw,size=65536,count=100,txdepth=8,duplex" >"$bench" || fail "bench bw duplex failed"
	out=$(cat "$bench")
	writes_after=$(tail -n 1 "$conns" | sed -E 's/.* write ([0-9]+)\/([0-9]+) .*/\1 \2/')
	echo "$out" | grep -q "^mode bw size 65536 count 100 depth 8 duplex 1$" || fail "bench duplex: $out"
	# Both ways count: mb_s is twice the client's WRITEs' ops_s x size.
	echo "$out" | awk '$1 == "ops_s" { ops = $2 } $1 == "mb_s" { mb = $2 }
		END { exit !(mb >= 2 * (ops - 1) * 65536 / 1e6 - 0.01 && mb <= 2 * (ops + 1) * 65536 / 1e6 + 0.01) }' ||
		fail "bench duplex: mb_s is not both ways' bytes: $out"
	read -r a b <<<"$writes_before"
	read -r c d <<<"$writes_after"
	((c - a == 100 && d - b == 100 * 65536)) ||
		fail "the server's duplex WRITEs: $writes_before -> $writes_after, wanted 100 more of 64 KiB"
	echo "duplex: $(echo "$out" | grep -E 'mb_s' | tr '\n' ' ')and the server wrote $((c - a)) x 64 KiB"
	echo "mode=bw,size=1048576,count=8,depth=4,duplex" >"$bench" || fail "bench bw duplex of 1 MiB failed"
	# Cut short, the run disconnects (the server may still be writing into the sink); the
	# session reconnects and works.
	(echo "mode=bw,size=65536,count=100000,duplex" >"$bench") &
	pid=$!
	sleep 3
	kill -TERM "$pid"
	if wait "$pid"; then fail "the interrupted duplex bench reported success"; fi
	assert_dmesg "rdma_client: session 0: the server may still WRITE into the duplex sink \(EINTR\); disconnecting"
	wait_until 20 grep -q "connected 0" /sys/kernel/debug/rdma_demo/stats
	echo connect >/sys/kernel/debug/rdma_demo/ctl || fail "reconnect after the interrupted duplex bench failed"
	echo "count=2,size=65536,validate" >"$ping" || fail "ping after the interrupted duplex bench failed"
	expect_write_error "$bench" "mode=wlat,duplex" "Invalid argument"
	assert_dmesg "bench: duplex applies to mode=bw only"
	expect_write_error "$bench" "mode=bw,depth=4,txdepth=4" "Invalid argument"
	assert_dmesg "bench: depth and txdepth are one option"

	step "validation compares: a byte the server damages is caught"
	echo 1 >/sys/kernel/debug/rdma_server/corrupt_next
	expect_write_error "$ping" "count=1,size=4096,validate" "Input/output error"
	assert_dmesg "rdma_client: ping: validation failed in iteration 0 at offset 0"
	echo "count=3,size=4096,validate" >"$ping" || fail "ping after the damaged one failed"

	step "bad option strings are refused, naming the option"
	expect_write_error "$ping" "size=0" "Invalid argument"
	assert_dmesg "ping: size=0 is not a number from 1 to 4194304"
	expect_write_error "$ping" "size=4194305" "Invalid argument"
	expect_write_error "$ping" "count=abc" "Invalid argument"
	expect_write_error "$ping" "mem_mode=foo" "Invalid argument"
	assert_dmesg "ping: bad option 'mem_mode=foo'"
	expect_write_error "$ping" "validate,bogus" "Invalid argument"
	expect_write_error "$ping" "mem_mode=dma,server_inv" "Invalid argument"
	echo "count=1,size=100,validate" >"$ping" || fail "ping after bad options failed"

	step "a signal stops a long ping; the session is usable afterwards"
	local stats=/sys/kernel/debug/rdma_demo/stats pid
	(echo "count=1000000,size=65536,validate,mem_mode=dma" >"$ping") &
	pid=$!
	sleep 3
	kill -TERM "$pid"
	if wait "$pid"; then fail "the interrupted ping reported success"; fi
	# Between iterations the loop just stops; in the middle of one the session disconnects
	# (after draining its QP) and has to reconnect.
	if grep -q "connected 0" "$stats"; then
		assert_dmesg "rdma_client: session 0: (no answer from the server|cannot invalidate a registration)"
		echo connect >/sys/kernel/debug/rdma_demo/ctl
	fi
	echo "count=2,size=65536,validate" >"$ping" || fail "ping after the interrupted one failed"

	if [ "$provider" = siw ]; then
		# siw completes an RDMA READ twice when the connection drops between its post and
		# its request going out, and loses other completions when it drops under them: the
		# layer must ignore the second completions and release what the lost ones held.
		# (Before, the first dropped connection ended in a refcount underflow in the
		# server; then a leaked connection kept the device from going away.)
		step "connections dropped under in-flight RDMA READs, 30 times"
		local i
		for ((i = 0; i < 30; i++)); do
			(echo "count=1000000,size=4096,mem_mode=dma" >"$ping") 2>/dev/null &
			pid=$!
			sleep "0.$((RANDOM % 9 + 1))"
			kill -TERM "$pid"
			wait "$pid" 2>/dev/null || true
			if grep -q "connected 0" "$stats"; then
				echo connect >/sys/kernel/debug/rdma_demo/ctl || fail "reconnect $i failed"
			fi
		done
		echo "count=2,size=65536,validate" >"$ping" || fail "ping after the dropped connections failed"
	fi

	step "tos: the connection's type of service (krping's tos), in RDMA CM's trace of the id"
	rmmod rdma_client
	if modprobe rdma_client server="$ip" tos=256 2>/dev/null; then fail "rdma_client took tos=256"; fi
	assert_dmesg "rdma_client: tos=256 is not from 0 to 255"
	local tracing=/sys/kernel/tracing
	[ -e "$tracing/trace" ] || mount -t tracefs nodev "$tracing"
	echo >"$tracing/trace"
	echo 1 >"$tracing/events/rdma_cma/enable"
	modprobe rdma_client server="$ip" tos=184
	echo 0 >"$tracing/events/rdma_cma/enable"
	# (RDMA CM's events name the id's type of service: the client's, whose destination is
	# the server's port, carries the module's)
	grep -E "dst=$ip:7174 tos=" "$tracing/trace" | tee /tmp/cma-trace.txt | head -5
	grep -q "dst=$ip:7174 tos=184" /tmp/cma-trace.txt || fail "the client's CM id does not carry tos 184"
	grep -Ev "tos=184( |$)" /tmp/cma-trace.txt && fail "a client event without tos 184"
	echo "count=2,size=4096,validate" >"$ping" || fail "ping with tos=184 failed"

	step "poll: completions run by the task that waits for them (krping's poll, IB_POLL_DIRECT)"
	local stats=/sys/kernel/debug/rdma_demo/stats polled ctx_worker ctx_polled
	grep -Eq " polled 0$" "$stats" || fail "completions polled without poll=1: $(cat "$stats")"
	# (`rdma res` names the CQ's poll context; Debian 12's tool still numbers them as
	# kernels before 4.19 did, with DIRECT first, so 7.2's WORKQUEUE (1) reads
	# "SOFTIRQ" and its DIRECT (3) "UNBOUND_WORKQUEUE": compare, do not read the names)
	ctx_worker=$(rdma res show cq | sed -nE 's/.*poll-ctx ([A-Z_]+) .*comm \[rdma_client\].*/\1/p')
	rmmod rdma_client
	if modprobe rdma_client server="$ip" poll=2 2>/dev/null; then fail "rdma_client took poll=2"; fi
	assert_dmesg "rdma_client: poll=2 is not 0 or 1"
	modprobe rdma_client server="$ip" poll=1
	ctx_polled=$(rdma res show cq | sed -nE 's/.*poll-ctx ([A-Z_]+) .*comm \[rdma_client\].*/\1/p')
	echo "the client's CQ: poll-ctx $ctx_worker with poll=0, $ctx_polled with poll=1 (as rdma names them)"
	[ -n "$ctx_worker" ] && [ -n "$ctx_polled" ] && [ "$ctx_worker" != "$ctx_polled" ] ||
		fail "the client's CQ has the same poll context with poll=1"
	echo "count=20,size=4096,validate" >"$ping" || fail "ping with poll=1 failed"
	echo "mode=bw,size=4096,count=200,depth=8" >"$bench" || fail "bench bw with poll=1 failed"
	echo "mode=wlat,size=64,count=50" >"$bench" || fail "bench wlat with poll=1 failed"
	echo "mode=bw,size=4096,count=50,depth=4,duplex" >"$bench" || fail "bench bw duplex with poll=1 failed"
	polled=$(sed -E 's/.* polled ([0-9]+)$/\1/' "$stats")
	# (a validated ping: two registrations, the SEND, the DONE's receive and two local
	# invalidations; then 250 WRITEs)
	((polled >= 20 * 6 + 250)) || fail "only $polled completions polled: $(cat "$stats")"
	echo "$polled completions polled by the waiting task"
	# A signal ends a polling wait too (a long ping, cut short; mid-iteration the session
	# disconnects, draining its QP, which polls the CQ itself).
	(echo "count=1000000,size=65536,validate" >"$ping") &
	pid=$!
	sleep 3
	kill -TERM "$pid"
	if wait "$pid"; then fail "the interrupted polled ping reported success"; fi
	grep -q "connected 0" "$stats" && echo connect >/sys/kernel/debug/rdma_demo/ctl
	echo "count=2,size=4096,validate" >"$ping" || fail "ping after the interrupted polled ping failed"

	step "txdepth: the connection's send queue room for a bench (krping's txdepth)"
	rmmod rdma_client
	if modprobe rdma_client server="$ip" txdepth=65 2>/dev/null; then fail "rdma_client took txdepth=65"; fi
	assert_dmesg "rdma_client: txdepth=65 is not from 1 to 64"
	modprobe rdma_client server="$ip" txdepth=4
	echo "count=4,size=65536,validate,server_inv" >"$ping" || fail "ping with txdepth=4 failed"
	echo "mode=bw,size=4096,count=100" >"$bench" || fail "bench bw with txdepth=4 failed"
	grep -q "^mode bw size 4096 count 100 depth 4 duplex 0$" "$bench" ||
		fail "bw's default depth is not txdepth=4: $(cat "$bench")"
	echo "mode=bw,size=4096,count=100,depth=4,duplex" >"$bench" || fail "bench duplex with txdepth=4 failed"
	expect_write_error "$bench" "mode=bw,depth=5" "Invalid argument"
	assert_dmesg "bench: depth=5 is more than the connection's send queue holds \(txdepth=4 at load\)"

	step "unload"
	rmmod rdma_client
	rmmod rdma_server
	echo "second completions ignored on $(body_dmesg | grep -c "completed .* twice") connection(s), lost ones released on $(body_dmesg | grep -c "never completed") QP(s)"
	# Leaks first: a leaked buffer holds a device reference, and the deletion would wait
	# for it for ever.
	kmemleak_check
	rdma_link_delete "${provider}0"
	echo "demo-ping over $provider: ok"
}
