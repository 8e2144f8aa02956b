#!/usr/bin/env bash
# The hostile host's randomized run: ITERATIONS random cases drawn from SEED against
# nvmet_rdma_rs in the test VM (tests/vm/nvmet-hostile.sh -s SEED -i ITERATIONS). A seed
# replays its run exactly: each case's draws depend on the seed and its number only.
#
# usage: hostile-random.sh [SEED [ITERATIONS]]   (default: the time as seed, 300 cases)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

seed=${1:-$(date +%s)}
iterations=${2:-300}
[[ $seed =~ ^[0-9]+$ && $iterations =~ ^[0-9]+$ ]] || die "SEED and ITERATIONS are numbers"

"$REPO_ROOT/scripts/setup-host.sh"
kbuild=$("$REPO_ROOT/scripts/build-kernel.sh")
make -C "$REPO_ROOT" KDIR="$kbuild" modules >/dev/null
run_dir=$CACHE_DIR/runs/hostile-random-$seed
log "hostile host, random mode: seed $seed, $iterations cases (replay: make hostile-random SEED=$seed ITERATIONS=$iterations)"
rc=0
"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -t $((600 + iterations * 12)) -o "$run_dir" \
	"$REPO_ROOT/tests/vm/nvmet-hostile.sh" -s "$seed" -i "$iterations" || rc=$?
grep -E '^(case .*FAILED|random mode|[0-9]+ failed)' "$run_dir/test.log" || true
log "seed $seed: $([ $rc = 0 ] && echo passed || echo FAILED); logs in $run_dir"
exit $rc
