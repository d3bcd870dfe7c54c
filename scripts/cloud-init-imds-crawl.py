#!/usr/bin/python3
"""cloud-init-imds-crawl.py -- time cloud-init's own EC2 IMDS crawl against an
IMDS emulator and count the requests it makes, for scripts/bench-imds.sh.

The crawl is DataSourceEc2.crawl_metadata(), which cloud-init runs on every
hotplug event (update_metadata_if_supported -> _get_data): the IMDSv2 token,
the API version probe, user-data, the whole meta-data tree and the instance
identity document. The datasource is told it runs on AWS (so it uses IMDSv2
as on EC2) and is pointed at the emulator; nothing else is stubbed.

Usage (the system python; cloud-init from scripts/fetch-cloud-init-oracle.sh):

    PYTHONPATH=<dist-packages> /usr/bin/python3 -s scripts/cloud-init-imds-crawl.py \\
        --url http://127.0.0.1:PORT --log REQUESTS.LOG [--rounds N]

REQUESTS.LOG is the emulator's --log file (one line per request). Prints one
JSON object: {"version", "import_ms", "requests": [...], "wall_ms": [...]}.
Only loopback URLs are accepted.
"""

import argparse
import ipaddress
import json
import logging
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
        sys.exit("cloud-init-imds-crawl: only loopback URLs, got %r" % args.url)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    started = time.perf_counter()
    from cloudinit import helpers, version
    from cloudinit.sources import DataSourceEc2

    import_ms = (time.perf_counter() - started) * 1e3

    tmp = tempfile.mkdtemp(prefix="ci-crawl.")
    paths = helpers.Paths({"cloud_dir": tmp, "run_dir": tmp})
    sys_cfg = {
        "datasource": {
            "Ec2": {"metadata_urls": [args.url], "max_wait": 10, "timeout": 5}
        }
    }
    requests, wall_ms = [], []
    for _ in range(args.rounds):
        ds = DataSourceEc2.DataSourceEc2(sys_cfg, distro=None, paths=paths)
        ds._cloud_name = "aws"  # as identify_platform() finds on EC2
        before = count_lines(args.log)
        t0 = time.perf_counter()
        crawled = ds.crawl_metadata()
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        requests.append(count_lines(args.log) - before)
        macs = crawled["meta-data"]["network"]["interfaces"]["macs"]
        if not macs:
            sys.exit("cloud-init-imds-crawl: the crawl found no NICs")
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
