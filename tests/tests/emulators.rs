// SPDX-License-Identifier: Apache-2.0
//! The metadata emulators answer the peers' own requests as the services do
//! (issue 31, item 5): each test replays, byte for byte in method, path, query
//! and headers, the requests NetworkManager's nm-cloud-setup
//! (`src/nm-cloud-setup/nmcs-provider-{ec2,gcp,azure,aliyun,oci}.c`), SUSE's
//! cloud-netconfig (`{ec2,azure,gce}/functions.cloud-netconfig`) and cloud-init
//! (`cloudinit/sources/DataSource*.py`) send, against the in-process emulator on
//! loopback, and checks the answers those clients rely on (status, body shape,
//! content). An emulator stricter or looser than the service hides the bugs that
//! matter (issue 31's item 1 was one).
//!
//! | test | emulator | what the peers rely on |
//! |---|---|---|
//! | [`ec2_answers_the_peers`] | EC2 | cloud-netconfig's `HEAD` before each `GET` (200 without a body, 404 for a NIC not listed yet), the dated version both peers ask (`/2018-09-24/`), `macs/` entries with a trailing `/`, newline lists, cloud-init's version probe and `/` listing, 401 without a token where IMDSv2 is required, the `X-Forwarded-For` token refusal, 405, the HTML 404 |
//! | [`aliyun_answers_the_peers`] | Alibaba ECS | nm-cloud-setup's `/2016-01-01/` paths and five per-NIC keys (normal mode), 401 for the same in hardened mode, cloud-init's token dance |
//! | [`gce_answers_the_peers`] | GCE | the listings (`0/`, `1/`), leaves, `ip-aliases/`, empty `forwarded-ips/`, cloud-init's `?recursive=True`, the header rules, the root without the header, `HEAD`, 405, the 404 page with `Metadata-Flavor` |
//! | [`azure_answers_the_peers`] | Azure | `format=text` folder listings (`0/`, `1/`) with and without a trailing `/`, `/metadata?format=text`, leaves with a trailing `/`, the 429 body cloud-netconfig compares, cloud-init's JSON document, `HEAD` 405 |
//! | [`oracle_answers_the_peers`] | Oracle | both slash forms of `instance` and `vnics`, nm-cloud-setup's header written without a space, the v1 fallback's 404 |
//! | [`openstack_answers_the_peers`] | OpenStack | cloud-init's version list (`/openstack`), its files under a dated version, `/` listing, `HEAD`, webob's 404 |

#![cfg(test)]
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::time::Duration;

use leasehook_tests::world::{MAC0, MAC1};
use leasehook_tests::{aliyun_emulator, azure_emulator, emulator, gce_emulator};
use leasehook_tests::{openstack_emulator, oracle_emulator};
use serde_json::Value;

/// One answer: status, headers (names lower-cased), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn lines(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text()))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// Sends exactly `METHOD TARGET HTTP/1.1` with `Host` and `headers` (each
/// written as given, `Name:value` or `Name: value`) and reads the answer.
fn send(base: &str, method: &str, target: &str, headers: &[&str]) -> Answer {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        let _ = write!(req, "{h}\r\n");
    }
    if method == "PUT" || method == "POST" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {target}: no HTTP answer: {out:?}"));
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let body = out[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body,
    }
}

fn get(base: &str, target: &str, headers: &[&str]) -> Answer {
    send(base, "GET", target, headers)
}

// ---------------------------------------------------------------------------
// EC2

#[test]
fn ec2_answers_the_peers() {
    let mut cfg = emulator::Config::new(emulator::sample_tree());
    cfg.world.require_token = true;
    let emu = emulator::Emulator::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let b = emu.base_url();
    let secondary = emulator::SAMPLE_SECONDARY;

    // cloud-netconfig (ec2/functions.cloud-netconfig): `curl -m 3 -X PUT
    // .../latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 60"`.
    let token = send(
        &b,
        "PUT",
        "/latest/api/token",
        &["X-aws-ec2-metadata-token-ttl-seconds: 60"],
    );
    assert_eq!(token.status, 200);
    let token = token.text();
    assert!(!token.is_empty());
    let with = format!("X-aws-ec2-metadata-token: {token}");
    let h = [with.as_str()];
    // metadata_available: `curl -I .../2018-09-24/meta-data/`, the status only.
    let head = send(&b, "HEAD", "/2018-09-24/meta-data/", &h);
    assert_eq!(head.status, 200, "{head:?}");
    assert!(head.body.is_empty(), "HEAD with a body: {head:?}");
    // set_from_metadata: HEAD, then GET, for each key.
    let macs = "/2018-09-24/meta-data/network/interfaces/macs";
    for (key, want) in [
        ("subnet-ipv4-cidr-block", "10.20.1.0/24"),
        ("local-ipv4s", "10.20.1.20\n10.20.1.21"),
    ] {
        let url = format!("{macs}/{secondary}/{key}");
        let head = send(&b, "HEAD", &url, &h);
        assert_eq!((head.status, head.body.len()), (200, 0), "HEAD {url}");
        assert_eq!(
            head.header("content-length"),
            Some(want.len().to_string().as_str())
        );
        let got = get(&b, &url, &h);
        assert_eq!((got.status, got.text().as_str()), (200, want), "GET {url}");
    }
    // A NIC not listed yet: HEAD answers 404, which cloud-netconfig retries.
    let gone = send(
        &b,
        "HEAD",
        &format!("{macs}/02:00:00:00:00:09/subnet-ipv4-cidr-block"),
        &h,
    );
    assert_eq!((gone.status, gone.body.len()), (404, 0));
    // HEAD follows the token rules too.
    assert_eq!(send(&b, "HEAD", "/2018-09-24/meta-data/", &[]).status, 401);

    // nm-cloud-setup (nmcs-provider-ec2.c): detect `latest/meta-data/` (a line
    // `ami-id`), then `2018-09-24/meta-data/network/interfaces/macs/` (each line
    // a MAC with a trailing `/`), then two keys per NIC. It sends a token when
    // IMDSv2 is required (here); without one the service answers 401.
    let md = get(&b, "/latest/meta-data/", &h);
    assert_eq!(md.status, 200);
    assert!(md.lines().iter().any(|l| l == "ami-id"), "{md:?}");
    let list = get(&b, &format!("{macs}/"), &h);
    assert_eq!(list.status, 200);
    assert_eq!(
        list.lines(),
        [
            format!("{}/", emulator::SAMPLE_PRIMARY),
            format!("{secondary}/")
        ]
    );
    for line in list.lines() {
        for key in ["subnet-ipv4-cidr-block", "local-ipv4s"] {
            assert_eq!(get(&b, &format!("{macs}/{line}{key}"), &h).status, 200);
        }
    }
    assert_eq!(get(&b, &format!("{macs}/"), &[]).status, 401);

    // cloud-init (DataSourceEc2.py): the version probe `/<version>/meta-data/
    // instance-id` for its extended versions, `/` listing them, the identity
    // document (JSON) and the user-data.
    let versions = get(&b, "/", &h);
    assert_eq!(versions.status, 200);
    let listed = versions.lines();
    for v in [
        "2009-04-04",
        "2016-09-02",
        "2018-09-24",
        "2021-03-23",
        "latest",
    ] {
        assert!(listed.iter().any(|l| l == v), "{v} not in {listed:?}");
    }
    assert_eq!(listed.last().map(String::as_str), Some("latest"));
    let id = get(&b, "/2021-03-23/meta-data/instance-id", &h);
    assert_eq!(
        (id.status, id.text().as_str()),
        (200, "i-0fedcba9876543210")
    );
    let doc = get(&b, "/2021-03-23/dynamic/instance-identity/document", &h);
    assert_eq!(doc.json()["instanceId"], "i-0fedcba9876543210");
    assert!(
        get(&b, "/2021-03-23/user-data", &h)
            .text()
            .starts_with("#cloud-config")
    );
    // An unknown version is not a version.
    assert_eq!(get(&b, "/1999-01-01/meta-data/", &h).status, 404);

    // IMDSv2 refuses a token to a request naming a proxy; other methods 405;
    // a 404 is IMDS's HTML page.
    assert_eq!(
        send(
            &b,
            "PUT",
            "/latest/api/token",
            &[
                "X-aws-ec2-metadata-token-ttl-seconds: 60",
                "X-Forwarded-For: 192.0.2.1"
            ]
        )
        .status,
        403
    );
    assert_eq!(send(&b, "POST", "/latest/meta-data/", &h).status, 405);
    let missing = get(&b, "/latest/meta-data/nothing", &h);
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("content-type"), Some("text/html"));
    assert!(missing.text().contains("<title>404 - Not Found</title>"));
    // The log shows each path as asked.
    assert!(
        emu.log()
            .iter()
            .any(|e| e.method == "HEAD" && e.path == "/2018-09-24/meta-data/")
    );
}

// ---------------------------------------------------------------------------
// Alibaba ECS

#[test]
fn aliyun_answers_the_peers() {
    // Normal mode: nm-cloud-setup (nmcs-provider-aliyun.c) sends no token.
    let normal = aliyun_emulator::start_loopback(
        "127.0.0.1:0".parse().unwrap(),
        aliyun_emulator::world_tree(),
        false,
    )
    .unwrap();
    let b = normal.base_url();
    let md = get(&b, "/2016-01-01/meta-data/", &[]);
    assert_eq!(md.status, 200, "{md:?}");
    let macs = "/2016-01-01/meta-data/network/interfaces/macs/";
    let list = get(&b, macs, &[]);
    assert_eq!(list.lines(), [format!("{MAC0}/"), format!("{MAC1}/")]);
    let want = [
        ("vpc-cidr-block", "10.98.0.0/16"),
        ("private-ipv4s", r#"["10.98.1.20","10.98.1.21"]"#),
        ("primary-ip-address", "10.98.1.20"),
        ("netmask", "255.255.255.0"),
        ("gateway", "10.98.1.253"),
    ];
    for (key, value) in want {
        let got = get(&b, &format!("{macs}{MAC1}/{key}"), &[]);
        assert_eq!((got.status, got.text().as_str()), (200, value), "{key}");
    }
    // nm-cloud-setup reads private-ipv4s by stripping `[`, `]` and `"`.
    let ips: Vec<String> = get(&b, &format!("{macs}{MAC1}/private-ipv4s"), &[])
        .text()
        .split(',')
        .map(|s| s.replace(['[', ']', '"'], ""))
        .collect();
    assert_eq!(ips, ["10.98.1.20", "10.98.1.21"]);
    assert_eq!(send(&b, "HEAD", macs, &[]).status, 200);
    assert_eq!(send(&b, "DELETE", macs, &[]).status, 405);

    // Hardened mode: the same requests without a token get 401 (what
    // nm-cloud-setup meets there); cloud-init (DataSourceAliYun.py) asks a
    // token with ECS's header and reads with it.
    let hard = aliyun_emulator::start_loopback(
        "127.0.0.1:0".parse().unwrap(),
        aliyun_emulator::world_tree(),
        true,
    )
    .unwrap();
    let b = hard.base_url();
    assert_eq!(get(&b, "/2016-01-01/meta-data/", &[]).status, 401);
    // EC2's header names are not ECS's.
    assert_eq!(
        send(
            &b,
            "PUT",
            "/latest/api/token",
            &["X-aws-ec2-metadata-token-ttl-seconds: 21600"]
        )
        .status,
        400
    );
    let token = send(
        &b,
        "PUT",
        "/latest/api/token",
        &["X-aliyun-ecs-metadata-token-ttl-seconds: 21600"],
    );
    assert_eq!(token.status, 200);
    let with = format!("X-aliyun-ecs-metadata-token: {}", token.text());
    let id = get(&b, "/2016-01-01/meta-data/instance-id", &[with.as_str()]);
    assert_eq!(
        (id.status, id.text().as_str()),
        (200, aliyun_emulator::INSTANCE_ID)
    );
}

// ---------------------------------------------------------------------------
// GCE

#[test]
fn gce_answers_the_peers() {
    let emu = gce_emulator::GceEmulator::start(
        "127.0.0.1:0".parse().unwrap(),
        gce_emulator::Config::new(gce_emulator::world_tree()),
    )
    .unwrap();
    let b = emu.base_url();
    let nics = "/computeMetadata/v1/instance/network-interfaces/";
    // nm-cloud-setup (nmcs-provider-gcp.c) writes `Metadata-Flavor: Google`;
    // cloud-netconfig (gce/functions.cloud-netconfig) `Metadata-Flavor:Google`.
    for flavor in ["Metadata-Flavor: Google", "Metadata-Flavor:Google"] {
        let h = [flavor];
        let id = get(&b, "/computeMetadata/v1/instance/id", &h);
        assert_eq!(id.status, 200);
        assert_eq!(id.header("metadata-flavor"), Some("Google"));
        assert_eq!(id.text(), "4520031799277581759");
        let list = get(&b, nics, &h);
        assert_eq!(list.lines(), ["0/", "1/"]);
        assert_eq!(get(&b, &format!("{nics}0/mac"), &h).text(), MAC0);
        assert_eq!(get(&b, &format!("{nics}1/mac"), &h).text(), MAC1);
        // nm-cloud-setup: `N/forwarded-ips/`, an empty listing (no forwarded IP).
        let fips = get(&b, &format!("{nics}1/forwarded-ips/"), &h);
        assert_eq!((fips.status, fips.lines().len()), (200, 0));
        // cloud-netconfig: `${idx}ip`, `${idx}gateway`, `${idx}ip-aliases/` and
        // each alias (idx is a listing line, `1/`).
        assert_eq!(get(&b, &format!("{nics}1/ip"), &h).text(), "10.98.1.20");
        assert_eq!(get(&b, &format!("{nics}1/gateway"), &h).text(), "10.98.1.1");
        let aliases = get(&b, &format!("{nics}1/ip-aliases/"), &h);
        assert_eq!(aliases.lines(), ["0"]);
        assert_eq!(
            get(&b, &format!("{nics}1/ip-aliases/0"), &h).text(),
            "10.98.1.21/32"
        );
    }
    let h = ["Metadata-Flavor: Google"];
    // cloud-init (DataSourceGCE.py): three leaves, then `instance/attributes/?recursive=True`
    // (capital T) as JSON with the user's keys unchanged.
    for (leaf, want) in [
        ("instance/zone", "projects/123456789/zones/us-central1-a"),
        (
            "instance/hostname",
            "vm-1.us-central1-a.c.leasehook-test.internal",
        ),
    ] {
        assert_eq!(
            get(&b, &format!("/computeMetadata/v1/{leaf}"), &h).text(),
            want
        );
    }
    let attrs = get(
        &b,
        "/computeMetadata/v1/instance/attributes/?recursive=True",
        &h,
    );
    assert_eq!(attrs.status, 200);
    assert_eq!(attrs.json()["user-data"], "#cloud-config\n{}\n");
    // leasehook's own request: the NICs as camelCase JSON.
    let all = get(&b, &format!("{nics}?recursive=true"), &h).json();
    assert_eq!(all[1]["ipAliases"][0], "10.98.1.21/32");

    // The rules: no header or a proxy's header 403; the root answers without
    // the header; HEAD as GET without the body; other methods 405; a 404 is
    // Google's page, with Metadata-Flavor.
    assert_eq!(get(&b, nics, &[]).status, 403);
    assert_eq!(
        get(
            &b,
            nics,
            &["Metadata-Flavor: Google", "X-Forwarded-For: 192.0.2.1"]
        )
        .status,
        403
    );
    let root = get(&b, "/", &[]);
    assert_eq!(root.status, 200);
    assert!(root.lines().iter().any(|l| l == "computeMetadata/"));
    assert_eq!(root.header("metadata-flavor"), Some("Google"));
    let head = send(&b, "HEAD", "/computeMetadata/v1/instance/id", &h);
    assert_eq!((head.status, head.body.len()), (200, 0));
    assert_eq!(
        send(&b, "POST", "/computeMetadata/v1/instance/id", &h).status,
        405
    );
    let missing = get(&b, "/computeMetadata/v1/instance/nothing", &h);
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("metadata-flavor"), Some("Google"));
    assert_eq!(
        missing.header("content-type"),
        Some("text/html; charset=UTF-8")
    );
    assert!(missing.text().contains("Error 404 (Not Found)"));
}

// ---------------------------------------------------------------------------
// Azure

#[test]
fn azure_answers_the_peers() {
    let emu = azure_emulator::Emulator::start(
        "127.0.0.1:0".parse().unwrap(),
        azure_emulator::config(azure_emulator::world_instance()),
    )
    .unwrap();
    let b = emu.base_url();
    // IMDS answers 5 requests a second: the replay keeps under it as the
    // peers' retries would, 250 ms apart.
    let paced = |target: &str, headers: &[&str]| {
        std::thread::sleep(Duration::from_millis(250));
        get(&b, target, headers)
    };
    // nm-cloud-setup (nmcs-provider-azure.c): `Metadata:true` and
    // `?format=text&api-version=2017-04-02` on every request.
    let h = ["Metadata:true"];
    let q = "?format=text&api-version=2017-04-02";
    let base = "/metadata/instance/network/interface/";
    assert_eq!(paced(&format!("/metadata/instance{q}"), &h).status, 200);
    let list = paced(&format!("{base}{q}"), &h);
    assert_eq!(
        (list.status, list.lines()),
        (200, vec!["0/".to_owned(), "1/".to_owned()])
    );
    assert_eq!(
        list.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let mac = paced(&format!("{base}1/macAddress{q}"), &h);
    assert_eq!(mac.text(), "020000000002");
    let ips = paced(&format!("{base}1/ipv4/ipAddress/{q}"), &h);
    assert_eq!(ips.lines(), ["0/", "1/"]);
    assert_eq!(
        paced(&format!("{base}1/ipv4/ipAddress/1/privateIpAddress{q}"), &h).text(),
        "10.98.1.21"
    );
    assert_eq!(
        paced(&format!("{base}1/ipv4/subnet/0/prefix/{q}"), &h).text(),
        "24"
    );
    assert_eq!(
        paced(&format!("{base}1/ipv4/subnet/0/address/{q}"), &h).text(),
        "10.98.1.0"
    );
    // cloud-netconfig (azure/functions.cloud-netconfig): `/metadata{q}` must
    // name `instance/`; folders without the trailing `/`; `${idx}privateIpAddress`
    // with idx a listing line (`0/`).
    assert!(
        paced(&format!("/metadata{q}"), &h)
            .text()
            .contains("instance/")
    );
    let idx = paced(&format!("{base}0/ipv4/ipAddress{q}"), &h).lines();
    assert_eq!(idx, ["0/"]);
    assert_eq!(
        paced(
            &format!("{base}0/ipv4/ipAddress/{}privateIpAddress{q}", idx[0]),
            &h
        )
        .text(),
        "10.98.0.10"
    );
    assert_eq!(
        paced(&format!("{base}0/ipv4/subnet/0/prefix{q}"), &h).text(),
        "24"
    );
    // cloud-init (DataSourceAzure.py): the whole document as JSON.
    let doc = paced(
        "/metadata/instance?api-version=2021-08-01&extended=true",
        &["Metadata: true"],
    );
    assert_eq!(doc.status, 200);
    assert_eq!(
        doc.json()["network"]["interface"][1]["macAddress"],
        "020000000002"
    );
    // Only GET: HEAD is 405 as any other method.
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(
        send(&b, "HEAD", &format!("/metadata/instance{q}"), &h).status,
        405
    );
    // Past 5 a second: 429 with the body cloud-netconfig compares.
    std::thread::sleep(Duration::from_millis(1100));
    let burst: Vec<Answer> = (0..6).map(|_| get(&b, &format!("{base}{q}"), &h)).collect();
    let limited = burst.iter().find(|a| a.status == 429).expect("no 429");
    assert_eq!(limited.text(), "Too many requests");
    assert_eq!(limited.header("retry-after"), Some("1"));
}

// ---------------------------------------------------------------------------
// Oracle

#[test]
fn oracle_answers_the_peers() {
    let emu = oracle_emulator::Emulator::start(
        "127.0.0.1:0".parse().unwrap(),
        oracle_emulator::Config::default(),
    )
    .unwrap();
    let b = emu.base_url();
    // nm-cloud-setup (nmcs-provider-oci.c): `Authorization:Bearer Oracle`,
    // `opc/v2/instance` and `opc/v2/vnics` without a trailing `/`; cloud-init
    // (DataSourceOracle.py): `Authorization: Bearer Oracle`, with one.
    for (h, slash) in [
        ("Authorization:Bearer Oracle", ""),
        ("Authorization: Bearer Oracle", "/"),
    ] {
        let inst = get(&b, &format!("/opc/v2/instance{slash}"), &[h]);
        assert_eq!(inst.status, 200);
        assert_eq!(inst.json()["canonicalRegionName"], "us-ashburn-1");
        let vnics = get(&b, &format!("/opc/v2/vnics{slash}"), &[h]).json();
        let list = vnics.as_array().unwrap();
        assert_eq!(list.len(), 2);
        // What nm-cloud-setup reads of each VNIC.
        assert_eq!(list[0]["macAddr"], MAC0.to_uppercase());
        assert_eq!(list[1]["privateIp"], "10.98.1.20");
        assert_eq!(list[1]["virtualRouterIp"], "10.98.1.1");
        assert_eq!(list[1]["subnetCidrBlock"], "10.98.1.0/24");
        assert!(list[1].get("nicIndex").is_none(), "a VM has no nicIndex");
    }
    // cloud-init falls back to v1 when v2 fails; with IMDSv1 disabled v1 is 404.
    assert_eq!(get(&b, "/opc/v1/instance/", &[]).status, 404);
    assert_eq!(get(&b, "/opc/v2/vnics/", &[]).status, 401);
}

// ---------------------------------------------------------------------------
// OpenStack

#[test]
fn openstack_answers_the_peers() {
    let emu = openstack_emulator::OpenStackEmulator::start(
        "127.0.0.1:0".parse().unwrap(),
        openstack_emulator::Config::new(openstack_emulator::world_tree()),
    )
    .unwrap();
    let b = emu.base_url();
    // cloud-init (DataSourceOpenStack.py, helpers/openstack.py): `/openstack`
    // lists versions; it takes the newest it knows (2018-08-27) and reads its
    // files there.
    let versions = get(&b, "/openstack", &[]);
    assert_eq!(versions.status, 200);
    let listed = versions.lines();
    for v in ["2012-08-10", "2015-10-15", "2018-08-27", "latest"] {
        assert!(listed.iter().any(|l| l == v), "{v} not in {listed:?}");
    }
    let md = get(&b, "/openstack/2018-08-27/meta_data.json", &[]);
    assert_eq!(md.json()["uuid"], openstack_emulator::INSTANCE_ID);
    let nd = get(&b, "/openstack/2018-08-27/network_data.json", &[]).json();
    assert_eq!(nd["links"][1]["ethernet_mac_address"], MAC1);
    for f in ["vendor_data.json", "vendor_data2.json"] {
        assert_eq!(
            get(&b, &format!("/openstack/2018-08-27/{f}"), &[]).json(),
            serde_json::json!({})
        );
    }
    assert!(
        get(&b, "/openstack/2018-08-27/user_data", &[])
            .text()
            .starts_with("#cloud-config")
    );
    assert_eq!(get(&b, "/openstack/2015-10-15/", &[]).status, 200);
    // Nova's `/` lists the EC2-style versions; HEAD answers without the body;
    // a 404 is webob's page.
    let root = get(&b, "/", &[]);
    assert!(root.lines().iter().any(|l| l == "2009-04-04"));
    let head = send(&b, "HEAD", "/openstack/latest/network_data.json", &[]);
    assert_eq!((head.status, head.body.len()), (200, 0));
    let missing = get(&b, "/openstack/latest/nothing.json", &[]);
    assert_eq!(missing.status, 404);
    assert!(missing.text().starts_with("404 Not Found"));
    assert_eq!(
        get(&b, "/openstack/1999-01-01/meta_data.json", &[]).status,
        404
    );
}
