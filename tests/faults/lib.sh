# Fault injection for guest scripts (make check-faults, tests/vm/nvmet-faults.sh): failslab
# and fail_page_alloc aimed at the project's modules by the stack-trace filter, one
# injected failure per case, and the bookkeeping of a sweep. Sourced after
# scripts/guest/lib.sh, not run. See Documentation/fault-injection.md.
#
# How an allocation is chosen. An allocation is a candidate when one of the innermost
# $FI_DEPTH frames of its stack lies in the text of the module under test (require-start/
# require-end, from /proc/kallsyms) and none in rxe's (reject-start/reject-end: the
# network side, which runs under the modules' post calls, is out of scope). Allocations
# that may sleep count too (ignore-gfp-wait=N), and order-0 pages (min-order=0). A case
# arms one of the two attributes (failslab: slab objects; fail_page_alloc: pages) with
# probability 100, times 1 and an interval, so that the Kth candidate after arming fails,
# in whatever context it runs (system call, RDMA CM handler, completion work, release
# work). Whether it did is exact: `times` reads 0 afterwards.
#
# The kernel counts candidates in a counter of its own per attribute (attr->count: only
# while armed, probability > 0 and times != 0, and only while interval > 1; never reset,
# not readable; lib/fault-inject.c, should_fail_ex) and fails the one that makes it a
# multiple of the interval. So the sweep tracks that counter: [lo, hi] bounds it; an
# interval of max(lo + K, hi + 1) fails the Kth candidate when the count is lo (a little
# earlier when it is higher), and after a failure the counter is exactly the interval
# (times is 0 then: nothing more is counted). A case that injects nothing leaves it
# somewhere below the interval (hi = interval - 1).
#
# The other mode ("task", for admin commands): every candidate allocation of one command
# fails (task-filter, make-it-fail on the command's process, times -1).
# shellcheck shell=bash

FI_DEPTH=${FI_DEPTH:-16}
FI_ATTRS=(failslab fail_page_alloc)
declare -A FI_LO=() FI_HI=()
declare -A FI_PHASE_CASES=() FI_PHASE_HITS=() FI_PHASE_ERRORS=() FI_PHASE_FAILS=()
FI_PHASE_ORDER=()
FI_CASES=0 FI_HITS=0 FI_FAILS=0 FI_CASE_ID=0
FI_FAILURES=()
FI_RC=0 FI_HIT=0 FI_HUNG_PID=
FI_PHASE=setup
# The modules whose log lines a case prints (a regex), and the running case's marker.
FI_LOG_RE=${FI_LOG_RE:-'nvmet_rdma_rs|rdma_server|rdma_client'}
FI_MARK=
# Kernel messages that fail a case (the VM runner's log scanner fails the whole run on
# them too; here they are pinned to the case that caused them).
FI_SPLAT_RE='BUG: |kernel BUG at|WARNING: |Oops|general protection fault|Kernel panic|possible (recursive|circular) locking|inconsistent lock state|scheduling while atomic|KFENCE: |unreferenced object 0x|new suspected memory leaks|blocked for more than|detected stall|list_(add|del) corruption|UBSAN: |panicked at|rust_panic|Call Trace:'

fi_dir() { echo "/sys/kernel/debug/$1"; }

# fi_setup: both attributes disarmed, set up as described above.
fi_setup() {
	local a d
	for a in "${FI_ATTRS[@]}"; do
		d=$(fi_dir "$a")
		[ -d "$d" ] || fail "$d is missing: the kernel lacks CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC or CONFIG_FAULT_INJECTION_DEBUG_FS"
		[ -e "$d/require-start" ] || fail "$d has no stack-trace filter (CONFIG_FAULT_INJECTION_STACKTRACE_FILTER)"
		echo 0 >"$d/probability"
		echo 0 >"$d/times"
		echo 1 >"$d/interval"
		echo 0 >"$d/space"
		# One line per injected failure, no stack dump (its "Call Trace:" would fail the
		# run); FI_VERBOSE=2 to see where each failure was injected (fi_case prints the
		# innermost frames), in a run meant for that (the VM runner's verdict is "splat").
		echo "${FI_VERBOSE:-1}" >"$d/verbose"
		echo N >"$d/task-filter"
		echo N >"$d/ignore-gfp-wait"
		echo "$FI_DEPTH" >"$d/stacktrace-depth"
		FI_LO[$a]=0 FI_HI[$a]=0
	done
	echo N >"$(fi_dir failslab)/cache-filter"
	echo 0 >"$(fi_dir fail_page_alloc)/min-order"
	echo N >"$(fi_dir fail_page_alloc)/ignore-gfp-highmem"
	FI_REJECT=$(fi_text_range rdma_rxe 2>/dev/null || echo "0x0 0x0")
	fi_sleep 0 # (its FIFO, shared with the subshells)
}

# fi_text_range MODULE...: "START END" of the modules' text: from their lowest text
# symbol to the next symbol of any kind above their highest one (their own data, or
# another module; at most 16 KiB on). A range with another module's text inside is
# refused. (Modules are placed one after the other; between their text lies their data,
# but no other code.)
fi_text_range() {
	local want=" $* " a last next
	awk -v want="$want" 'NF == 4 {
		m = substr($4, 2, length($4) - 2); text = ($2 == "t" || $2 == "T")
		print $1, (index(want, " " m " ") ? 1 : 0), text, m }' /proc/kallsyms |
		sort | awk '{ addr[NR] = $1; ours[NR] = $2; text[NR] = $3; name[NR] = $4 }
		END {
			for (i = 1; i <= NR; i++) if (ours[i] && text[i]) { if (!first) first = i; last = i }
			if (!first) { print "no text symbols" > "/dev/stderr"; exit 1 }
			for (i = first; i <= last; i++)
				if (!ours[i] && text[i]) { print "text of " name[i] " lies inside" > "/dev/stderr"; exit 2 }
			for (n = last + 1; n <= NR && addr[n] == addr[last]; n++);
			print "0x" addr[first], "0x" addr[last], (n <= NR ? "0x" addr[n] : "") }' | {
		read -r a last next || return 1
		if [ -z "$next" ] || ((next - last > 0x4000)); then next=$(printf '0x%x' $((last + 0x4000))); fi
		echo "$a $next"
	}
}

# fi_target START END: candidates are allocations with a frame in [START, END).
fi_target() {
	local a d
	if [ -z "$1" ] || [ -z "$2" ]; then fail "fi_target: empty range"; fi
	for a in "${FI_ATTRS[@]}"; do
		d=$(fi_dir "$a")
		echo "$1" >"$d/require-start"
		echo "$2" >"$d/require-end"
		echo "${FI_REJECT% *}" >"$d/reject-start"
		echo "${FI_REJECT#* }" >"$d/reject-end"
		echo "${FI_TARGET_DEPTH:-$FI_DEPTH}" >"$d/stacktrace-depth"
	done
	echo "fault injection aimed at [$1, $2), rxe's text [${FI_REJECT% *}, ${FI_REJECT#* }) excluded"
}

# fi_target_modules MODULE...: the modules' text; returns 1 (target unchanged) if it
# cannot be one range, and the caller decides (fn_retarget fails, fd_retarget narrows).
fi_target_modules() {
	local r
	r=$(fi_text_range "$@") || { echo "cannot make one text range of: $*"; return 1; }
	rm -f /tmp/fi-load
	# shellcheck disable=SC2086 # (two words)
	fi_target $r
	echo "$r" >/tmp/fi-range
}

# fi_target_load MODULE LOAD_CMD...: for a sweep of MODULE's load: the module is loaded
# (LOAD_CMD) if it is not, the code of its init targeted, and it is unloaded. Module
# memory is allocated first fit, so an unchanged module area gives the next load the
# same addresses (fi_same_place checks it). The candidates of a load are then the
# allocations made under its init code (.init.text: init_module, with the module's init
# where the compiler inlined it), within 32 frames: the init's own and those of
# everything it calls.
fi_target_load() {
	local m=$1 init size
	shift
	# (a case's load left the module area as it found it: same target as before)
	if [ ! -d "/sys/module/$m" ] && [ "$(cat /tmp/fi-load 2>/dev/null)" = "$m" ]; then return 0; fi
	[ -d "/sys/module/$m" ] || "$@" || return 1
	init=$(cat "/sys/module/$m/sections/.init.text") || return 1
	size=$(readelf -SW "$(modinfo -n "$m")" | awk '{ for (i = 1; i < NF; i++) if ($i == ".init.text") print $(i + 4) }')
	[ -n "$size" ] || { echo "no .init.text in $m"; return 1; }
	FI_TARGET_DEPTH=32 fi_target "$init" "$(printf '0x%x' $((init + 16#$size)))" >/dev/null
	echo "$init" >/tmp/fi-range
	echo "$m" >/tmp/fi-load
	rmmod "$m"
}

# fi_same_place MODULE: the loaded MODULE's init code was where fi_target_load aimed.
fi_same_place() {
	local init
	init=$(cat "/sys/module/$1/sections/.init.text") || return 1
	[ "$init" = "$(cat /tmp/fi-range)" ] && return 0
	rm -f /tmp/fi-load
	echo "$1's init was at $init, not at $(cat /tmp/fi-range): the case missed it"
	return 1
}

# fi_arm ATTR K: ATTR fails its Kth candidate allocation from now on ("task": every
# candidate of a process that set make-it-fail, see fi_in_task; "sync": the first one
# the counter can be sure of, see fi_sweep).
fi_arm() {
	local a=$1 k=$2 d lo hi interval
	if [ "$a" = task ]; then
		for d in "${FI_ATTRS[@]}"; do
			d=$(fi_dir "$d")
			echo Y >"$d/task-filter"
			echo 1 >"$d/interval"
			echo -1 >"$d/times"
			echo 100 >"$d/probability"
		done
		return 0
	fi
	d=$(fi_dir "$a")
	lo=${FI_LO[$a]} hi=${FI_HI[$a]}
	if [ "$k" = sync ]; then
		interval=$((hi + 1))
	else
		interval=$((lo + k))
		((interval > hi)) || interval=$((hi + 1))
	fi
	FI_INTERVAL=$interval
	echo "$interval" >"$d/interval"
	echo 1 >"$d/times"
	echo 100 >"$d/probability"
}

# fi_disarm ATTR: stops injecting; FI_HIT=1 if a failure was injected.
fi_disarm() {
	local a=$1 d
	if [ "$a" = task ]; then
		for d in "${FI_ATTRS[@]}"; do
			d=$(fi_dir "$d")
			echo 0 >"$d/probability"
			echo 0 >"$d/times"
			echo N >"$d/task-filter"
		done
		FI_HIT=0 # (counted in the case's log by fi_case)
		return 0
	fi
	d=$(fi_dir "$a")
	echo 0 >"$d/probability"
	if [ "$(cat "$d/times")" = 0 ]; then
		FI_HIT=1
		((FI_INTERVAL == 1)) || { FI_LO[$a]=$FI_INTERVAL; FI_HI[$a]=$FI_INTERVAL; }
	else
		FI_HIT=0
		((FI_INTERVAL == 1)) || FI_HI[$a]=$((FI_INTERVAL - 1))
	fi
	echo 0 >"$d/times"
}

# fi_in_task CMD...: runs CMD in a process whose candidate allocations all fail while
# the "task" mode is armed.
fi_in_task() { (echo 1 >/proc/self/make-it-fail && exec "$@"); }

# fi_sleep SECONDS: sleeps without starting a process (under TCG every process start
# costs a good part of a second): a read that times out on a FIFO nobody writes.
fi_sleep() {
	if [ -z "${FI_SLEEP_FD:-}" ]; then
		rm -f /tmp/fi-sleep.fifo
		mkfifo /tmp/fi-sleep.fifo
		exec {FI_SLEEP_FD}<>/tmp/fi-sleep.fifo
	fi
	read -r -t "$1" -u "$FI_SLEEP_FD" _ || true
}

# fi_wait SECONDS CMD...: polls CMD (best a function of builtins) every 0.2 s until it
# succeeds; fails after SECONDS.
fi_wait() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		fi_sleep 0.2
	done
}

# fi_bounded SECONDS CMD...: runs CMD (a function too) in the background and waits for
# it at most SECONDS; returns its status, or 124 (FI_HUNG_PID names the process).
# (CMD's output goes through a file: a process stuck in the kernel must not hold the
# test's output pipe, or the guest could not end.)
fi_bounded() {
	local limit=$1 pid deadline rc=0 out=/tmp/fi-bounded.$BASHPID.$RANDOM
	shift
	"$@" >"$out" 2>&1 </dev/null &
	pid=$!
	deadline=$((SECONDS + limit))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			FI_HUNG_PID=$pid
			cat "$out"
			return 124
		fi
		fi_sleep 0.1
	done
	wait "$pid" || rc=$?
	cat "$out"
	rm -f "$out"
	return $rc
}

# fi_stacks PID: the kernel stacks of PID and its children (for a hang's report).
fi_stacks() {
	local p
	for p in $1 $(pgrep -P "$1" 2>/dev/null); do
		echo "    [$p] $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")"
		sed 's/^/      /' "/proc/$p/stack" 2>/dev/null || true
	done
	# (a process gone in between has no stack: not a reason for set -e to end the run
	# before fi_abort's summary)
	return 0
}

# fi_case_log: the kernel log since the running case's marker.
# (With -r each line starts with its priority, "<3>": fi_case counts the modules' errors
# and warnings; fi_plain strips it.)
fi_case_log() {
	dmesg ${1:+-r} | awk -v m="$FI_MARK" 'index($0, m) { on = 1; next } on' | fi_without_kunit
}

# fi_without_kunit: the log on stdin without the KUnit suites' output (the test kernel
# runs the binding layers' suites when nvmet_rdma_rs loads; their cases provoke refusals
# on purpose, whose warnings say nothing about the case): from a top-level
# "KTAP version 1" to the last of the "ok N" lines its plan "1..N" announces.
fi_without_kunit() {
	awk '
		{ text = $0; sub(/^(<[0-9]+>)?\[[ 0-9.]+\] ?/, "", text) }
		!in_ktap && text == "KTAP version 1" { in_ktap = 1; plan = 0; done = 0; next }
		in_ktap && !plan && text ~ /^1\.\.[0-9]+$/ { plan = substr(text, 4) + 0; next }
		in_ktap {
			if (text ~ /^(not )?ok [0-9]+ /) { done++; if (plan && done >= plan) in_ktap = 0 }
			next
		}
		{ print }'
}
fi_plain() { sed 's/^<[0-9]*>//'; }

fi_phase() {
	FI_PHASE=$1
	if [ -z "${FI_PHASE_CASES[$1]:-}" ]; then
		FI_PHASE_ORDER+=("$1")
		FI_PHASE_CASES[$1]=0 FI_PHASE_HITS[$1]=0 FI_PHASE_ERRORS[$1]=0 FI_PHASE_FAILS[$1]=0
	fi
	step "fault injection: $1"
}

# fi_fail MESSAGE: records a failure of the running phase (the sweep goes on).
fi_fail() {
	FI_FAILS=$((FI_FAILS + 1))
	FI_PHASE_FAILS[$FI_PHASE]=$((${FI_PHASE_FAILS[$FI_PHASE]:-0} + 1))
	FI_FAILURES+=("$FI_PHASE: $1")
	echo "FAIL: $FI_PHASE: $1"
	echo "rrs: fi: FAIL: $FI_PHASE: $1" >/dev/kmsg
}

# fi_abort MESSAGE: a failure after which nothing can go on (a hang): summary, exit.
fi_abort() {
	fi_fail "$1"
	fi_summary
	exit 1
}

# fi_case ATTR K LIMIT OP [ARGS...]: one case of the running phase: ATTR armed for its
# Kth candidate ("task": all of them), OP run (at most LIMIT seconds), disarmed. Sets
# FI_RC (OP's status) and FI_HIT. A hang aborts the run; a splat fails the case.
fi_case() {
	local a=$1 k=$2 limit=$3 log line what
	shift 3
	FI_CASE_ID=$((FI_CASE_ID + 1))
	FI_MARK="rrs: fi: case $FI_CASE_ID: $FI_PHASE $a n=$k"
	echo "$FI_MARK" >/dev/kmsg
	fi_arm "$a" "$k"
	FI_RC=0
	fi_bounded "$limit" "$@" || FI_RC=$?
	fi_disarm "$a"
	local raw errors=0
	raw=$(fi_case_log -r)
	log=$(fi_plain <<<"$raw")
	# The modules' errors and warnings (KERN_ERR, KERN_WARNING; above: worse): an
	# injected failure deserves a clear line, not a flood.
	while IFS= read -r line; do
		[[ $line =~ ^\<([0-9]+)\>.*($FI_LOG_RE):\  ]] && ((BASH_REMATCH[1] % 8 <= 4)) && errors=$((errors + 1))
	done <<<"$raw"
	if [ "$a" = task ]; then
		# (how many: the failures that were allowed to print a line)
		FI_HIT=0
		while IFS= read -r line; do
			[[ $line != *"FAULT_INJECTION: forcing a failure"* ]] || FI_HIT=$((FI_HIT + 1))
		done <<<"$log"
	fi
	FI_CASES=$((FI_CASES + 1))
	FI_PHASE_CASES[$FI_PHASE]=$((${FI_PHASE_CASES[$FI_PHASE]} + 1))
	if [ "$FI_HIT" != 0 ]; then
		FI_HITS=$((FI_HITS + 1))
		FI_PHASE_HITS[$FI_PHASE]=$((${FI_PHASE_HITS[$FI_PHASE]} + 1))
	fi
	[ "$FI_RC" = 0 ] || FI_PHASE_ERRORS[$FI_PHASE]=$((${FI_PHASE_ERRORS[$FI_PHASE]} + 1))
	case $a in
	task) what="every allocation of the command failed ($FI_HIT logged)" ;;
	*) if [ "$FI_HIT" = 1 ]; then what="injected (interval $FI_INTERVAL)"; else what="nothing injected"; fi ;;
	esac
	echo "case $FI_CASE_ID: $FI_PHASE $a n=$k: $what; status $FI_RC"
	# The modules' lines of the case.
	while IFS= read -r line; do
		[[ ! $line =~ ($FI_LOG_RE):\  ]] || echo "    $line"
	done <<<"$log"
	if ((errors > ${FI_MAX_ERROR_LINES:-3})); then
		fi_fail "case $FI_CASE_ID ($a n=$k): the modules logged $errors errors or warnings"
	fi
	if [ "$FI_RC" = 124 ]; then
		echo "    hung; kernel stacks:"
		fi_stacks "$FI_HUNG_PID"
		fi_abort "case $FI_CASE_ID ($a n=$k): $* did not finish in ${limit}s"
	fi
	local frames=
	if [ "${FI_VERBOSE:-1}" = 2 ]; then
		frames=$(fi_injected_frames <<<"$log")
		[ -z "$frames" ] || echo "$frames"
		log=$(fi_without_dumps <<<"$log")
	fi
	fi_judge_absorbed "$a" "$k" "$errors" "$frames"
	if [[ $log =~ $FI_SPLAT_RE ]]; then
		# (|| true: under pipefail, grep killed by head's exit must not end the run)
		grep -E -A30 "$FI_SPLAT_RE" <<<"$log" | head -60 | sed 's/^/    /' || true
		fi_fail "case $FI_CASE_ID ($a n=$k): kernel report: $(grep -Em1 "$FI_SPLAT_RE" <<<"$log")"
	fi
	return 0
}

# Injected failures an operation rightly absorbs (status 0, no error or warning line from
# the modules), by where they land: a text of the injected-at frames (fi_injected_frames:
# the allocator's callers, innermost first) -> why absorbing it is right. A phase's
# sweep file fills it in.
declare -A FI_ABSORBED_REASON=(
	["(no stack)"]="a __GFP_NOWARN allocation (no stack is dumped for it): the kernel marks so the allocations it has a fallback for"
)
declare -A FI_PHASE_ABSORBED=()

# fi_judge_absorbed ATTR K ERRORS FRAMES: a case whose failure was injected must end in
# an error the admin or host sees (OP's status, or a line of the modules at warning level
# or above), or be absorbed where FI_ABSORBED_REASON says why. With the stacks
# (FI_VERBOSE=2) an absorbed failure landing elsewhere fails the case; without them where
# it landed is not known, and it is only counted.
fi_judge_absorbed() {
	local a=$1 k=$2 errors=$3 frames=$4 pattern reason=
	[ "$a" != task ] && [ "$FI_HIT" = 1 ] && [ "$FI_RC" = 0 ] && [ "$errors" = 0 ] || return 0
	FI_PHASE_ABSORBED[$FI_PHASE]=$((${FI_PHASE_ABSORBED[$FI_PHASE]:-0} + 1))
	[ "${FI_VERBOSE:-1}" = 2 ] || return 0
	if [ -z "$frames" ]; then
		# (no dump: the allocation asked for none, __GFP_NOWARN, which the kernel's
		# convention keeps for allocations with a fallback)
		reason=${FI_ABSORBED_REASON["(no stack)"]:-}
	fi
	for pattern in "${!FI_ABSORBED_REASON[@]}"; do
		[ -z "$reason" ] || break
		[ "$pattern" != "(no stack)" ] && [[ $frames == *"$pattern"* ]] && reason=${FI_ABSORBED_REASON[$pattern]}
	done
	if [ -n "$reason" ]; then
		echo "    absorbed: $reason"
	else
		fi_fail "case $FI_CASE_ID ($a n=$k): the injected failure was absorbed (status 0, no line logged) where no reason is stated:${frames#*injected at:}"
	fi
}

# fi_injected_frames: (FI_VERBOSE=2) from a case's log on stdin, for each injected
# failure, its stack from the allocator's caller on (8 frames).
fi_injected_frames() {
	local line in=0 n=0 frames=
	while IFS= read -r line; do
		case $line in
		*"FAULT_INJECTION: forcing a failure"*) in=1 n=0 frames= ;;
		*"</TASK>"*) [ $in = 0 ] || echo "    injected at:$frames"; in=0 ;;
		*)
			if [ $in = 1 ] && [[ $line =~ \]\ +([a-zA-Z_][a-zA-Z0-9_.]*)\+0x ]]; then
				case ${BASH_REMATCH[1]} in
				dump_stack* | should_fail* | fail_dump | *alloc_pages* | *kmalloc* | *kmem_cache_alloc* | \
					__kvmalloc* | *slab_alloc* | krealloc* | kvrealloc* | alloc_slab* | new_slab | \
					allocate_slab | __alloc_frozen*) ;;
				*)
					n=$((n + 1))
					((n > 8)) || frames+=" ${BASH_REMATCH[1]}"
					;;
				esac
			fi
			;;
		esac
	done
}

# fi_without_dumps: the log on stdin without the stack dumps of injected failures.
fi_without_dumps() {
	local line in=0
	while IFS= read -r line; do
		case $line in
		# (two failures at once, on two CPUs, interleave their dumps)
		*"FAULT_INJECTION: forcing a failure"*) in=$((in + 1)) ;;
		*"</TASK>"*) ((in == 0)) || { in=$((in - 1)); continue; } ;;
		esac
		((in > 0)) || echo "$line"
	done
}

# fi_check LIMIT CHECK [ARGS...]: after a case, CHECK (that the system recovered) must
# succeed within LIMIT seconds; a failure is recorded against the case, a hang aborts.
# ($FI_CHECK_WHAT names the moment in the messages: "after case N" unless set.)
fi_check() {
	local limit=$1 rc=0 when=${FI_CHECK_WHAT:-after case $FI_CASE_ID}
	shift
	fi_bounded "$limit" "$@" || rc=$?
	case $rc in
	0) return 0 ;;
	124)
		echo "    check hung; kernel stacks:"
		fi_stacks "$FI_HUNG_PID"
		fi_abort "$when: $* did not finish in ${limit}s"
		;;
	*)
		fi_fail "$when: $* failed (status $rc)"
		return 1
		;;
	esac
}

# fi_next K: the next K of a sweep: every K up to $FI_DENSE (5), then 1.5 times as far.
fi_next() {
	if (($1 < ${FI_DENSE:-5})); then echo $(($1 + 1)); else echo $(($1 + ($1 + 1) / 2)); fi
}

# fi_one ATTR K LIMIT OP CHECK [PREP]: PREP (unarmed), then the case, then CHECK.
fi_one() {
	local a=$1 k=$2 limit=$3 op=$4 check=$5 prep=${6:-}
	if [ -n "$prep" ]; then
		FI_MARK="rrs: fi: prepare case $((FI_CASE_ID + 1)):"
		echo "$FI_MARK" >/dev/kmsg
		# (fi_check records the failure once; FI_RC 0: a caller that judges the case by
		# its status must not judge the previous case's again)
		if ! FI_CHECK_WHAT="preparing case $((FI_CASE_ID + 1))" fi_check 120 "$prep"; then
			FI_HIT=0 FI_RC=0
			return 0
		fi
	fi
	fi_case "$a" "$k" "$limit" "$op"
	local hit=$FI_HIT
	fi_check 120 "$check" || true
	FI_HIT=$hit
	fi_kmemleak_case
}

# Objects kmemleak has reported, by address: the case after which a scan first did.
declare -A FI_LEAK_SEEN=()

# fi_kmemleak_case: a kmemleak scan after each case, remembering which case each object
# it reports was first seen after. kmemleak reports an object only once it is some
# seconds old, so a leak shows after its own case or the next; a report that a later
# scan no longer makes was an object in flight, not a leak. fi_kmemleak, at the end,
# names for each object still reported the case after which it was first seen.
fi_kmemleak_case() {
	local line addr
	echo scan >/sys/kernel/debug/kmemleak
	while read -r line; do
		[[ $line =~ ^unreferenced\ object\ (0x[0-9a-f]+) ]] || continue
		addr=${BASH_REMATCH[1]}
		[ -n "${FI_LEAK_SEEN[$addr]:-}" ] || FI_LEAK_SEEN[$addr]="case $FI_CASE_ID ($FI_PHASE)"
	done <<<"$(cat /sys/kernel/debug/kmemleak)"
}

# fi_sweep ATTR LIMIT OP CHECK [PREP]: the running phase's sweep over ATTR's Kth
# candidate allocation (fi_one each): K = 1, 2, ... (see fi_next) until a case injects
# nothing, then bisecting down to the last K that injects (about how many candidates
# the operation has). At most $FI_MAX_CASES cases; with $FI_KS set (the short run),
# exactly those K.
fi_sweep() {
	local a=$1 limit=$2 op=$3 check=$4 prep=${5:-} k=1 hit=0 miss=0 n=0 mid
	if [ -n "${FI_KS:-}" ]; then
		for k in $FI_KS; do fi_one "$a" "$k" "$limit" "$op" "$check" "$prep"; done
		return 0
	fi
	while ((n < ${FI_MAX_CASES:-12})); do
		fi_one "$a" "$k" "$limit" "$op" "$check" "$prep"
		n=$((n + 1))
		if [ "$FI_HIT" = 1 ]; then hit=$k; k=$(fi_next "$k"); else miss=$k; break; fi
	done
	while ((miss > hit + 1 && n < ${FI_MAX_CASES:-12})); do
		mid=$(((hit + miss) / 2))
		fi_one "$a" "$mid" "$limit" "$op" "$check" "$prep"
		n=$((n + 1))
		if [ "$FI_HIT" = 1 ]; then hit=$mid; else miss=$mid; fi
	done
	# A case that injected nothing left the kernel's counter somewhere in [lo, hi]: the
	# next sweep's first case would fail a later candidate than its first. Cases whose
	# interval is hi + 1 make it exact again (the operation has candidates: a few do).
	local tries=0
	while ((FI_HI[$a] > FI_LO[$a] && hit > 0 && tries < 3)); do
		fi_one "$a" sync "$limit" "$op" "$check" "$prep"
		tries=$((tries + 1))
	done
	if ((miss)); then
		echo "sweep $FI_PHASE $a: $n cases; the operation makes about $hit candidate allocations (none at $miss)"
	else
		echo "sweep $FI_PHASE $a: $n cases (the limit); the operation makes at least $hit candidate allocations"
	fi
}

# fi_kmemleak: scans (as kmemleak_check) and records a failure on any suspected leak;
# then forgets what it reported.
fi_kmemleak() {
	local report
	sleep 5
	echo scan >/sys/kernel/debug/kmemleak
	sleep 1
	echo scan >/sys/kernel/debug/kmemleak
	report=$(cat /sys/kernel/debug/kmemleak)
	if [ -n "$report" ]; then
		# (a here-string, not echo into a pipe: head's early exit would make the echo
		# die of SIGPIPE, and pipefail with set -e end the run before the summary)
		head -80 <<<"$report" || true
		local line addr cases=
		while read -r line; do
			[[ $line =~ ^unreferenced\ object\ (0x[0-9a-f]+) ]] || continue
			addr=${BASH_REMATCH[1]}
			echo "  $addr: first reported after ${FI_LEAK_SEEN[$addr]:-the last case (teardown)}"
			[[ " $cases " == *" ${FI_LEAK_SEEN[$addr]:-teardown} "* ]] || cases+=" ${FI_LEAK_SEEN[$addr]:-teardown}"
		done <<<"$report"
		fi_fail "kmemleak reports leaks ($(grep -c '^unreferenced object' <<<"$report") objects), first seen after:$cases"
	fi
	echo clear >/sys/kernel/debug/kmemleak
}

# fi_option ARG: takes a sweep option (max=N pmax=N dense=N ks=K:K:... stacks, see
# tests/faults/nvmet-sweep.sh); fails if ARG is not one.
fi_option() {
	case $1 in
	max=*) FI_MAX_CASES=${1#max=} ;;
	pmax=*) FI_MAX_PAGE_CASES=${1#pmax=} ;;
	dense=*) FI_DENSE=${1#dense=} ;;
	ks=*) FI_KS=${1#ks=} FI_KS=${FI_KS//:/ } ;;
	stacks) FI_VERBOSE=2 ;;
	*) return 1 ;;
	esac
}

# fi_summary: one line per phase and the totals.
fi_summary() {
	local p
	echo "=== fault injection summary"
	for p in "${FI_PHASE_ORDER[@]}"; do
		printf 'phase %-22s %3d cases, %3d injected, %3d ended in an error, %3d absorbed, %d failures\n' "$p" \
			"${FI_PHASE_CASES[$p]}" "${FI_PHASE_HITS[$p]}" "${FI_PHASE_ERRORS[$p]}" \
			"${FI_PHASE_ABSORBED[$p]:-0}" "${FI_PHASE_FAILS[$p]}"
	done
	echo "faults: $FI_CASES cases, $FI_HITS injected, $FI_FAILS failures"
	local f
	for f in "${FI_FAILURES[@]}"; do echo "  failure: $f"; done
}

# Phases whose cases rightly inject nothing, with the reason (fi_finish prints it).
declare -A FI_NOTHING_TO_INJECT=()

# fi_check_injected: a phase with cases none of which injected a failure tested nothing:
# a failure of the run, unless FI_NOTHING_TO_INJECT gives the phase's reason.
fi_check_injected() {
	local p
	for p in "${FI_PHASE_ORDER[@]}"; do
		((${FI_PHASE_CASES[$p]} > 0 && ${FI_PHASE_HITS[$p]} == 0)) || continue
		if [ -n "${FI_NOTHING_TO_INJECT[$p]:-}" ]; then
			echo "phase $p injected nothing, as it should: ${FI_NOTHING_TO_INJECT[$p]}"
		else
			FI_PHASE=$p fi_fail "${FI_PHASE_CASES[$p]} cases and none injected a failure: the phase tested nothing"
		fi
	done
}

# fi_finish: the summary; exits non-zero if anything failed.
fi_finish() {
	fi_check_injected
	fi_summary
	[ "$FI_FAILS" = 0 ] || exit 1
}
