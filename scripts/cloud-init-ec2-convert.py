#!/usr/bin/python3
"""cloud-init-ec2-convert.py -- time cloud-init's own EC2 network-config
conversion (DataSourceEc2.convert_ec2_metadata_network_config) on the
planner benchmark's instance, for bench/run.

The case file is what `cargo bench -p leasehook-core --bench plan` writes when
LEASEHOOK_BENCH_CASE names a file (the format of tests/oracle/ci_oracle.py):
the same metadata tree leasehook plans, the OS view of the NICs and each
NIC's DHCPv4 router. As in ci_oracle.py, the leaves are first decoded with
cloud-init's crawler decoder (timed apart: the crawl does it, not the
conversion), the distro's renderer is a real netplan.Renderer (so the policy
routing of secondary NICs is built) and its DHCP client is a stub that answers
with the case's router at once. Then convert_ec2_metadata_network_config(...,
full_network_config=True) runs ROUNDS times on a fresh copy of the decoded
tree (the copy is not timed).

Usage (the system python; cloud-init from scripts/fetch-cloud-init-oracle.sh):

    PYTHONPATH=<dist-packages> /usr/bin/python3 -s scripts/cloud-init-ec2-convert.py \\
        --case CASE.json [--rounds N]

Prints one JSON object (one summary line instead when LEASEHOOK_BENCH_JSON is set):
{"version", "import_ms", "decode_ms": [...],
"convert_ms": [...], "ethernets": <number of NICs in the result>,
"policy_routes": <routes with a table>, "policy_rules": <routing-policy entries>},
and appends it (with "bench": "convert") to the file LEASEHOOK_BENCH_JSON names,
when set (for bench/run).
"""

import argparse
import copy
import json
import logging
import os
import sys
import time


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--rounds", type=int, default=31)
    args = ap.parse_args(argv)
    with open(args.case, encoding="utf-8") as f:
        cases = json.load(f)
    case = cases[0] if isinstance(cases, list) else cases

    # ERROR: the instance's IPv6 subnets are under `subnet-ipv6-cidr-blocks`, the
    # key IMDS serves; cloud-init 25.1.4 looks for the singular and warns once
    # per NIC and round (then uses /128, as it does on EC2).
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    started = time.perf_counter()
    from cloudinit import version
    from cloudinit.net import netplan
    from cloudinit.net.dhcp import NoDHCPLeaseError
    from cloudinit.sources import DataSourceEc2 as ec2
    from cloudinit.sources.helpers.ec2 import MetadataLeafDecoder

    import_ms = (time.perf_counter() - started) * 1e3

    decoder = MetadataLeafDecoder()

    def decode(field, node):
        if isinstance(node, dict):
            return {k: decode(k, v) for k, v in node.items()}
        if isinstance(node, str):
            # The crawler hands the decoder the raw HTTP body (bytes).
            return decoder(field, node.encode("utf-8"))
        return node

    gateways = dict(case.get("gateways") or {})
    macs_to_nics = dict(case["macs_to_nics"])

    class StubDhcp:
        def dhcp_discovery(self, nic, distro=None, *a, **kw):
            gw = gateways.get(nic)
            if gw is None:
                raise NoDHCPLeaseError("stub: no DHCP lease for %s" % nic)
            return {"routers": gw}

    class StubDistro:
        def __init__(self):
            self.network_renderer = netplan.Renderer()
            self.dhcp_client = StubDhcp()
            self.fallback_interface = None

    # Never look at the host's interfaces: the case's NIC map is the whole "OS".
    ec2.net.get_interfaces_by_mac = lambda *a, **kw: dict(macs_to_nics)
    distro = StubDistro()
    fallback = macs_to_nics[min(macs_to_nics)]

    decode_ms, convert_ms = [], []
    cfg = None
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        md = decode(None, case["metadata"])
        decode_ms.append((time.perf_counter() - t0) * 1e3)
        net_md = copy.deepcopy(md["network"])
        t0 = time.perf_counter()
        cfg = ec2.convert_ec2_metadata_network_config(
            net_md,
            distro=distro,
            macs_to_nics=macs_to_nics,
            fallback_nic=fallback,
            full_network_config=True,
        )
        convert_ms.append((time.perf_counter() - t0) * 1e3)
    eths = (cfg or {}).get("ethernets", {})
    routes = sum(
        1 for e in eths.values() for r in e.get("routes", []) if "table" in r
    )
    rules = sum(len(e.get("routing-policy", [])) for e in eths.values())
    if len(eths) != len(macs_to_nics):
        sys.exit(
            "cloud-init-ec2-convert: %d NICs converted, %d expected"
            % (len(eths), len(macs_to_nics))
        )
    result = {
        "version": version.version_string(),
        "import_ms": import_ms,
        "decode_ms": decode_ms,
        "convert_ms": convert_ms,
        "ethernets": len(eths),
        "policy_routes": routes,
        "policy_rules": rules,
    }
    out = os.environ.get("LEASEHOOK_BENCH_JSON")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(result, bench="convert")) + "\n")
        conv = sorted(convert_ms)
        print(
            "cloud-init %s convert_ec2_metadata_network_config: %d NICs, %d rules, "
            "%d table routes; median %.3f ms, p90 %.3f ms (n=%d); import %.1f ms"
            % (result["version"], len(eths), rules, routes, conv[(len(conv) - 1) // 2],
               conv[(len(conv) - 1) * 9 // 10], len(conv), import_ms)
        )
    else:
        json.dump(result, sys.stdout)
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
