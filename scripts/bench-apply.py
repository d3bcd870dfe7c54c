#!/usr/bin/python3
"""bench-apply.py -- time `leasehook apply` against `ip -batch` on a real kernel.

The instance is the planner benchmark's: 15 NICs, each with 50 IPv4 and 50 IPv6
addresses and 2 delegated prefixes per family (1456 rules, 56 routes, 1470
addresses). Each round gets a fresh network namespace with 15 veth links (set-up
is not timed), then times one command:

  * leasehook apply from empty     (`leasehook apply --plan plan.json`)
  * apply unchanged, first         (the same again, started in the namespace
                                    as the row "leasehook's own CPU" below:
                                    must write nothing; the full path, which
                                    records the applied digest)
  * leasehook apply, unchanged     (the same again: must write nothing; the
                                    digest's fast path)
  * the same, leasehook's own CPU  (the unchanged apply once more, started in
                                    the namespace by this script (setns in the
                                    child) instead of `ip netns exec`: the CPU
                                    of the leasehook process alone, without
                                    `ip`'s start, its mount namespace and its
                                    remount of /sys, which the row above counts)
  * ip -batch from empty           (`ip -batch` of the same rules, routes and
                                    addresses, from `leasehook plan --format ip`)
  * leasehook flush                (`leasehook flush` after the apply: every
                                    interface's state file, one run)
  * ip -batch deleting             (the same lines as `del`, newest first, after
                                    adding them with `ip -batch` as leasehook
                                    does: IPv6 addresses `nodad`)

and prints the medians of wall time and of CPU time (user + system of the
process: the work it does, steadier than wall time on a busy 2-core machine),
and their ratios (the user part of the CPU time is recorded too). Needs root. Run: scripts/bench-apply.py [--rounds N] (builds
the release binary first with cargo).

With LEASEHOOK_BENCH_JSON naming a file, the numbers are also appended to it as
one JSON line (for bench/run). SIGINT and SIGTERM stop it; the namespace and the
temporary folder are removed on the way out.
"""
import argparse, ctypes, json, os, resource, statistics, subprocess, sys, tempfile, time

from benchlib import leasehook_bin, pct, sh, stop_on_signals, veth_ns

NICS, ADDRS = 15, 50

def instance(tmp):
    macs, links, leases = {}, [], []
    for n in range(NICS):
        mac = "02:00:00:00:01:%02x" % n
        v4 = ["10.%d.%d.%d" % (n, k // 200, 10 + k % 200) for k in range(ADDRS)]
        v6 = ["2600:1f18:0:%x::%x" % (n, 0x100 + k) for k in range(ADDRS)]
        macs[mac] = {"device-number": str(n), "network-card": "0",
                     "local-ipv4s": "\n".join(v4), "ipv6s": "\n".join(v6),
                     "subnet-ipv4-cidr-block": "10.%d.0.0/16" % n,
                     "subnet-ipv6-cidr-blocks": "2600:1f18:0:%x::/64" % n,
                     "ipv4-prefix": ["10.%d.100.0/28" % n, "10.%d.100.16/28" % n],
                     "ipv6-prefix": ["2600:1f18:0:%x:8000::/80" % n, "2600:1f18:0:%x:8001::/80" % n]}
        name = "ens%d" % (5 + n)
        links.append((name, mac))
        for fam, body in (("4", "reason=BOUND\ninterface=%s\nnew_ip_address=10.%d.0.10\nnew_subnet_mask=255.255.0.0\nnew_routers=10.%d.0.1\n" % (name, n, n)),
                          ("6", "reason=BOUND6\ninterface=%s\nnew_ip6_address=2600:1f18:0:%x::100\nnew_ip6_prefixlen=128\n" % (name, n))):
            path = os.path.join(tmp, "%s-%s.env" % (name, fam))
            open(path, "w").write(body)
            leases.append(path)
    md = os.path.join(tmp, "md.json")
    json.dump({"mac": "02:00:00:00:01:00", "network": {"interfaces": {"macs": macs}}}, open(md, "w"))
    return md, links, leases

def cpu():
    """(user + system, user) seconds of the children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime, ru.ru_utime

def timed(args):
    """(wall, CPU, user CPU) seconds of one command, and its output."""
    c, t = cpu(), time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True)
    dt, dc = time.perf_counter() - t, cpu()
    if r.returncode != 0:
        sys.exit("%s failed: %s" % (" ".join(args[:6]), r.stderr))
    return (dt, dc[0] - c[0], dc[1] - c[1]), r.stdout

def timed_in(ns, args):
    """timed(args) with the child moved into network namespace `ns` before it
    runs (setns(2), as `ip netns exec` does, without `ip` itself): the
    rusage is the command's process alone."""
    libc = ctypes.CDLL(None, use_errno=True)
    def enter():
        fd = os.open("/run/netns/" + ns, os.O_RDONLY | os.O_CLOEXEC)
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            os._exit(127)
        os.close(fd)
    c, t = cpu(), time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, preexec_fn=enter)
    dt, dc = time.perf_counter() - t, cpu()
    if r.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(args[:6]), r.returncode, r.stderr))
    return (dt, dc[0] - c[0], dc[1] - c[1]), r.stdout

def plan_args(lh, md, links, leases):
    args = [lh, "plan", "--metadata", md]
    for name, mac in links:
        args += ["--link", "%s=%s,ra=fe80::1" % (name, mac)]
    for l in leases:
        args += ["--lease", l]
    return args

def summary(xs, i):
    """Median and p90 of field i (0 wall, 1 CPU, 2 user CPU) of (wall, CPU, user)
    triples, in ms."""
    return {"median_ms": pct([x[i] for x in xs], 50) * 1000, "p90_ms": pct([x[i] for x in xs], 90) * 1000}

def main():
    stop_on_signals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--bin", help="leasehook binary (default: build target/release/leasehook)")
    a = ap.parse_args()
    lh = leasehook_bin(a.bin)
    ns = "lhbench-%d" % os.getpid()
    with tempfile.TemporaryDirectory() as tmp:
        md, links, leases = instance(tmp)
        args = plan_args(lh, md, links, leases)
        plan = os.path.join(tmp, "plan.json")
        open(plan, "w").write(sh(*args, "--format", "json").stdout)
        plan_bytes = os.path.getsize(plan)
        # `ip -batch` lines take no -4/-6, and `rule add` needs the family: one
        # batch file per family, run as `ip -4 -batch` and `ip -6 -batch`.
        lines = [l[3:] for l in sh(*args, "--format", "ip").stdout.splitlines() if l.startswith("ip ")]
        batches = {}
        for fam in ("-4", "-6"):
            batches[fam] = os.path.join(tmp, "plan%s.batch" % fam)
            open(batches[fam], "w").write("".join(l.split(" ", 1)[1] + "\n" for l in lines if l.startswith(fam + " ")))
        # The same objects deleted, newest first (rules, then routes, then addresses).
        # They are added first (not timed) as leasehook adds them: IPv6 addresses
        # with `nodad`, so they are in the kernel's IPv6 tables at once (without it,
        # they wait for duplicate address detection, and every delete that walks the
        # IPv6 routing tree finds it a few hundred routes smaller).
        adds, dels = {}, {}
        for fam in ("-4", "-6"):
            adds[fam] = os.path.join(tmp, "added%s.batch" % fam)
            dels[fam] = os.path.join(tmp, "flush%s.batch" % fam)
            own = [l.split(" ", 1)[1] for l in lines if l.startswith(fam + " ")]
            nodad = lambda l: l + " nodad" if fam == "-6" and l.startswith("address add ") else l
            open(adds[fam], "w").write("".join(nodad(l) + "\n" for l in own))
            open(dels[fam], "w").write("".join(l.replace(" add ", " del ", 1) + "\n" for l in reversed(own)))
        first, full, again, own, ipb, flush, ipd = [], [], [], [], [], [], []
        try:
            for _ in range(a.rounds):
                root = tempfile.mkdtemp(dir=tmp)
                veth_ns(ns, links)
                cmd = ["ip", "netns", "exec", ns, lh, "apply", "--root", root, "--plan", plan]
                t, out = timed(cmd)
                first.append(t)
                writes = out.split()[0]
                # The first unchanged apply takes the full path (it records the
                # applied digest, docs/apply.md); the ones after it the fast path.
                t, out = timed_in(ns, cmd[4:])
                full.append(t)
                if not out.startswith("0 change(s)"):
                    sys.exit("re-apply (full) was not a no-op: " + out)
                t, out = timed(cmd)
                again.append(t)
                if not out.startswith("0 change(s)"):
                    sys.exit("re-apply was not a no-op: " + out)
                t, out = timed_in(ns, cmd[4:])
                own.append(t)
                if not out.startswith("0 change(s)"):
                    sys.exit("re-apply (setns) was not a no-op: " + out)
                t, out = timed(["ip", "netns", "exec", ns, lh, "flush", "--root", root])
                flush.append(t)
                if not out.startswith("%s change(s): 0 added, %s removed" % (writes, writes)):
                    sys.exit("flush did not remove the %s objects applied: %s" % (writes, out))
                veth_ns(ns, links)
                t4, _ = timed(["ip", "-n", ns, "-4", "-batch", batches["-4"]])
                t6, _ = timed(["ip", "-n", ns, "-6", "-batch", batches["-6"]])
                ipb.append(tuple(a + b for a, b in zip(t4, t6)))
                veth_ns(ns, links)
                timed(["ip", "-n", ns, "-4", "-batch", adds["-4"]])
                timed(["ip", "-n", ns, "-6", "-batch", adds["-6"]])
                t4, _ = timed(["ip", "-n", ns, "-4", "-batch", dels["-4"]])
                t6, _ = timed(["ip", "-n", ns, "-6", "-batch", dels["-6"]])
                ipd.append(tuple(a + b for a, b in zip(t4, t6)))
        finally:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    wall = lambda xs: statistics.median(x[0] for x in xs) * 1000
    work = lambda xs: statistics.median(x[1] for x in xs) * 1000
    user = lambda xs: statistics.median(x[2] for x in xs) * 1000
    print("objects: %d lines (%s netlink writes by leasehook), %d rounds; median wall / CPU (user+sys) ms"
          % (len(lines), writes, a.rounds))
    print("leasehook apply, from empty : %7.1f / %7.1f" % (wall(first), work(first)))
    print("apply unchanged, first      : %7.1f / %7.1f (full path, records the digest; leasehook alone; user CPU %.1f)" % (wall(full), work(full), user(full)))
    print("leasehook apply, unchanged  : %7.1f / %7.1f (0 writes; user CPU %.1f)" % (wall(again), work(again), user(again)))
    print("  the same, leasehook alone : %7.1f / %7.1f (no `ip netns exec`; user CPU %.1f)" % (wall(own), work(own), user(own)))
    print("ip -batch, from empty       : %7.1f / %7.1f (ip -4 -batch + ip -6 -batch)" % (wall(ipb), work(ipb)))
    print("ratio apply/ip-batch        : %.2f wall, %.2f CPU" % (wall(first) / wall(ipb), work(first) / work(ipb)))
    print("leasehook flush             : %7.1f / %7.1f (every interface, one run)" % (wall(flush), work(flush)))
    print("ip -batch, deleting         : %7.1f / %7.1f (ip -4 -batch + ip -6 -batch)" % (wall(ipd), work(ipd)))
    print("ratio flush/ip-batch        : %.2f wall, %.2f CPU" % (wall(flush) / wall(ipd), work(flush) / work(ipd)))
    out = os.environ.get("LEASEHOOK_BENCH_JSON")
    if out:
        kinds = [l.split()[1] for l in lines]
        res = {"bench": "apply", "rounds": a.rounds, "nics": len(links),
               "objects": {"lines": len(lines), "rules": kinds.count("rule"),
                           "routes": kinds.count("route"), "addresses": kinds.count("address")},
               "writes": int(writes),
               "plan_json_bytes": plan_bytes}
        for key, xs in (("apply_empty", first), ("apply_same_full", full), ("apply_same", again),
                        ("apply_same_own", own), ("ip_batch", ipb),
                        ("flush", flush), ("ip_batch_del", ipd)):
            res[key] = {"n": len(xs), "wall": summary(xs, 0), "cpu": summary(xs, 1),
                        "user": summary(xs, 2)}
        with open(out, "a") as f:
            f.write(json.dumps(res) + "\n")

main()
