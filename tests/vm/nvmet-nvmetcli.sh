#!/bin/bash
# nvmetcli configures nvmet_rdma_rs as it configures the C transport: a JSON configuration
# restored (port, subsystem, namespace), saved back, used by a host, then cleared.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

command -v nvmetcli >/dev/null || fail "nvmetcli is not installed (scripts/install-nvmetcli.sh)"
kmemleak_start
veth_setup
rdma_link_add rxe0 rxe veth0
nvmet_load nvmet_rdma_rs
modprobe null_blk nr_devices=1 memory_backed=1 gb=1

step "nvmetcli restore"
cat >/tmp/nvmet.json <<JSON
{
  "hosts": [],
  "ports": [
    {
      "addr": { "adrfam": "ipv4", "traddr": "$RRS_IP4_A", "treq": "not specified",
                "trsvcid": "4420", "trtype": "rdma" },
      "param": { "inline_data_size": "8192" },
      "portid": 1,
      "referrals": [],
      "subsystems": [ "$NQN" ]
    }
  ],
  "subsystems": [
    {
      "allowed_hosts": [],
      "attr": { "allow_any_host": "1" },
      "namespaces": [
        { "device": { "path": "/dev/nullb0" }, "enable": 1, "nsid": 1 }
      ],
      "nqn": "$NQN"
    }
  ]
}
JSON
nvmetcli restore /tmp/nvmet.json || fail "nvmetcli restore failed"
assert_dmesg "nvmet_rdma_rs: enabling port 1 \($RRS_IP4_A:4420\)"
grep -q "inline_data_size 8192" /sys/kernel/debug/nvmet_rdma_rs/ports || fail "ports: $(cat /sys/kernel/debug/nvmet_rdma_rs/ports)"

step "nvmetcli save shows what was configured"
nvmetcli save /tmp/saved.json || fail "nvmetcli save failed"
grep -q '"trtype": "rdma"' /tmp/saved.json || fail "saved configuration lacks the rdma port"
grep -q "\"nqn\": \"$NQN\"" /tmp/saved.json || fail "saved configuration lacks the subsystem"

step "a host uses it: 8 KiB writes travel in the capsule"
dev=$(host_connect "$RRS_IP4_A" 4420)
fio_verify "$dev" inline8k --rw=randwrite --bs=8k --iodepth=8 --size=2M
grep -Eq "qid 1 .* in_capsule [1-9]" /sys/kernel/debug/nvmet_rdma_rs/queues || fail "no in-capsule commands: $(cat /sys/kernel/debug/nvmet_rdma_rs/queues)"
host_disconnect

step "nvmetcli clear; unload"
nvmetcli clear || fail "nvmetcli clear failed"
[ -z "$(ls /sys/kernel/config/nvmet/ports)" ] || fail "ports left after nvmetcli clear"
modprobe -r nvme-rdma
rmmod nvmet_rdma_rs
rdma_link_delete rxe0
kmemleak_check
echo "nvmet-nvmetcli: ok"
