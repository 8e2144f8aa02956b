#!/usr/bin/env python3
"""The wire between the two guests of scripts/vm-pair.sh, with a switch to cut it.

Each guest's NIC is a QEMU dgram netdev whose frames travel as UDP datagrams on the
loopback. The relay sits between the two: datagrams from the target's QEMU to its
target-side port go out of its host-side port to the host's QEMU, and back the same
way. While the file CUT exists (a guest creates it through the directory both share,
tests/lib/pair.sh's pair_wire_cut), every frame is dropped in both directions: a network
partition, with the guests' links up, as a failed switch or a cable pulled between two
hops looks to them. A file CUT-ms holding a number N cuts the wire for N milliseconds
from when the relay sees it (within 50 ms), however slowly the guest that asked runs;
the relay removes it. The relay counts what it passed and dropped, and writes the counts
to STATS on each change of the switch and at the end (SIGTERM).

usage: wire-relay.py TARGET_SIDE_PORT HOST_SIDE_PORT TARGET_QEMU_PORT HOST_QEMU_PORT CUT STATS
"""
import os
import selectors
import signal
import socket
import sys
import time


def main():
    t_side, h_side, t_qemu, h_qemu = (int(a) for a in sys.argv[1:5])
    cut_path, stats_path = sys.argv[5:7]
    to_target = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    to_target.bind(("127.0.0.1", t_side))
    to_host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    to_host.bind(("127.0.0.1", h_side))
    # (a datagram arriving on one side goes out of the other, to the other QEMU)
    route = {
        to_target: (to_host, ("127.0.0.1", h_qemu)),
        to_host: (to_target, ("127.0.0.1", t_qemu)),
    }
    sel = selectors.DefaultSelector()
    for s in route:
        sel.register(s, selectors.EVENT_READ)
    stats = {"passed": 0, "dropped": 0, "cuts": 0}
    cut = False
    cut_until = 0.0
    checked = 0.0

    def write_stats():
        with open(stats_path + ".tmp", "w") as f:
            for k, v in stats.items():
                f.write(f"{k} {v}\n")
        os.replace(stats_path + ".tmp", stats_path)

    def stop(*_):
        write_stats()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    write_stats()
    while True:
        now = time.monotonic()
        if now - checked >= 0.05:
            checked = now
            try:
                with open(cut_path + "-ms") as f:
                    cut_until = now + int(f.read().strip() or 0) / 1000
                os.unlink(cut_path + "-ms")
            except (OSError, ValueError):
                pass
            was, cut = cut, os.path.exists(cut_path) or now < cut_until
            if cut != was:
                stats["cuts"] += cut
                write_stats()
        for key, _ in sel.select(timeout=0.05):
            data = key.fileobj.recv(65536)
            if cut:
                stats["dropped"] += 1
                continue
            out, addr = route[key.fileobj]
            out.sendto(data, addr)
            stats["passed"] += 1


if __name__ == "__main__":
    main()
