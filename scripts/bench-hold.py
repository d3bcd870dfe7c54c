#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench-hold.py -- how long leasehook-dhclient holds dhclient-script when IMDS
misbehaves (issue 18, item 5): a benchmark, not a test; it asserts nothing.

As root. In a network namespace of its own (lhbench-PID) with the sample
instance's two NICs (eth0 10.20.0.10/24 primary, eth1 10.20.1.20/24 secondary,
MACs 02:00:00:00:00:01/02), the IMDS emulator inside it on 127.0.0.1: one good
BOUND, then per scenario ROUNDS RENEW events, each against a freshly started
emulator (so the cached token is a stale one every time, as after an IMDS
restart), timed from the shim's start to its exit. The synchronous and the total
budget are both `--budget` (3 s, the default synchronous budget), so no worker is
started and the shim's exit is the end of the hold. The bound the shim promises
is that budget plus one request timeout (2 s): docs/dhclient.md.

    scripts/bench-hold.py [--rounds 5] [--budget 3] [--bin-dir target/release]

Prints a table; with LEASEHOOK_BENCH_JSON naming a file, appends one JSON line
to it ({"bench": "hold", ...}) for bench/run. To look into one scenario:
BENCH_HOLD_ONLY=NAME runs only it, BENCH_HOLD_LOG_LEVEL=debug prints each run's
log and the emulator's request log.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from benchlib import pct, sh

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUEST_TIMEOUT_S = 2.0  # core/src/constants.rs IMDS_REQUEST_TIMEOUT

# name, what it does, emulator arguments (beyond --bind/--log), scenario rules.
SCENARIOS = [
    ("healthy", "IMDS healthy (reference)", [], []),
    ("slow", "every answer takes 0.5 s", [], [{"path": "/latest", "delay": 0.5}]),
    ("slow_401", "every answer takes 1.5 s; the cached token is refused (401, token PUT, GET again)",
     [], [{"path": "/latest", "delay": 1.5}]),
    ("slow_401_1_9", "every answer takes 1.9 s, just within one request's timeout; the cached token is refused",
     [], [{"path": "/latest", "delay": 1.9}]),
    ("always_401", "every GET answered 401 after 0.9 s, also with a new token",
     [], [{"path": "/latest/meta-data", "method": "GET", "status": 401, "delay": 0.9}]),
    ("reset", "every connection reset (TCP RST)", ["--reset"], None),
    ("hang", "every request read and never answered", [],
     [{"path": "/latest", "action": "drop"}]),
    ("late_hang", "answers 500 after 0.9 s, after that never answers", [],
     [{"path": "/latest", "until": 0.9, "delay": 0.9, "status": 500},
      {"path": "/latest", "from": 0.9, "action": "drop"}]),
]

NS = "lhbench-%d" % os.getpid()


class Emulator:
    def __init__(self, binary, tmp, extra, rules):
        argv = ["ip", "netns", "exec", NS, binary, "--cloud", "ec2", "--bind", "127.0.0.1:0",
                "--log", os.path.join(tmp, "imds.log")]
        argv += extra
        if "--reset" not in extra:
            scenario = os.path.join(tmp, "scenario.json")
            with open(scenario, "w", encoding="utf-8") as f:
                json.dump({"rules": rules or []}, f)
            argv += ["--require-token", "--scenario", "@" + scenario]
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline().strip()
        if not line:
            self.stop()
            sys.exit("bench-hold: the emulator did not start")
        self.url = "http://" + line.split()[-1]

    def stop(self):
        self.p.kill()
        self.p.wait()


def shim(binary, root, reason, url, budget):
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "reason": reason,
        "interface": "eth1",
        "new_ip_address": "10.20.1.20",
        "new_subnet_mask": "255.255.255.0",
        "new_routers": "10.20.1.1",
        "LEASEHOOK_ROOT": root,
        "LEASEHOOK_IMDS_ENDPOINTS": url,
        "LEASEHOOK_IMDS_BIND_INTERFACE": "false",
        "LEASEHOOK_IMDS_SYNC_BUDGET_S": str(budget),
        "LEASEHOOK_IMDS_BUDGET_S": str(budget),
        "LEASEHOOK_LOG_LEVEL": os.environ.get("BENCH_HOLD_LOG_LEVEL", "warn"),
    }
    if reason == "RENEW":
        env.update(old_ip_address="10.20.1.20", old_subnet_mask="255.255.255.0", old_routers="10.20.1.1")
    # A private mount namespace where /dev/log is /dev/null: the log goes to
    # standard error (here: discarded), not to the machine's syslog.
    argv = ["ip", "netns", "exec", NS, "unshare", "--mount", "--propagation", "private",
            "sh", "-c", 'mount --bind /dev/null /dev/log 2>/dev/null; exec "$@"', "sh",
            "env", "-i"] + ["%s=%s" % kv for kv in env.items()] + [binary]
    t = time.monotonic()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return (time.monotonic() - t) * 1000.0, r.returncode, r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=3.0)
    ap.add_argument("--bin-dir", default=os.path.join(TOP, "target", "release"))
    a = ap.parse_args()
    # The dhclient hook is the hook binary run under the hook's name, as installed
    # (tests/src/netns.rs makes the same link; one left from before issue 20 led
    # to the CLI and is made again).
    dhclient = os.path.join(a.bin_dir, "hooks", "leasehook-dhclient")
    target = os.path.join("..", "leasehook-hook")
    if os.access(os.path.join(a.bin_dir, "leasehook-hook"), os.X_OK) and (
            not os.path.islink(dhclient) or os.readlink(dhclient) != target):
        os.makedirs(os.path.dirname(dhclient), exist_ok=True)
        if os.path.lexists(dhclient):
            os.remove(dhclient)
        os.symlink(target, dhclient)
    emulator = os.path.join(a.bin_dir, "leasehook-emulator")
    for b in (dhclient, emulator):
        if not os.access(b, os.X_OK):
            sys.exit("bench-hold: %s missing (cargo build --release --workspace --bins)" % b)
    if os.geteuid() != 0:
        sys.exit("bench-hold: needs root (a network namespace)")
    signal.signal(signal.SIGINT, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    tmp = tempfile.mkdtemp(prefix="leasehook-bench-hold-")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    sh("ip", "netns", "add", NS)
    results = []
    try:
        sh("ip", "-n", NS, "link", "set", "lo", "up")
        for n, (mac, addr) in enumerate([("02:00:00:00:00:01", "10.20.0.10/24"),
                                         ("02:00:00:00:00:02", "10.20.1.20/24")]):
            eth = "eth%d" % n
            sh("ip", "-n", NS, "link", "add", "name", eth, "address", mac, "type", "veth",
               "peer", "name", "vpc%d" % n)
            sh("ip", "-n", NS, "link", "set", eth, "up")
            sh("ip", "-n", NS, "link", "set", "vpc%d" % n, "up")
            sh("ip", "-n", NS, "address", "add", addr, "dev", eth)
        good = Emulator(emulator, tmp, [], [])
        ms, code, err = shim(dhclient, root, "BOUND", good.url, a.budget)
        good.stop()
        rules = sh("ip", "-n", NS, "rule").stdout
        if code != 0 or "lookup 10001" not in rules:
            sys.exit("bench-hold: the first BOUND did not apply (exit %d):\n%s" % (code, err))
        bound_ms = a.budget * 1000.0 + REQUEST_TIMEOUT_S * 1000.0
        print("hold time of leasehook-dhclient RENEW, budget %.1f s, bound %.0f ms, %d rounds"
              % (a.budget, bound_ms, a.rounds))
        print("%-14s %9s %9s %9s  %s" % ("scenario", "median", "p90", "max", "exit"))
        only = os.environ.get("BENCH_HOLD_ONLY")
        for name, what, extra, rules in SCENARIOS:
            if only and name != only:
                continue
            samples, exits = [], set()
            for _ in range(a.rounds):
                e = Emulator(emulator, tmp, extra, rules)
                try:
                    ms, code, _err = shim(dhclient, root, "RENEW", e.url, a.budget)
                finally:
                    e.stop()
                samples.append(ms)
                exits.add(code)
                if os.environ.get("BENCH_HOLD_LOG_LEVEL"):
                    print(_err)
                    print(open(os.path.join(tmp, "imds.log"), encoding="utf-8").read())
            row = {
                "scenario": name,
                "what": what,
                "n": len(samples),
                "median_ms": round(pct(samples, 50), 1),
                "p90_ms": round(pct(samples, 90), 1),
                "max_ms": round(max(samples), 1),
                "exit": sorted(exits),
            }
            results.append(row)
            print("%-14s %7.0f ms %7.0f ms %7.0f ms  %s" % (
                name, row["median_ms"], row["p90_ms"], row["max_ms"], row["exit"]))
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
        subprocess.run(["rm", "-rf", tmp])
    line = {
        "bench": "hold",
        "rounds": a.rounds,
        "budget_s": a.budget,
        "request_timeout_s": REQUEST_TIMEOUT_S,
        "bound_ms": bound_ms,
        "scenarios": results,
    }
    out = os.environ.get("LEASEHOOK_BENCH_JSON")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
