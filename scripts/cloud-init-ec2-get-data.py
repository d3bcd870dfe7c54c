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

import os
import sys

import ci_ec2_rounds


def check(found, run_dir):
    if not found:
        return "get_data() found no datasource"
    if not os.path.exists(os.path.join(run_dir, "instance-data.json")):
        return "no instance-data.json written"
    return None


if __name__ == "__main__":
    ci_ec2_rounds.main(
        sys.argv[1:], "cloud-init-ec2-get-data", __doc__, lambda ds: ds.get_data(), check
    )
