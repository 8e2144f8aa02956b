# Pass/fail bookkeeping of the test suites (scripts/check.sh, scripts/check-kasan.sh).
# Sourced, not run.
# shellcheck shell=bash

passed=0 failed=0 failures=()

# result NAME RC: counts and prints one check's outcome.
result() {
	if [ "$2" = 0 ]; then
		passed=$((passed + 1)); printf 'PASS  %s\n' "$1"
	else
		failed=$((failed + 1)); failures+=("$1"); printf 'FAIL  %s\n' "$1"
	fi
}

# finish: prints the failures and the line "N passed, N failed", and exits (non-zero
# if anything failed).
finish() {
	((${#failures[@]} == 0)) || printf 'failed: %s\n' "${failures[*]}"
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}
