#!/usr/bin/python3
"""cloud-init-ec2-get-data.py -- time cloud-init's own EC2 datasource get_data()
against an IMDS emulator and count its requests, for tests/benches/boot.rs
(scripts/bench-boot.sh).

get_data() is what cloud-init's boot stages run to find and read the EC2
datasource: the IMDSv2 token, the API version probe, the crawl of user-data,
the whole meta-data tree and the identity document, then persist_instance_data
(instance-data.json and instance-data-sensitive.json under a temporary run
folder). The datasource is told it runs on AWS (as identify_platform() finds
on EC2) and is pointed at the emulator; nothing else is stubbed.

Usage (the system python; cloud-init from scripts/fetch-cloud-init-oracle.sh):

    PYTHONPATH=<dist-packages> /usr/bin/python3 -s scripts/cloud-init-ec2-get-data.py \\
        --url http://127.0.0.1:PORT --log REQUESTS.LOG [--rounds N]

REQUESTS.LOG is the emulator's --log file. Prints one JSON object:
{"version", "import_ms", "requests": [...], "wall_ms": [...]}. Only loopback
URLs are accepted.
"""

import argparse
import ipaddress
import json
import logging
import os
import sys
import tempfile
import time
import urllib.parse


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)
    host = urllib.parse.urlsplit(args.url).hostname or ""
    if not ipaddress.ip_address(host).is_loopback:
        sys.exit("cloud-init-ec2-get-data: only loopback URLs, got %r" % args.url)

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
        tmp = tempfile.mkdtemp(prefix="ci-get-data.")
        paths = helpers.Paths(
            {"cloud_dir": os.path.join(tmp, "cloud"), "run_dir": os.path.join(tmp, "run")}
        )
        ds = DataSourceEc2.DataSourceEc2(sys_cfg, distro=None, paths=paths)
        ds._cloud_name = "aws"  # as identify_platform() finds on EC2
        before = count_lines(args.log)
        t0 = time.perf_counter()
        ok = ds.get_data()
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        requests.append(count_lines(args.log) - before)
        if not ok:
            sys.exit("cloud-init-ec2-get-data: get_data() found no datasource")
        if not os.path.exists(os.path.join(tmp, "run", "instance-data.json")):
            sys.exit("cloud-init-ec2-get-data: no instance-data.json written")
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


if __name__ == "__main__":
    main(sys.argv[1:])
