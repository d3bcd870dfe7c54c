#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs cloud-init's own `query` subcommand (cloudinit.cmd.query.handle_args,
the function `cloud-init query` calls) on an instance-data file, as the
`leasehook query` comparison's oracle.

Usage: PYTHONPATH=<cloud-init dist-packages> ci_query.py INSTANCE_DATA [ARGS...]
ARGS are `cloud-init query`'s own (KEY, --all, --list-keys, --format). Prints
what cloud-init prints and exits with its status; its LOG.error lines go to
stderr as `cloud-init query` shows them (the message only).
"""

import logging
import sys

from cloudinit.cmd import query


def main() -> int:
    logging.basicConfig(stream=sys.stderr, format="%(message)s", level=logging.ERROR)
    data, args = sys.argv[1], sys.argv[2:]
    parsed = query.get_parser().parse_args(["--instance-data", data, *args])
    return query.handle_args("query", parsed)


if __name__ == "__main__":
    sys.exit(main())
