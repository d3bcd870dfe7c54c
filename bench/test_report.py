# SPDX-License-Identifier: Apache-2.0
"""Tests of bench/report.py (the template engine and the report of a recorded
run). Run: python3 -m unittest discover -s bench -p 'test_*.py' (scripts/test.sh
does). Measures nothing."""

import copy
import json
import os
import unittest

import report

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED = os.path.join(HERE, "testdata", "results.json")


class Engine(unittest.TestCase):
    def test_values_and_filters(self):
        v = {"a": {"b": 1234.5678, "c": 0.01234, "d": 12.345}, "n": 3, "s": "x"}
        out = report.render("{{a.b|ms}} {{ a.c | us }} {{a.d|ms}} {{n}} {{s}} {{a.d|.1f}}", v)
        self.assertEqual(out, "1235 0.012 12.3 3 x 12.3")
        self.assertEqual(report.render("{{x|kb}} {{x|mb}} {{r|ratio}} {{r|int}}",
                                       {"x": 3 * 1024 * 1024, "r": 2.5}), "3072 3.0 2.50 2")

    def test_if_else_and_each(self):
        t = "{{#if ok}}yes{{else}}no{{/if}}:{{#each xs}}[{{.k}}{{#if .f}}!{{/if}}]{{/each}}"
        v = {"ok": False, "xs": [{"k": 1, "f": True}, {"k": 2, "f": False}]}
        self.assertEqual(report.render(t, v), "no:[1!][2]")
        self.assertEqual(report.render("{{#if xs}}some{{/if}}", {"xs": []}), "")

    def test_a_missing_value_is_an_error_naming_it(self):
        with self.assertRaisesRegex(report.RenderError, r"no value for \{\{a\.zz\}\}"):
            report.render("{{a.zz}}", {"a": {}})
        with self.assertRaisesRegex(report.RenderError, "null"):
            report.render("{{a}}", {"a": None})

    def test_unbalanced_blocks_are_errors(self):
        for t in ("{{#if a}}x", "{{/if}}", "{{#each a}}{{/if}}", "{{else}}"):
            with self.assertRaises(report.RenderError, msg=t):
                report.render(t, {"a": 1})

    def test_significant_digits_never_use_exponents(self):
        self.assertEqual([report.FILTERS["ms"](x) for x in (123456.7, 99.94, 1.005, 0.0004)],
                         ["123457", "99.9", "1.00", "0.000"])


class RecordedRun(unittest.TestCase):
    """The template against the results of a real run (bench/testdata/results.json)."""

    def setUp(self):
        with open(RECORDED, encoding="utf-8") as f:
            self.raw = json.load(f)
        with open(report.TEMPLATE, encoding="utf-8") as f:
            self.template = f.read()

    def test_renders_every_section_without_markup_left(self):
        text = report.report(self.raw, self.template)
        self.assertNotIn("{{", text)
        self.assertNotIn("}}", text)
        for heading in ("## Planner", "## Applier", "## One NIC event", "## The dhclient hook",
                        "## Refresh", "## The watcher", "## Deciding the datasource", "## The boot stages",
                        "## Package"):
            self.assertIn(heading, text)
        self.assertIn(self.raw["machine"]["kernel"], text)

    def test_ratios_are_computed_from_the_same_run(self):
        v = report.derive(self.raw)
        lines = {b["bench"]: b for b in self.raw["benches"]}
        a = lines["apply"]
        self.assertAlmostEqual(v["apply"]["ratio_wall"],
                               a["apply_empty"]["wall"]["median_ms"] / a["ip_batch"]["wall"]["median_ms"])
        conv = sorted(lines["convert"]["convert_ms"])
        self.assertAlmostEqual(v["convert"]["ratio_ci"],
                               conv[(len(conv) - 1) // 2] * 1e3 / lines["plan"]["plan_cloud_init"]["median_us"])

    def test_watch_section_says_whether_the_targets_were_met_and_is_left_out_without_it(self):
        text = report.report(self.raw, self.template)
        self.assertIn("≤ 8 MiB (met)", text)
        self.assertIn("≤ 1000 ms (met)", text)
        raw = copy.deepcopy(self.raw)
        w = next(b for b in raw["benches"] if b["bench"] == "watch")
        w["peak_rss_kib"] = 9000
        w["latency"]["max_ms"] = 1500
        text = report.report(raw, self.template)
        self.assertIn("≤ 8 MiB **(over)**", text)
        self.assertIn("≤ 1000 ms **(over)**", text)
        raw["benches"] = [b for b in raw["benches"] if b["bench"] != "watch"]
        raw["expected"] = [e for e in raw["expected"] if e != "watch"]
        self.assertNotIn("## The watcher", report.report(raw, self.template))

    def test_package_section_with_and_without_debs(self):
        raw = copy.deepcopy(self.raw)
        raw["packages"] = []
        self.assertIn("make deb", report.report(raw, self.template))
        raw["packages"] = [{"file": "leasehook_0.1.0_amd64.deb", "package": "leasehook",
                            "version": "0.1.0", "arch": "amd64", "bytes": 2048 * 1024,
                            "installed_kib": 5000, "files": 12}]
        text = report.report(raw, self.template)
        self.assertIn("| `leasehook_0.1.0_amd64.deb` | leasehook | 0.1.0 | amd64 | 2048 KB | 5000 KiB | 12 |", text)
        self.assertNotIn("make deb", text)

    def test_a_missing_benchmark_is_named(self):
        raw = copy.deepcopy(self.raw)
        raw["benches"] = [b for b in raw["benches"] if b["bench"] != "hook"]
        with self.assertRaisesRegex(report.RenderError, "hook"):
            report.report(raw, self.template)

    def test_a_baseline_run_is_shown_beside_this_one(self):
        self.assertNotIn("## Before and after", report.report(self.raw, self.template))
        before = copy.deepcopy(self.raw)
        before["commit"] = "0000000"
        hook = next(b for b in before["benches"] if b["bench"] == "hook")
        hook["bound"]["median_ms"] *= 2
        raw = copy.deepcopy(self.raw)
        raw["baseline"] = before
        rows = {r["label"]: r for r in report.derive(raw)["baseline"]["rows"]}
        bound = rows["hook, BOUND (rules installed at exit)"]
        self.assertAlmostEqual(bound["change"], 0.5)
        # The recorded run predates `leasehook flush`'s benchmark: no such row.
        self.assertNotIn("flush / ip -batch deleting, CPU", rows)
        # The planner's worst case, in ms beside the others.
        plan = rows["plan, `ec2-net-utils` (the worst case)"]
        self.assertEqual(plan["unit"], "ms")
        self.assertAlmostEqual(plan["after"] * 1000, report.derive(self.raw)["plan"]["plan_ec2"]["median_us"])
        text = report.report(raw, self.template)
        self.assertIn("| | 0000000 | %s | after / before |" % self.raw["commit"], text)
        self.assertIn("| hook, BOUND (rules installed at exit) | ", text)
        self.assertIn(" | 0.50 |", text)


if __name__ == "__main__":
    unittest.main()
