#!/bin/bash
# The short fault-injection run (make check; make check-faults runs the whole sweep):
# the regression test of issue 14 finding 3, a port disabled, a controller deleted and
# the device removed while every allocation of the admin's command fails still end
# their queues (close_queues used to need an allocation, and closed nothing without
# it); and one allocation failure injected into a host's connect (failslab aimed by the
# stack-trace filter at nvmet_rdma_rs's text), which must end in an error or be absorbed.
# After each case the target recovers (verified I/O); no splat, nothing leaks, the
# transport unloads. Kept to about four minutes under TCG: I/O, port enable, unload and
# the demo pair are swept by make check-faults only. See Documentation/fault-injection.md.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
. "$RRS_REPO/tests/faults/lib.sh"
. "$RRS_REPO/tests/faults/nvmet.sh"

fn_setup

fn_phase_close_queues

fi_phase connect
fn_drop_hosts_or_abort
fi_one failslab 1 90 fn_connect_op fn_connect_check fn_idle

fn_teardown

fi_finish
echo "nvmet-faults: ok"
