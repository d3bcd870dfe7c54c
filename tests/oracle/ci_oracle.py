#!/usr/bin/python3
"""ci_oracle.py -- run cloud-init's EC2 IMDS -> network-config v2 converter
(cloudinit.sources.DataSourceEc2.convert_ec2_metadata_network_config) on a
batch of cases and print the results as one JSON object. Used as a
differential-test oracle for the Rust converter.

Setup (once): scripts/fetch-cloud-init-oracle.sh
Run (system python, NOT the pyenv one on PATH):

    PYTHONPATH=target/oracle/cloud-init-25.1.4/root/usr/lib/python3/dist-packages \
        /usr/bin/python3 tests/oracle/ci_oracle.py CASES.json   (or - for stdin)

CASES.json is a JSON array of cases:

    {"id": <int>,
     "metadata": <IMDS meta-data tree, e.g.
                  {"mac": "...", "network": {"interfaces": {"macs":
                      {MAC: {leaf: "value" | "v1\\nv2" | ["v1", "v2"]}}}}}>,
     "macs_to_nics": {MAC: IFNAME},          # the OS view of the NICs
     "gateways": {IFNAME: "IPv4 router"}}    # optional; stubbed DHCP leases

Per case:
* every string leaf is decoded with cloud-init's own crawler decoder
  (cloudinit.sources.helpers.ec2.MetadataLeafDecoder): "" stays "", a
  "{...}" string becomes a JSON object if it parses, a string containing "\\n"
  becomes the list of its lines (str.splitlines), other strings stay as they
  are; lists (and non-string scalars) are passed through unchanged;
* like DataSourceEc2.network_config, metadata["network"] must be a dict;
* the converter is called with a stub distro whose network_renderer is a real
  cloudinit.net.netplan.Renderer() (so policy routing is emitted) and whose
  dhcp_client.dhcp_discovery(nic) returns {"routers": gateways[nic]} or raises
  NoDHCPLeaseError when gateways has no (or a null) entry for nic;
  fallback_nic = ifname of the first MAC of macs_to_nics in sorted order,
  full_network_config=True. The OS NIC list (used by cloud-init when
  macs_to_nics is empty) is stubbed to macs_to_nics, never the host's NICs.

Output (stdout, exactly one JSON object, keys sorted):

    {"version": "25.1.4",
     "results": {"<id>": <returned config's "ethernets" dict>
                         | {"error": "<ExceptionType>: <message>"}}}

With --dhcp-calls an extra top-level key "dhcp_calls": {"<id>": [nic, ...]}
lists the dhcp_discovery() calls made per case.

cloud-init's log output goes to stderr only (level: --log-level, default
WARNING; OFF silences it). Anything else written to fd 1 while converting
is redirected to stderr, so stdout carries only the JSON.
"""

import argparse
import json
import logging
import os
import sys


def _parse_args(argv):
    p = argparse.ArgumentParser(
        description="cloud-init EC2 network-config converter oracle"
    )
    p.add_argument("cases", help="JSON file with an array of cases, or -")
    p.add_argument(
        "--log-level",
        default="WARNING",
        help="cloud-init log level on stderr (DEBUG, INFO, WARNING, ERROR, OFF)",
    )
    p.add_argument(
        "--dhcp-calls",
        action="store_true",
        help='add "dhcp_calls": {id: [nic, ...]} to the output',
    )
    return p.parse_args(argv)


def _setup_logging(level_name):
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    if level_name.upper() == "OFF":
        root.addHandler(logging.NullHandler())
        root.setLevel(logging.CRITICAL + 1)
        logging.disable(logging.CRITICAL)
        return
    level = getattr(logging, level_name.upper(), None)
    if not isinstance(level, int):
        sys.exit("ci_oracle: bad --log-level %r" % level_name)
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(h)
    root.setLevel(level)


def _protect_stdout():
    """Point fd 1 (and sys.stdout) at stderr; return a file for the real stdout."""
    sys.stdout.flush()
    real = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return real


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    out = _protect_stdout()
    _setup_logging(args.log_level)

    # cloud-init imports come after stdout/logging are set up.
    try:
        import cloudinit
        import cloudinit.version
        from cloudinit.net import netplan
        from cloudinit.net.dhcp import NoDHCPLeaseError
        from cloudinit.sources import DataSourceEc2 as ec2
        from cloudinit.sources.helpers.ec2 import MetadataLeafDecoder
    except ImportError as e:
        sys.exit(
            "ci_oracle: cannot import cloud-init (%s). Run "
            "scripts/fetch-cloud-init-oracle.sh and set PYTHONPATH=target/oracle/"
            "cloud-init-25.1.4/root/usr/lib/python3/dist-packages" % e
        )

    if args.log_level.upper() != "OFF":
        print(
            "ci_oracle: cloud-init %s from %s"
            % (
                cloudinit.version.version_string(),
                os.path.dirname(cloudinit.__file__),
            ),
            file=sys.stderr,
        )

    decoder = MetadataLeafDecoder()

    def decode(field, node):
        if isinstance(node, dict):
            return {k: decode(k, v) for k, v in node.items()}
        if isinstance(node, str):
            # The crawler hands the decoder the raw HTTP body (bytes).
            return decoder(field, node.encode("utf-8"))
        return node  # lists stay lists; other JSON scalars pass through

    class StubDhcp:
        def __init__(self):
            self.gateways = {}
            self.calls = []

        def dhcp_discovery(self, nic, distro=None, *args, **kwargs):
            self.calls.append(nic)
            gw = self.gateways.get(nic)
            if gw is None:
                raise NoDHCPLeaseError("stub: no DHCP lease for %s" % nic)
            return {"routers": gw}

    class StubDistro:
        def __init__(self):
            self.network_renderer = netplan.Renderer()
            self.dhcp_client = StubDhcp()
            self.fallback_interface = None

    distro = StubDistro()
    os_nics = {}
    # Used by the converter only when macs_to_nics is empty: never look at
    # the host's interfaces, the case's NIC map is the whole "OS".
    ec2.net.get_interfaces_by_mac = lambda *a, **kw: dict(os_nics)

    try:
        if args.cases == "-":
            cases = json.load(sys.stdin)
        else:
            with open(args.cases, encoding="utf-8") as f:
                cases = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("ci_oracle: cannot read cases from %s: %s" % (args.cases, e))
    if not isinstance(cases, list):
        sys.exit("ci_oracle: %s: expected a JSON array of cases" % args.cases)

    results = {}
    dhcp_calls = {}
    for n, case in enumerate(cases):
        cid = "#%d" % n  # position, for cases without an id
        if isinstance(case, dict) and "id" in case:
            cid = str(case["id"])
        if cid in results:
            print("ci_oracle: duplicate case id %s (last wins)" % cid, file=sys.stderr)
        distro.dhcp_client.calls = []
        try:
            if not isinstance(case, dict):
                raise TypeError("case is not an object")
            md = decode(None, case.get("metadata") or {})
            macs_to_nics = dict(case.get("macs_to_nics") or {})
            distro.dhcp_client.gateways = dict(case.get("gateways") or {})
            os_nics.clear()
            os_nics.update(macs_to_nics)
            net_md = md.get("network") if isinstance(md, dict) else None
            if not isinstance(net_md, dict):
                # DataSourceEc2.network_config: warns and returns None.
                raise ValueError("Metadata 'network' key not valid: %r" % (net_md,))
            fallback = macs_to_nics[min(macs_to_nics)] if macs_to_nics else None
            cfg = ec2.convert_ec2_metadata_network_config(
                net_md,
                distro=distro,
                macs_to_nics=macs_to_nics,
                fallback_nic=fallback,
                full_network_config=True,
            )
            # Round-trip so shared sub-dicts (dhcp4/dhcp6-overrides are the
            # same object in cloud-init) become independent values.
            results[cid] = json.loads(json.dumps(cfg["ethernets"]))
        except Exception as e:  # noqa: BLE001 -- report, don't abort the batch
            results[cid] = {"error": "%s: %s" % (type(e).__name__, e)}
        dhcp_calls[cid] = list(distro.dhcp_client.calls)

    doc = {"version": cloudinit.version.version_string(), "results": results}
    if args.dhcp_calls:
        doc["dhcp_calls"] = dhcp_calls
    json.dump(doc, out, sort_keys=True)
    out.write("\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
