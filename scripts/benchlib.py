# SPDX-License-Identifier: Apache-2.0
"""What the Python benchmarks (bench-apply.py, bench-watch.py, bench-hold.py)
share: running a command, the percentile the Rust benches pick, a clean stop on
SIGINT/SIGTERM, the leasehook binary to measure, and a namespace of veth links."""

import os
import signal
import subprocess
import sys


def sh(*args, **kw):
    """Runs a command, its output captured as text; fails on a non-zero exit."""
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def pct(xs, p):
    """The sample at (n - 1) * p / 100 of the sorted values (as the Rust benches pick)."""
    xs = sorted(xs)
    return xs[(len(xs) - 1) * p // 100]


def _stop(signum, _frame):
    # Unwind through the finally clauses: namespaces and folders go.
    raise SystemExit(128 + signum)


def stop_on_signals():
    """SIGINT and SIGTERM unwind the benchmark (its clean-up runs) instead of
    killing it."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)


def leasehook_bin(given):
    """`given`, else the workspace's release `leasehook`, built first."""
    if given:
        return given
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sh("cargo", "build", "--release", "--locked", "-q", "-p", "leasehook", cwd=top)
    return os.path.join(top, "target/release/leasehook")


def veth_ns(ns, links, lo=False):
    """A fresh namespace `ns` (an old one of that name deleted) holding one veth
    link per (name, MAC) of `links`, up, link i with 10.i.0.10/16; `lo` up too
    when asked."""
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    sh("ip", "netns", "add", ns)
    if lo:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    for i, (ifname, mac) in enumerate(links):
        sh("ip", "-n", ns, "link", "add", "name", ifname, "address", mac, "type", "veth", "peer", "name", "p%d" % i)
        sh("ip", "-n", ns, "link", "set", ifname, "up")
        sh("ip", "-n", ns, "link", "set", "p%d" % i, "up")
        sh("ip", "-n", ns, "address", "add", "10.%d.0.10/16" % i, "dev", ifname)


if __name__ == "__main__":
    sys.exit("benchlib.py is a module of the benchmark scripts, not a program")
