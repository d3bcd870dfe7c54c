"""ci_ec2_rounds.py -- what cloud-init-imds-crawl.py and cloud-init-ec2-get-data.py
share (imported by them, not run): time one call of cloud-init's own EC2
datasource, round after round, against an IMDS emulator on loopback, and count
the requests each round makes.

Each round gets a fresh DataSourceEc2 with its own cloud and run folders (a
temporary folder, removed after the round), told it runs on AWS (as
identify_platform() finds on EC2, so it uses IMDSv2) and pointed at the
emulator; nothing else is stubbed. The command line is --url URL (loopback only),
--log REQUESTS.LOG (the emulator's --log file, one line per request) and
--rounds N. Prints one JSON object: {"version", "import_ms", "requests": [...],
"wall_ms": [...]}.
"""

import argparse
import ipaddress
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import urllib.parse


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main(argv, name, doc, call, check):
    """Runs the script `name` (its `doc` the --help) for the command line `argv`:
    `call(ds)` is the datasource call timed each round; `check(result, run_dir)`
    says what is wrong with its result (None: nothing), which ends the run."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)
    host = urllib.parse.urlsplit(args.url).hostname or ""
    if not ipaddress.ip_address(host).is_loopback:
        sys.exit("%s: only loopback URLs, got %r" % (name, args.url))

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    started = time.perf_counter()
    from cloudinit import helpers, version
    from cloudinit.sources import DataSourceEc2

    import_ms = (time.perf_counter() - started) * 1e3

    sys_cfg = {
        "datasource": {
            "Ec2": {"metadata_urls": [args.url], "max_wait": 10, "timeout": 5}
        }
    }
    requests, wall_ms = [], []
    for _ in range(args.rounds):
        tmp = tempfile.mkdtemp(prefix="%s." % name)
        run_dir = os.path.join(tmp, "run")
        paths = helpers.Paths({"cloud_dir": os.path.join(tmp, "cloud"), "run_dir": run_dir})
        ds = DataSourceEc2.DataSourceEc2(sys_cfg, distro=None, paths=paths)
        ds._cloud_name = "aws"  # as identify_platform() finds on EC2
        before = count_lines(args.log)
        t0 = time.perf_counter()
        result = call(ds)
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        requests.append(count_lines(args.log) - before)
        wrong = check(result, run_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        if wrong:
            sys.exit("%s: %s" % (name, wrong))
    json.dump(
        {
            "version": version.version_string(),
            "import_ms": import_ms,
            "requests": requests,
            "wall_ms": wall_ms,
        },
        sys.stdout,
    )
    print()
