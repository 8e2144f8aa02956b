#!/bin/bash
# PID 1 of the test VM (see scripts/vm-run.sh). The root file system is the host's,
# read-only over 9p; this script mounts what a test needs, installs the kernel's and
# the project's modules into a tmpfs /lib/modules, runs the test script (copied to the results share), writes its exit
# status to the results share and reboots (QEMU runs with -no-reboot, so it exits).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm 2>/dev/null
mount -t devpts devpts /dev/pts 2>/dev/null
# (bash's process substitution, below, goes through /dev/fd, which devtmpfs lacks)
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
for d in /tmp /run /var/tmp /var/lib /var/log /root; do [ -d "$d" ] && mount -t tmpfs tmpfs "$d"; done
mount -t debugfs debugfs /sys/kernel/debug
mount -t configfs configfs /sys/kernel/config
mkdir -p /run/results /run/kmods
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 results /run/results
# (the kernel's modules do not change during a run: cached, as the root is)
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro kmods /run/kmods
# (one of two guests on a wire, scripts/vm-pair.sh: the directory both share for signs)
if [ "${RRS_PAIR:-}" = 1 ]; then
	mkdir -p /run/pair
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 pair /run/pair
fi
# The repository, at the host's path, in case that path lies under one of the tmpfs above.
mkdir -p "$RRS_REPO" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro repo "$RRS_REPO"

# The host has no /lib/modules for this kernel and the root is read-only, so the
# kernel's modules and the project's live in a tmpfs tree that modprobe is pointed
# at, both for commands (a wrapper first in PATH) and for the kernel's own module
# autoloading (/proc/sys/kernel/modprobe).
kver=$(uname -r)
modroot=/run/modroot
mkdir -p "$modroot/lib/modules" /run/rrs-bin
cp -a "/run/kmods/lib/modules/$kver" "$modroot/lib/modules/"
# (the project's modules come from the repository, or from the results share when
# vm-run.sh -m put them there because they were built for another kernel; with
# vm-run.sh -M they are in the tree already, installed by `make modules_install`)
if [ "${RRS_MODULES:-}" != installed ]; then
	mkdir -p "$modroot/lib/modules/$kver/extra"
	project_modules=("$RRS_REPO"/rdma_server/*.ko "$RRS_REPO"/rdma_client/*.ko "$RRS_REPO"/nvmet_rdma_rs/*.ko)
	[ -d /run/results/modules ] && project_modules=(/run/results/modules/*.ko)
	for ko in "${project_modules[@]}"; do
		[ -f "$ko" ] && cp "$ko" "$modroot/lib/modules/$kver/extra/"
	done
	depmod -b "$modroot" -a "$kver"
fi
# (modprobe calls the tree's root -d, modinfo -b)
for tool in "modprobe -d" "modinfo -b"; do
	printf '#!/bin/sh\nexec /usr/sbin/%s %s "$@"\n' "$tool" "$modroot" >"/run/rrs-bin/${tool% *}"
	chmod +x "/run/rrs-bin/${tool% *}"
done
export PATH=/run/rrs-bin:$PATH
echo /run/rrs-bin/modprobe >/proc/sys/kernel/modprobe

hostname "rrs-${RRS_ROLE:-guest}"
ip link set lo up
echo 8 >/proc/sys/kernel/printk

test_name=$RRS_TEST_NAME
echo "RRS-BEGIN $test_name (accel $RRS_ACCEL, $(nproc) cpus, kernel $kver)"
echo "rrs: test $test_name begins" >/dev/kmsg
IFS=, read -r -a args <<<"${RRS_ARGS:-}"
cd /tmp
# (not a pipe into tee: the test's status must not wait for the pipe's end, which a
# background command stuck in the kernel, the very thing a test may have caught, holds)
bash /run/results/test.sh "${args[@]}" > >(tee /run/results/test.log) 2>&1
rc=$?
if [ "$rc" != 0 ]; then
	# What is stuck, for the post-mortem: the kernel's blocked tasks (sysrq w) and every
	# busy kernel worker's stack.
	echo w >/proc/sysrq-trigger
	for task in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$task/comm" || continue
		case $comm in kworker*) ;; *) continue ;; esac
		case $(cat "$task/wchan" 2>/dev/null) in worker_thread | rescuer_thread) continue ;; esac
		echo "rrs: busy worker ${task#/proc/} ($comm):"
		cat "$task/stack" 2>/dev/null
	done >/run/results/workers.txt
fi
echo "rrs: test $test_name ended with status $rc" >/dev/kmsg
# (the peer guest stops waiting for signs from a guest whose test ended)
[ "${RRS_PAIR:-}" = 1 ] && echo "$rc" >"/run/pair/$RRS_ROLE.ended"
echo "RRS-TAINT: $(cat /proc/sys/kernel/tainted)"
dmesg >/run/results/dmesg.txt
echo "$rc" >/run/results/status
sync
echo "RRS-END $test_name status $rc"
echo b >/proc/sysrq-trigger
sleep 10
