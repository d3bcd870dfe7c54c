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

import sys

import ci_ec2_rounds


def check(crawled, _run_dir):
    if not crawled["meta-data"]["network"]["interfaces"]["macs"]:
        return "the crawl found no NICs"
    return None


if __name__ == "__main__":
    ci_ec2_rounds.main(
        sys.argv[1:], "cloud-init-imds-crawl", __doc__, lambda ds: ds.crawl_metadata(), check
    )
