#!/usr/bin/env bash
# Checks a `make demo` transcript step by step (make check runs the demo and then this),
# and that the README's abridged transcript matches it: every command the README shows
# appears in the run, in the same order.
#
# usage: check-transcript.sh TRANSCRIPT [README]
set -euo pipefail
transcript=${1:?usage: check-transcript.sh TRANSCRIPT [README]}
readme=${2:-$(dirname "$0")/../../README.md}
failures=0

# step_text N: the transcript of step N (its header to the next one).
step_text() {
	awk -v n="$1" '/^=== Step /{ on = ($3 ~ "^" n "/") } /^=== demo:/{ on = 0 } on' "$transcript"
}
# expect N REGEX WHAT: step N's output has a line matching REGEX.
# (grep reads a here-string, not a pipe: grep -q quitting early would SIGPIPE awk)
expect() {
	if ! grep -Eq -- "$2" <<<"$(step_text "$1")"; then
		echo "demo step $1: $3 (no line matches: $2)" >&2
		failures=$((failures + 1))
	fi
}
# expect_count N REGEX MIN WHAT: at least MIN lines of step N match REGEX.
expect_count() {
	local got
	got=$(grep -Ec -- "$2" <<<"$(step_text "$1")" || true)
	if ((got < $3)); then
		echo "demo step $1: $4 ($got lines match '$2', expected at least $3)" >&2
		failures=$((failures + 1))
	fi
}

expect 1 '^# rdma link add rxe0 type rxe netdev veth0$' "no rxe device added"
expect 1 '^link rxe0/1 state ACTIVE' "rxe0 is not shown active"
expect 1 '/updates/nvmet_rdma_rs/nvmet_rdma_rs\.ko$' "nvmet_rdma_rs does not load from the installed tree"
expect 1 '/updates/rdma_server/rdma_server\.ko$' "rdma_server does not load from the installed tree"

expect 2 '^# echo 1 > attr_allow_any_host$' "the configfs steps are not shown"
expect 2 '^# ln -s /sys/kernel/config/nvmet/subsystems/' "the port is not linked"
expect 2 '"trtype": "rdma"' "nvmetcli save did not save the RDMA port"
expect 2 '"nqn": "nqn\.2026-11\.io\.rdma-rs:demo"' "nvmetcli save did not save the subsystem"
expect 2 '"inline_data_size": "8192"' "nvmetcli save did not save the port's in-capsule size"
expect 2 '"path": "/var/tmp/demo-ns2.img"' "nvmetcli save did not save the file namespace"
expect_count 2 'nvmet_rdma_rs: enabling port 1 \(10\.77\.0\.1:4420\)' 3 \
	"the port was not enabled by configfs and again by nvmetcli restore"
expect 2 'nvmet_rdma_rs: disabling port 1' "nvmetcli clear did not disable the port"
expect 2 '^port 1 10\.77\.0\.1:4420 inline_data_size 8192 ' "the restored port lacks its settings"

expect 3 'subnqn: +nqn\.2026-11\.io\.rdma-rs:demo' "nvme discover does not list the subsystem"
expect 3 '^/dev/nvme[0-9]+n1 ' "nvme list does not show namespace 1"
expect 3 '^/dev/nvme[0-9]+n2 ' "nvme list does not show namespace 2"
expect 3 '^rdma$' "the controller's transport is not rdma"

expect_count 4 'write: IOPS=[0-9.]+k?, BW=' 2 "fio printed no write IOPS for both namespaces"
expect_count 4 '^ +lat \((u|m|n)sec\): min=' 2 "fio printed no latency lines"
expect_count 4 'err= 0' 2 "fio did not finish both verified runs without error"
expect 4 '^queue port  qid +r/s +w/s' "the live view printed no header"
expect 4 '^ +[0-9]+ +1 +[1-9][0-9]* +[1-9][0-9]*\.[0-9] ' "the live view shows no I/O queue reading"
expect 4 '^  read +total +[1-9][0-9]* ' "debugfs latency shows no reads"
expect 4 '^  write +rdma_read +[1-9][0-9]* ' "debugfs latency shows no RDMA READ phase of the keyed writes"
expect 4 'qid [1-9][0-9]*, read: [1-9][0-9]* commands' "no histogram of an I/O queue's reads"

# (which I/O queue carries a job's commands depends on the CPU fio runs on)
expect 5 '^queue [0-9]+ port 1 qid [1-9][0-9]* .* live .* in_capsule [1-9]' "no I/O queue counted in-capsule commands"
expect 5 '^queue [0-9]+ port 1 qid [1-9][0-9]* .* live .* keyed [1-9]' "no I/O queue counted keyed commands"
expect 5 '^queue [0-9]+ port 1 qid 0 ' "no admin queue is listed"
queues=$(grep -E '^queue [0-9]+ ' <<<"$(step_text 5)" || true)
if grep -Ev ' errors 0$' <<<"$queues" >&2; then
	echo "demo step 5: a queue counted errors (above)" >&2
	failures=$((failures + 1))
fi
expect 5 'comm \[nvmet_rdma_rs\]' "rdma res show qp does not name nvmet_rdma_rs as a QP's owner"

expect 6 '^hello over RDMA$' "the send round trip did not come back"
expect 6 'rdma_client: ping: 20 iterations of 65536 bytes .*validated.* done' "ping did not finish validated"
expect_count 6 '^lat_median_us [0-9]+\.[0-9]+$' 2 "bench printed no latency"
expect_count 6 '^mb_s [0-9]+\.[0-9]+$' 2 "bench printed no bandwidth"
expect 6 ' rxe0 established ' "the server lists no established connection"

# Every queue step 5 listed is shown released in step 7.
while read -r _ number _ _ _ qid _; do
	[ -n "$number" ] || continue
	expect 7 "nvmet_rdma_rs: queue $number \\(port 1, qid $qid, host .*\\) released after [0-9]+ commands" \
		"queue $number (qid $qid) is not shown released"
done <<<"$queues"
[ -n "$queues" ] || { echo "demo step 5: no queue listed" >&2; failures=$((failures + 1)); }
expect 7 'nvmet_rdma_rs: unloading' "nvmet_rdma_rs did not unload"
expect 7 'rdma_server: connection [0-9]+ released' "the demo server did not release its connection"
grep -q '^=== demo: all 7 steps done$' "$transcript" || {
	echo "the transcript does not end with the demo's last line" >&2
	failures=$((failures + 1))
}

# The README's abridged transcript: its commands, in order, are the run's (block device
# numbers aside: the controller is nvme0 or nvme1 depending on discovery, and the host
# numbers namespaces in the order it found them, so NSID 1 may be nvme0n1 or nvme0n2).
commands() { { grep -E '^# ' || true; } | sed -E 's/nvme[0-9]+n[0-9]+/nvmeXnY/g; s/nvme[0-9]+/nvmeX/g'; }
readme_commands=$(sed -n '/^<!-- demo transcript: begin/,/^<!-- demo transcript: end/p' "$readme" | commands)
if [ -z "$readme_commands" ]; then
	echo "README.md has no abridged demo transcript" >&2
	failures=$((failures + 1))
else
	missing=$(awk 'NR == FNR { want[++n] = $0; next } i < n && $0 == want[i + 1] { i++ }
		END { for (j = i + 1; j <= n; j++) print want[j] }' \
		<(echo "$readme_commands") <(commands <"$transcript"))
	if [ -n "$missing" ]; then
		printf 'README.md shows a command the run did not make (in that order): %s\n' "$(head -n 1 <<<"$missing")" >&2
		failures=$((failures + 1))
	fi
fi

if ((failures)); then
	echo "demo transcript: $failures check(s) failed: $transcript" >&2
	exit 1
fi
echo "demo transcript: every step checked"
