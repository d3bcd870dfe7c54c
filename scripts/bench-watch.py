#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench-watch.py -- `leasehook watch`'s cost and its self-healing's latency.

A network namespace with 11 veth links, each given one address and, through
`leasehook apply --plan` below a temporary root, the 10 secondary NICs one rule
and a table of routes each (recorded as a hook would record them). Then `leasehook watch` (the release
binary) runs in it, and this measures:

  * its CPU time over --idle seconds (default 60) with nothing changing, and its
    threads' voluntary context switches meanwhile (wake-ups);
  * the repair latency: --rounds times (default 30), `ip rule del` of one NIC's
    rule (a different NIC each time, so no NIC reaches the three repairs a minute
    that stop the watcher), timed from the kernel's deletion notification to the
    one of the rule being added back, both stamped by `ip -ts monitor rule`;
  * its peak RSS (VmHWM) after all of it.

Needs root. Run: scripts/bench-watch.py [--bin target/release/leasehook]
[--idle S] [--rounds N]. With LEASEHOOK_BENCH_JSON naming a file, the numbers
are appended to it as one JSON line (for bench/run). SIGINT and SIGTERM stop it;
the namespace, the processes and the temporary folder go on the way out.
"""
import argparse, datetime, glob, json, os, re, subprocess, sys, tempfile, threading, time

from benchlib import leasehook_bin, pct, sh, stop_on_signals, veth_ns

# The first NIC is the primary (no rule of its own): the others each have one.
NICS = 11
RULED = NICS - 1
RSS_TARGET_KIB = 8 * 1024
LATENCY_TARGET_MS = 1000


def instance(tmp):
    macs, links, leases = {}, [], []
    for n in range(NICS):
        mac = "02:00:00:00:02:%02x" % n
        macs[mac] = {"device-number": str(n), "network-card": "0",
                     "local-ipv4s": "10.%d.0.10" % n,
                     "subnet-ipv4-cidr-block": "10.%d.0.0/16" % n}
        name = "ens%d" % (5 + n)
        links.append((name, mac))
        path = os.path.join(tmp, "%s.env" % name)
        with open(path, "w") as f:
            f.write("reason=BOUND\ninterface=%s\nnew_ip_address=10.%d.0.10\n"
                    "new_subnet_mask=255.255.0.0\nnew_routers=10.%d.0.1\n" % (name, n, n))
        leases.append(path)
    md = os.path.join(tmp, "md.json")
    with open(md, "w") as f:
        json.dump({"mac": "02:00:00:00:02:00", "network": {"interfaces": {"macs": macs}}}, f)
    return md, links, leases


def ticks(pid):
    """User + system CPU of the process (all threads), in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wakeups(pid):
    n = 0
    for status in glob.glob("/proc/%d/task/*/status" % pid):
        with open(status) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    n += int(line.split()[1])
    return n


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise SystemExit("no %s for %d" % (key, pid))


STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)\]\s*(Deleted )?(.*)$")


class Monitor:
    """`ip -ts monitor rule` in the namespace: (time, deleted, text) per line."""

    def __init__(self, ns):
        self.p = subprocess.Popen(["ip", "-n", ns, "-ts", "monitor", "rule"], stdout=subprocess.PIPE,
                                  text=True, start_new_session=True)
        self.lines, self.cv = [], threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            m = STAMP.match(line.strip())
            if not m:
                continue
            t = datetime.datetime.fromisoformat(m.group(1)).timestamp()
            with self.cv:
                self.lines.append((t, bool(m.group(2)), m.group(3)))
                self.cv.notify_all()

    def wait_for(self, pred, timeout):
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for item in self.lines:
                    if pred(item):
                        return item
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def stop(self):
        self.p.terminate()
        self.p.wait()


def main():
    stop_on_signals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", help="leasehook binary (default: build target/release/leasehook)")
    ap.add_argument("--idle", type=int, default=60, help="seconds of idle CPU measured")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    if a.rounds > 3 * RULED:
        sys.exit("at most %d rounds (three repairs a minute per NIC)" % (3 * RULED))
    lh = leasehook_bin(a.bin)
    ns = "lhbench-watch-%d" % os.getpid()
    watch = monitor = None
    with tempfile.TemporaryDirectory(prefix="lhbench-watch-") as tmp:
        try:
            md, links, leases = instance(tmp)
            args = [lh, "plan", "--metadata", md]
            for name, mac in links:
                args += ["--link", "%s=%s" % (name, mac)]
            for l in leases:
                args += ["--lease", l]
            plan = os.path.join(tmp, "plan.json")
            with open(plan, "w") as f:
                f.write(sh(*args, "--format", "json").stdout)
            veth_ns(ns, links, lo=True)
            root = os.path.join(tmp, "root")
            os.makedirs(root)
            sh("ip", "netns", "exec", ns, lh, "apply", "--root", root, "--config", "/dev/null", "--plan", plan)
            rules = [l for l in sh("ip", "-n", ns, "rule").stdout.splitlines() if "proto 176" in l or "proto leasehook" in l]
            if len(rules) != RULED:
                sys.exit("expected %d rules of leasehook's, got: %s" % (RULED, rules))
            log = os.path.join(tmp, "watch.log")
            with open(log, "w") as err:
                watch = subprocess.Popen(["ip", "netns", "exec", ns, lh, "watch", "--root", root, "--config", "/dev/null"],
                                         stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ, LEASEHOOK_LOG_LEVEL="info"))
            end = time.monotonic() + 10
            while "self-healing: following" not in open(log).read():
                if time.monotonic() > end or watch.poll() is not None:
                    sys.exit("the watcher did not start: " + open(log).read())
                time.sleep(0.05)
            time.sleep(1)
            pid = watch.pid  # `ip netns exec` execs the program: the same process
            hz = os.sysconf("SC_CLK_TCK")
            c0, w0 = ticks(pid), wakeups(pid)
            time.sleep(a.idle)
            idle_cpu_ms = (ticks(pid) - c0) * 1000 / hz
            idle_wakeups = wakeups(pid) - w0
            print("idle %d s: CPU %.0f ms, %d wake-ups (%.1f/s)" % (a.idle, idle_cpu_ms, idle_wakeups, idle_wakeups / a.idle))

            monitor = Monitor(ns)
            time.sleep(0.3)
            latencies = []
            c1 = ticks(pid)
            for i in range(a.rounds):
                n = 1 + i % RULED
                sel = ["from", "10.%d.0.10" % n, "lookup", str(10000 + n)]
                seen = len(monitor.lines)
                sh("ip", "-n", ns, "rule", "del", *sel)
                key = "from 10.%d.0.10 lookup %d" % (n, 10000 + n)
                gone = monitor.wait_for(lambda it: it[1] and key in it[2] and monitor.lines.index(it) >= seen, 5)
                back = gone and monitor.wait_for(lambda it: not it[1] and key in it[2] and it[0] >= gone[0]
                                                 and monitor.lines.index(it) >= seen, 10)
                if not back:
                    sys.exit("round %d: the rule of ens%d did not come back:\n%s" % (i, 5 + n, open(log).read()))
                latencies.append((back[0] - gone[0]) * 1000)
                time.sleep(0.3)
            repair_cpu_ms = (ticks(pid) - c1) * 1000 / hz
            peak = status_kib(pid, "VmHWM")
            rss = status_kib(pid, "VmRSS")
            repairs = open(log).read().count("put back what something else removed")
            if repairs != a.rounds:
                sys.exit("%d repair lines for %d rounds:\n%s" % (repairs, a.rounds, open(log).read()))
            if os.path.exists(os.path.join(root, "run/leasehook/conflict")) and os.listdir(os.path.join(root, "run/leasehook/conflict")):
                sys.exit("a conflict was recorded: the rounds came too fast")
            lat = {"n": len(latencies), "median_ms": pct(latencies, 50), "p90_ms": pct(latencies, 90),
                   "max_ms": max(latencies), "min_ms": min(latencies)}
            print("repair latency (rule deleted -> back), %d rounds: median %.0f ms, p90 %.0f ms, max %.0f ms"
                  % (lat["n"], lat["median_ms"], lat["p90_ms"], lat["max_ms"]))
            print("CPU for the %d repairs: %.0f ms; peak RSS %d KiB (now %d KiB)" % (a.rounds, repair_cpu_ms, peak, rss))
            out = os.environ.get("LEASEHOOK_BENCH_JSON")
            if out:
                res = {"bench": "watch", "nics": RULED, "idle_s": a.idle, "idle_cpu_ms": idle_cpu_ms,
                       "idle_wakeups": idle_wakeups, "rounds": a.rounds, "latency": lat,
                       "repair_cpu_ms": repair_cpu_ms, "peak_rss_kib": peak, "rss_kib": rss,
                       "bin_bytes": os.path.getsize(lh),
                       "rss_target_kib": RSS_TARGET_KIB, "latency_target_ms": LATENCY_TARGET_MS}
                with open(out, "a") as f:
                    f.write(json.dumps(res) + "\n")
        finally:
            if monitor:
                monitor.stop()
            if watch and watch.poll() is None:
                watch.terminate()
                try:
                    watch.wait(5)
                except subprocess.TimeoutExpired:
                    watch.kill()
                    watch.wait()
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    main()
