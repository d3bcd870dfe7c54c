#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""report.py -- turn the results of one `bench/run` into docs/performance.md.

Pure: results JSON in, Markdown out. `derive()` reshapes the raw lines the
benchmarks wrote into named values and computes every ratio; `render()` fills
the template (bench/performance.md.in) with them. The template language:

    {{ path }}                 a value (dotted path: plan.parse.median_us)
    {{ path | ms }}            formatted: ms/us (3 significant digits), ratio
                               (2 decimals below 10, then as ms), int, kb (bytes -> KB), mb (bytes
                               -> MB), or a Python format spec (.1f)
    {{#if path}}..{{else}}..{{/if}}    on a truthy value
    {{#each path}}..{{/each}}  once per list item; {{ .field }} is the item's

A missing value is an error naming it: a report never shows a blank.

Usage: bench/report.py RESULTS.json [--template T] [--out FILE]
       bench/report.py --check RESULTS.json   (render, write nothing; the smoke
                                              check scripts/test.sh runs)
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "performance.md.in")

# Targets the issues set (not measurements): the report says whether this run
# met them.
TARGETS = {
    "hook_ms": 10,  # issue 7: from the BOUND call to the rules being installed
    "detect_ms": 2,
    "gce_live_ms": 2000,  # issue 35: a GCE metadata change routed (watch's long poll)  # issue 8: the `leasehook detect` process
    "boot_ms": 20,  # issue 8: both boot stages together
}


class RenderError(Exception):
    pass


# --------------------------------------------------------------------- values


def _by(items, key):
    """A list of objects as a dict keyed by their `key`, with '-' made '_'."""
    return {str(i[key]).replace("-", "_"): i for i in items}


def _root_key(path):
    """'/dev/shm' -> 'shm', '/tmp' -> 'tmp', other folders by their last name."""
    return os.path.basename(str(path).rstrip("/")) or "root"


def _requests_text(r):
    return str(r["min"]) if r["min"] == r["max"] else "%d–%d" % (r["min"], r["max"])


def _with_requests_text(step, parts):
    """The `parts` of a step's numbers, each with its requests written out."""
    return {k: dict(step[k], requests_text=_requests_text(step[k]["requests"])) for k in parts}


def _ratio(a, b):
    if not b:
        raise RenderError("ratio with a zero denominator (%r / %r)" % (a, b))
    return a / b


def derive(raw):
    """The named values the template uses, from the raw results of a run."""
    lines = {l["bench"]: l for l in raw["benches"]}
    missing = [b for b in raw.get("expected", []) if b not in lines]
    if missing:
        raise RenderError("the results lack the benchmarks: %s" % ", ".join(missing))
    v = {k: raw[k] for k in ("machine", "date", "commit", "runtime", "load", "binaries", "packages")}
    v["targets"] = dict(TARGETS)

    # Planner, and cloud-init's converter on the same metadata.
    p = dict(lines["plan"])
    p["metadata_bytes"] = p["instance"]["metadata_bytes"]
    c = lines["convert"]
    conv = {
        "version": c["version"],
        "import_ms": c["import_ms"],
        "ethernets": c["ethernets"],
        "policy_routes": c["policy_routes"],
        "policy_rules": c["policy_rules"],
    }
    for key in ("convert", "decode"):
        conv[key] = _summary_ms(c[key + "_ms"])
    conv["ratio_ci"] = _ratio(conv["convert"]["median_ms"] * 1e3, p["plan_cloud_init"]["median_us"])
    conv["ratio_ec2"] = _ratio(conv["convert"]["median_ms"] * 1e3, p["plan_ec2"]["median_us"])
    conv["ratio_decode"] = _ratio(conv["decode"]["median_ms"] * 1e3, p["parse"]["median_us"])
    v["plan"], v["convert"] = p, conv

    # Applier against ip -batch.
    a = dict(lines["apply"])
    a["ratio_wall"] = _ratio(a["apply_empty"]["wall"]["median_ms"], a["ip_batch"]["wall"]["median_ms"])
    a["ratio_cpu"] = _ratio(a["apply_empty"]["cpu"]["median_ms"], a["ip_batch"]["cpu"]["median_ms"])
    a["writes_wall_ms"] = a["apply_empty"]["wall"]["median_ms"] - a["apply_same"]["wall"]["median_ms"]
    a["writes_faster"] = a["writes_wall_ms"] < a["ip_batch"]["wall"]["median_ms"]
    # Runs before issue 32 recorded user + system only.
    a["has_user"] = "user" in a["apply_same"] and "user" in a["apply_empty"]
    # `leasehook flush` against `ip -batch` deleting (runs before it lack them).
    a["has_flush"] = "flush" in a and "ip_batch_del" in a
    if a["has_flush"]:
        a["flush_ratio_wall"] = _ratio(a["flush"]["wall"]["median_ms"], a["ip_batch_del"]["wall"]["median_ms"])
        a["flush_ratio_cpu"] = _ratio(a["flush"]["cpu"]["median_ms"], a["ip_batch_del"]["cpu"]["median_ms"])
    v["apply"] = a

    # One NIC event against IMDS.
    im = {"runs": {}}
    for run in lines["imds"]["runs"]:
        im["runs"][_root_key(run["root_dir"])] = _with_requests_text(run, ("cold", "warm"))
    im.update(im["runs"])
    ci = lines["imds-cloud-init"]
    im["cloud_init"] = dict(ci, requests_text=_requests_text(ci["requests"]))
    base = im["runs"].get("shm") or next(iter(im["runs"].values()))
    im["ratio_warm"] = _ratio(ci["crawl"]["median_ms"], base["warm"]["median_ms"])
    im["ratio_cold"] = _ratio(ci["crawl"]["median_ms"], base["cold"]["median_ms"])
    im["ratio_requests"] = _ratio(ci["requests"]["max"], base["cold"]["requests"]["max"])
    v["imds"] = im

    # One NIC event on the other clouds, in the parts each step measures (runs
    # before a cloud's step existed lack it): GCE (issue 21); Alibaba ECS;
    # Oracle Cloud, the primary's event and one refresh's question; OpenStack,
    # the metadata service and a config drive.
    for cloud, parts in (
        ("gce", ("event", "datasource")),
        ("aliyun", ("cold", "warm")),
        ("oracle", ("event", "refresh")),
        ("openstack", ("event", "datasource", "drive")),
    ):
        v["has_" + cloud] = cloud in lines
        if v["has_" + cloud]:
            v[cloud] = _with_requests_text(lines[cloud], parts)
    # Azure IMDS's NIC event (runs before the step existed lack it).
    v["has_azure"] = "azure" in lines
    if v["has_azure"]:
        v["azure"] = dict(lines["azure"], **_with_requests_text(lines["azure"], ("event",)))
    # GCE's metadata followed live by `leasehook watch` (issue 35; runs before
    # the step existed lack it).
    v["has_gcelive"] = "gcelive" in lines
    if v["has_gcelive"]:
        gl = dict(lines["gcelive"])
        gl["target_met"] = gl["added"]["p90_ms"] <= TARGETS["gce_live_ms"]
        v["gcelive"] = gl

    # The dhclient hook, and refresh.
    h = dict(lines["hook"])
    h["hook_only_ms"] = h["bound"]["median_ms"] - h["netns_exec"]["median_ms"]
    h["target_met"] = h["bound"]["median_ms"] <= TARGETS["hook_ms"]
    h["refresh"] = dict(h["refresh"], requests_text=_requests_text(h["refresh"]["requests"]))
    h["refresh"]["per_nic"] = h["refresh"]["requests"]["max"] / h["refresh"]["nics"]
    v["hook"] = h

    # Deciding the datasource.
    d = dict(lines["detect"])
    roots = _by(d["roots"], "root")
    for r in roots.values():
        r["ratio"] = _ratio(r["ds_identify"]["median_ms"], r["process"]["median_ms"])
        r["list_text"] = "[" + ", ".join(r["leasehook_list"]) + "]"
        r["target_met"] = r["process"]["median_ms"] <= TARGETS["detect_ms"]
    d.update(roots)
    d["target_met"] = all(r["target_met"] for r in roots.values())
    v["detect"] = d

    # The boot stages.
    b = {"rounds": lines["boot"]["rounds"], "bin_bytes": lines["boot"]["bin_bytes"]}
    worst = 0.0
    for run in lines["boot"]["roots"]:
        sc = _by(run["scenarios"], "scenario")
        for s in sc.values():
            s["requests_text"] = _requests_text(s["requests"])
            worst = max(worst, s["both"]["median_ms"])
        b[_root_key(run["root_dir"])] = sc
    bci = lines["boot"]["cloud_init"]
    if not bci:
        raise RenderError("the boot benchmark ran without cloud-init")
    b["cloud_init"] = dict(bci, requests_text=_requests_text(bci["requests"]))
    disk = b.get("tmp") or b[_root_key(lines["boot"]["roots"][0]["root_dir"])]
    b["ratio_in_process"] = _ratio(bci["in_process"]["median_ms"], disk["ec2_first"]["both"]["median_ms"])
    b["ratio_process"] = _ratio(bci["process"]["median_ms"], disk["ec2_first"]["both"]["median_ms"])
    b["worst_both_ms"] = worst
    b["target_met"] = worst <= TARGETS["boot_ms"]
    v["boot"] = b

    # How long the dhclient shim holds its client when IMDS misbehaves.
    h = dict(lines["hold"])
    rows = [dict(r) for r in h["scenarios"]]
    for r in rows:
        r["exit_text"] = ", ".join(str(c) for c in r["exit"])
        r["within"] = r["max_ms"] <= h["bound_ms"]
    worst = max(rows, key=lambda r: r["max_ms"])
    h["scenarios"] = rows
    h["worst_ms"] = worst["max_ms"]
    h["worst_what"] = worst["what"]
    h["within_bound"] = all(r["within"] for r in rows)
    h["margin_ms"] = h["bound_ms"] - worst["max_ms"]
    h["separate_run"] = h.get("separate_run") or False
    v["hold"] = h

    # `leasehook watch`: idle cost, the self-healing's repair latency, peak RSS.
    v["has_watch"] = "watch" in lines
    if v["has_watch"]:
        w = dict(lines["watch"])
        w["peak_rss_mb"] = w["peak_rss_kib"] / 1024
        w["rss_target_mb"] = w["rss_target_kib"] / 1024
        w["rss_met"] = w["peak_rss_kib"] <= w["rss_target_kib"]
        w["latency_met"] = w["latency"]["max_ms"] <= w["latency_target_ms"]
        w["idle_cpu_per_min_ms"] = w["idle_cpu_ms"] * 60 / w["idle_s"]
        w["idle_wakeups_per_s"] = w["idle_wakeups"] / w["idle_s"]
        w["separate_run"] = w.get("separate_run") or False
        v["watch"] = w

    # Another run of the same benchmarks (`bench/run --baseline`), before a change.
    v["baseline"] = False
    if raw.get("baseline"):
        v["baseline"] = compare(derive(raw["baseline"]), v)
    return v


# The numbers a change must not regress (issue 20: the hook event, apply, detect
# and init; issue 32: the planner's worst case, apply's user CPU), as (label,
# dotted path into derive()'s values, unit: "ms", "us" (shown in ms) or "ratio").
HEADLINE = [
    ("plan, `ec2-net-utils` (the worst case)", "plan.plan_ec2.median_us", "us"),
    ("plan, `cloud-init` (the worst case)", "plan.plan_cloud_init.median_us", "us"),
    ("hook, BOUND (rules installed at exit)", "hook.bound.median_ms", "ms"),
    ("hook, RENEW unchanged", "hook.renew.median_ms", "ms"),
    ("refresh, 4 NICs unchanged", "hook.refresh.median_ms", "ms"),
    ("apply from empty, wall", "apply.apply_empty.wall.median_ms", "ms"),
    ("apply from empty, CPU", "apply.apply_empty.cpu.median_ms", "ms"),
    ("apply unchanged, wall", "apply.apply_same.wall.median_ms", "ms"),
    ("apply unchanged, user CPU", "apply.apply_same.user.median_ms", "ms"),
    ("apply / ip -batch, wall", "apply.ratio_wall", "ratio"),
    ("apply / ip -batch, CPU", "apply.ratio_cpu", "ratio"),
    ("flush / ip -batch deleting, CPU", "apply.flush_ratio_cpu", "ratio"),
    ("detect process (debian-ec2)", "detect.debian_ec2.process.median_ms", "ms"),
    ("detect process (lxd-container)", "detect.lxd_container.process.median_ms", "ms"),
    ("`init --local` + `init`, EC2 first boot", "boot.tmp.ec2_first.both.median_ms", "ms"),
    ("`init --local` + `init`, EC2 reboot", "boot.tmp.ec2_reboot.both.median_ms", "ms"),
    ("one event against IMDS, warm (tmpfs)", "imds.shm.warm.median_ms", "ms"),
    ("watch, repair latency (rule deleted -> back)", "watch.latency.median_ms", "ms"),
]


def _get(values, path):
    for part in path.split("."):
        if not isinstance(values, dict) or part not in values:
            return None
        values = values[part]
    return values


def compare(before, after):
    """The headline numbers of two runs side by side, with after / before. A number
    the earlier run lacks (a benchmark it did not have yet) is left out."""
    rows = []
    for label, path, unit in HEADLINE:
        b, a = _get(before, path), _get(after, path)
        if b is None or a is None:
            continue
        if unit == "us":
            b, a, unit = b / 1000, a / 1000, "ms"
        rows.append({"label": label, "before": b, "after": a, "unit": unit,
                     "is_ms": unit == "ms", "change": _ratio(a, b)})
    if not rows:
        raise RenderError("the baseline run shares no headline number with this one")
    return {"commit": before["commit"], "date": before["date"], "load": before["load"],
            "rows": rows}


def _summary_ms(samples):
    """Median and p90 (the sample at (n - 1) * p / 100, as the benches pick it)."""
    xs = sorted(samples)
    if not xs:
        raise RenderError("no samples")
    pick = lambda p: xs[(len(xs) - 1) * p // 100]
    return {"n": len(xs), "median_ms": pick(50), "p90_ms": pick(90), "max_ms": xs[-1]}


# ------------------------------------------------------------------- template


def _sig(x):
    """Three significant digits, never in exponent form."""
    x = float(x)
    a = abs(x)
    if a >= 100:
        return "%.0f" % x
    if a >= 10:
        return "%.1f" % x
    if a >= 1:
        return "%.2f" % x
    return "%.3f" % x


FILTERS = {
    "ms": _sig,
    "us": _sig,
    "ratio": lambda x: "%.2f" % float(x) if abs(float(x)) < 10 else _sig(x),
    "int": lambda x: "%d" % round(float(x)),
    "kb": lambda x: "%.0f" % (float(x) / 1024),
    "mb": lambda x: "%.1f" % (float(x) / (1024 * 1024)),
}


def _lookup(path, scopes):
    path = path.strip()
    if path.startswith("."):
        node, parts = scopes[-1], [p for p in path[1:].split(".") if p]
    else:
        node, parts = scopes[0], path.split(".")
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise RenderError("no value for {{%s}}" % path)
    return node


def _format(expr, scopes):
    path, _, fmt = expr.partition("|")
    value = _lookup(path, scopes)
    fmt = fmt.strip()
    if value is None:
        raise RenderError("{{%s}} is null" % path.strip())
    if not fmt:
        return str(value)
    if fmt in FILTERS:
        return FILTERS[fmt](value)
    try:
        return format(value, fmt)
    except (ValueError, TypeError) as e:
        raise RenderError("{{%s}}: %s" % (expr.strip(), e)) from e


TOKEN = re.compile(r"\{\{\s*(#if|#each|else|/if|/each)?\s*([^}]*?)\s*\}\}")


def _parse(text):
    """The template as a tree: str, ("var", expr), ("if", path, yes, no), ("each", path, body)."""
    pos, stack = 0, [("root", [])]
    for m in TOKEN.finditer(text):
        stack[-1][-1].append(text[pos : m.start()])
        pos = m.end()
        tag, arg = m.group(1), m.group(2)
        if tag is None:
            stack[-1][-1].append(("var", arg))
        elif tag in ("#if", "#each"):
            stack.append((tag, arg, []))
        elif tag == "else":
            if stack[-1][0] != "#if":
                raise RenderError("{{else}} outside {{#if}}")
            kind, path, yes = stack.pop()
            stack.append(("#else", path, yes, []))
        elif tag == "/if":
            if stack[-1][0] not in ("#if", "#else"):
                raise RenderError("unbalanced {{/if}}")
            top = stack.pop()
            yes, no = (top[2], []) if top[0] == "#if" else (top[2], top[3])
            stack[-1][-1].append(("if", top[1], yes, no))
        elif tag == "/each":
            if stack[-1][0] != "#each":
                raise RenderError("unbalanced {{/each}}")
            _, path, body = stack.pop()
            stack[-1][-1].append(("each", path, body))
    stack[-1][-1].append(text[pos:])
    if len(stack) != 1:
        raise RenderError("unclosed {{%s %s}}" % (stack[-1][0], stack[-1][1]))
    return stack[0][1]


def _emit(nodes, scopes, out):
    for n in nodes:
        if isinstance(n, str):
            out.append(n)
        elif n[0] == "var":
            out.append(_format(n[1], scopes))
        elif n[0] == "if":
            _emit(n[2] if _lookup(n[1], scopes) else n[3], scopes, out)
        elif n[0] == "each":
            items = _lookup(n[1], scopes)
            if not isinstance(items, list):
                raise RenderError("{{#each %s}} is not a list" % n[1])
            for item in items:
                _emit(n[2], scopes + [item], out)


def render(template, values):
    out = []
    _emit(_parse(template), [values], out)
    return "".join(out)


def report(raw, template):
    return render(template, derive(raw))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--template", default=TEMPLATE)
    ap.add_argument("--out", help="write here (default: standard output)")
    ap.add_argument("--check", action="store_true", help="render only; print a one-line verdict")
    a = ap.parse_args(argv)
    with open(a.results, encoding="utf-8") as f:
        raw = json.load(f)
    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    try:
        text = report(raw, template)
    except (RenderError, KeyError, TypeError) as e:
        sys.exit("bench/report.py: %s: %s: %s" % (a.results, type(e).__name__, e))
    if a.check:
        if "{{" in text or "}}" in text:
            sys.exit("bench/report.py: unrendered template markup left in the report")
        print("bench/report.py: %s renders (%d lines)" % (a.results, text.count("\n")))
    elif a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, a.out)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
