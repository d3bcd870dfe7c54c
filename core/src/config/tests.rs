// SPDX-License-Identifier: Apache-2.0
use std::time::Duration;

use super::*;
use crate::event::env;
use crate::model::Profile;

/// Asserts that each `(text, prefix, want)` file `/c.yaml` is refused with an error
/// that names the file and holds `prefix` and `want`.
fn assert_refused(cases: &[(&str, &str, &str)]) {
    for (text, prefix, want) in cases {
        let e = merged(&[("/c.yaml", text)], &Layers::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("configuration /c.yaml") && e.contains(prefix) && e.contains(want),
            "{text:?}: {e}"
        );
    }
}

fn merged(files: &[(&str, &str)], sources: &Layers) -> Result<Loaded> {
    let layers = files
        .iter()
        .map(|(p, t)| parse_file(p, t))
        .collect::<Result<Vec<_>>>()?;
    merge(Path::new("/"), SettingOrigin::Default, &layers, sources)
}

#[test]
fn empty_files_give_the_defaults() {
    for text in ["", "# nothing\n", "---\n", "~\n"] {
        let l = merged(&[("/c.yaml", text)], &Layers::default()).unwrap();
        assert_eq!(l.settings, Settings::default(), "{text:?}");
        assert!(l.origins.is_empty());
    }
}

#[test]
fn the_shipped_file_is_all_defaults() {
    let text = include_str!("../../../hooks/config/config.yaml");
    let l = merged(&[("/etc/leasehook/config.yaml", text)], &Layers::default()).unwrap();
    assert_eq!(l.settings, Settings::default());
    // Uncommented, every key it shows parses and still gives the defaults.
    // `#key: value` and `#  nested: value` are keys; `# text` and `#  # text`
    // are comments.
    let uncommented: String = text
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter(|l| {
            let t = l.trim_start();
            !t.is_empty() && !t.starts_with('#') && (!l.starts_with(' ') || l.starts_with("  "))
        })
        .fold(String::new(), |mut out, l| {
            out.push_str(l);
            out.push('\n');
            out
        });
    let l = merged(&[("/u.yaml", &uncommented)], &Layers::default()).unwrap();
    let mut want = Settings::default();
    want.plan.priority_base = Some(10_000);
    want.imds.endpoints = Some(
        crate::constants::IMDS_ENDPOINTS
            .iter()
            .map(|e| (*e).to_owned())
            .collect(),
    );
    want.datasource_list = Some(vec![
        "Ec2".into(),
        "LXD".into(),
        "NoCloud".into(),
        "None".into(),
    ]);
    want.fallback.global = Some(true);
    want.fallback.per_datasource.insert(SourceKind::Ec2, true);
    assert_eq!(l.settings, want, "{uncommented}");
}

#[test]
fn later_layers_win_and_say_where_from() {
    let files = [
        (
            "/etc/leasehook/config.yaml",
            "table_base: 20000\nprofile: cloud-init\nimds:\n  budget_s: 10\n  endpoints: [\"http://127.0.0.1:8080\"]\nunmanaged: [eth9, \"02:00:00:00:00:09\"]\n",
        ),
        (
            "/etc/leasehook/config.d/50-x.yaml",
            "# over\ntable_base: 30000\ndatasource:\n  Ec2:\n    fallback: false\n",
        ),
    ];
    let sources = Layers::from_env(env(&[
        ("LEASEHOOK_IMDS_BUDGET_S", "12.5"),
        ("LEASEHOOK_PRIMARY_RULES", "yes"),
        ("LEASEHOOK_FALLBACK", ""),
    ]))
    .with_flag("profile", "--profile", Some("ec2-net-utils".into()));
    let l = merged(&files, &sources).unwrap();
    let s = &l.settings;
    assert_eq!(s.plan.table_base, 30_000);
    assert_eq!(s.plan.profile, Profile::Ec2NetUtils);
    assert!(s.plan.primary_rules);
    assert_eq!(s.imds.budget, Duration::from_millis(12_500));
    assert_eq!(
        s.fallback.per_datasource.get(&SourceKind::Ec2),
        Some(&false)
    );
    assert_eq!(s.fallback.global, None, "an empty variable is unset");
    assert_eq!(s.unmanaged.len(), 2);
    let name = IfName::try_new("eth9").unwrap();
    assert!(s.is_unmanaged(&name, None));
    assert!(s.is_unmanaged(
        &IfName::try_new("ens5").unwrap(),
        Some("02:00:00:00:00:09".parse().unwrap())
    ));
    assert!(!s.is_unmanaged(&IfName::try_new("ens5").unwrap(), None));
    assert_eq!(
        l.origin("table_base").to_string(),
        "/etc/leasehook/config.d/50-x.yaml line 2"
    );
    assert_eq!(
        l.origin("imds.endpoints").to_string(),
        "/etc/leasehook/config.yaml line 5"
    );
    assert_eq!(
        l.origin("datasource.Ec2.fallback").to_string(),
        "/etc/leasehook/config.d/50-x.yaml line 5"
    );
    assert_eq!(
        l.origin("imds.budget_s").to_string(),
        "environment LEASEHOOK_IMDS_BUDGET_S"
    );
    assert_eq!(l.origin("profile").to_string(), "flag --profile");
    assert_eq!(l.origin("priority_base"), SettingOrigin::Default);
}

#[test]
fn mistakes_name_the_file_line_and_key() {
    let cases = [
        (
            "tabel_base: 1\n",
            "configuration /c.yaml: ",
            "unknown field `tabel_base`",
        ),
        (
            "table_base: -1\n",
            "configuration /c.yaml line 1: table_base: ",
            "whole number",
        ),
        (
            "\n\ntable_base: x\n",
            "configuration /c.yaml line 3: table_base: ",
            "\"x\"",
        ),
        (
            "profile: azure\n",
            "configuration /c.yaml line 1: profile: ",
            "ec2-net-utils or cloud-init",
        ),
        (
            "primary_rules: maybe\n",
            "configuration /c.yaml line 1: primary_rules: ",
            "true or false",
        ),
        (
            "imds:\n  budget_s: 4000\n",
            "configuration /c.yaml line 2: imds.budget_s: ",
            "0 to 3600",
        ),
        (
            "imds:\n  endpoints: []\n",
            "line 2: imds.endpoints: ",
            "empty",
        ),
        (
            "imds:\n  endpoints: [\"http://imds.example\"]\n",
            "imds.endpoints: ",
            "IP address",
        ),
        (
            "imds:\n  timeout: 3\n",
            "configuration /c.yaml: ",
            "unknown field `timeout`",
        ),
        (
            "unmanaged: [\"eth0; reboot\"]\n",
            "line 1: unmanaged: ",
            "interface name",
        ),
        (
            "unmanaged: eth0\n",
            "line 1: unmanaged: ",
            "expected a list",
        ),
        ("datasource_list: []\n", "datasource_list: ", "empty"),
        (
            "datasource:\n  Hetzner: {fallback: false}\n",
            "line 2: datasource.Hetzner.fallback: ",
            // Every kind the clouds' rows and the others declare, but `None`.
            "not a datasource leasehook implements (ConfigDrive, NoCloud, Azure, AliYun, \
             Ec2, GCE, OpenStack, Oracle, LXD)",
        ),
        (
            "datasource:\n  Ec2: {strict: false}\n",
            "configuration /c.yaml: ",
            "unknown field `strict`",
        ),
        (
            "log_level: loud\n",
            "log_level: ",
            "error, warn, info or debug",
        ),
        (
            "root: /tmp\n",
            "configuration /c.yaml line 1: root: ",
            "--root",
        ),
        (
            "table_base: 1\ntable_base: 2\n",
            "configuration /c.yaml: ",
            "line 2",
        ),
        ("- a\n", "configuration /c.yaml: ", "line 1"),
        ("table_base: [1\n", "configuration /c.yaml: ", ""),
    ];
    assert_refused(&cases);
}

#[test]
fn bad_environment_and_flags_name_themselves() {
    let e = merged(
        &[],
        &Layers::from_env(env(&[("LEASEHOOK_TABLE_BASE", "-1")])),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(
            "configuration environment LEASEHOOK_TABLE_BASE: table_base: expected a whole number"
        ),
        "{e}"
    );
    let e = merged(
        &[],
        &Layers::default().with_flag("imds.budget_s", "--budget", Some("NaN".into())),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("configuration flag --budget: imds.budget_s: "),
        "{e}"
    );
    let e = merged(
        &[],
        &Layers::from_env(env(&[("LEASEHOOK_UNMANAGED", "eth0,,eth1")])),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("empty item"), "{e}");
    let e = merged(
        &[],
        &Layers::from_env(env(&[("LEASEHOOK_ENABLED", "nope")])),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(
            "configuration environment LEASEHOOK_ENABLED: enabled: expected true or false"
        ),
        "{e}"
    );
}

#[test]
fn off_switch_and_unmanaged_mistakes_name_the_file_line_and_key() {
    let cases = [
        (
            "enabled: maybe\n",
            "configuration /c.yaml line 1: enabled: ",
            "expected true or false",
        ),
        (
            "# image defaults\nenabled: 0\n",
            "configuration /c.yaml line 2: enabled: ",
            "expected true or false",
        ),
        (
            "unmanaged: [eth0, \"device-number:one\"]\n",
            "configuration /c.yaml line 1: unmanaged: ",
            "device-number: expected a whole number",
        ),
        (
            "table_base: 1\nunmanaged:\n  - \"ens[5-9\"\n",
            "configuration /c.yaml line 3: unmanaged: ",
            "unclosed [",
        ),
        (
            "unmanaged: [\"interface-id:eni 0\"]\n",
            "line 1: unmanaged: ",
            "interface-id: expected",
        ),
        (
            "unmanaged: [\"network-card:-1\"]\n",
            "line 1: unmanaged: ",
            "network-card: expected a whole number",
        ),
    ];
    assert_refused(&cases);
}

#[test]
fn the_off_switch_and_every_unmanaged_form() {
    let text = "enabled: false\nunmanaged: [\"eth*\", \"ens[5-9]\", \"02:00:00:00:00:09\", \
                \"device-number:2\", \"network-card:1\", \"interface-id:eni-0abc\"]\n";
    let l = merged(&[("/c.yaml", text)], &Layers::default()).unwrap();
    assert!(!l.settings.enabled);
    assert_eq!(l.origin("enabled").to_string(), "/c.yaml line 1");
    let shown: Vec<String> = l
        .settings
        .unmanaged
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "eth*",
            "ens[5-9]",
            "02:00:00:00:00:09",
            "device-number:2",
            "network-card:1",
            "interface-id:eni-0abc"
        ]
    );
    let name = |n: &str| IfName::try_new(n).unwrap();
    assert!(l.settings.is_unmanaged(&name("eth7"), None));
    assert!(l.settings.is_unmanaged(&name("ens6"), None));
    assert!(!l.settings.is_unmanaged(&name("ens4"), None));
    // `config show` says it, in YAML and JSON.
    assert!(
        show_yaml(&l).contains("enabled: false"),
        "{}",
        show_yaml(&l)
    );
    assert_eq!(
        show_json(&l)["settings"]["enabled"],
        serde_json::json!(false)
    );
    // The environment wins over the file, as for every key; 0 and 1 are taken.
    let l = merged(
        &[("/c.yaml", text)],
        &Layers::from_env(env(&[
            ("LEASEHOOK_ENABLED", "1"),
            ("LEASEHOOK_UNMANAGED", "device-number:3, veth*"),
        ])),
    )
    .unwrap();
    assert!(l.settings.enabled);
    assert_eq!(l.settings.unmanaged.len(), 2);
    let l = merged(&[], &Layers::from_env(env(&[("LEASEHOOK_ENABLED", "0")]))).unwrap();
    assert!(!l.settings.enabled);
    assert_eq!(
        l.origin("enabled").to_string(),
        "environment LEASEHOOK_ENABLED"
    );
    // The forms that need the metadata: decided from it, unknown without it.
    let entries = &l.settings.unmanaged;
    assert_eq!(
        unmanaged_by_metadata(entries, None),
        MetadataVerdict::Managed
    );
    let entries: Vec<Unmanaged> = vec!["eth1".parse().unwrap(), "device-number:2".parse().unwrap()];
    let mut nic = NicMetadata::empty("02:00:00:00:00:03".parse().unwrap());
    assert_eq!(
        unmanaged_by_metadata(&entries, Some(&nic)),
        MetadataVerdict::Unknown(&entries[1])
    );
    nic.device_number = Some(2);
    assert_eq!(
        unmanaged_by_metadata(&entries, Some(&nic)),
        MetadataVerdict::Unmanaged(&entries[1])
    );
    nic.device_number = Some(1);
    assert_eq!(
        unmanaged_by_metadata(&entries, Some(&nic)),
        MetadataVerdict::Managed
    );
}

#[test]
fn hostile_values_are_escaped_in_messages() {
    let e = merged(
        &[("/c.yaml", "profile: \"x\\n<13>fake: line\"\n")],
        &Layers::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn load_reads_config_d_in_lexical_order_below_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc/leasehook");
    std::fs::create_dir_all(etc.join("config.d")).unwrap();
    std::fs::write(etc.join("config.yaml"), "table_base: 1\n").unwrap();
    std::fs::write(etc.join("config.d/20-b.yaml"), "table_base: 3\n").unwrap();
    std::fs::write(
        etc.join("config.d/10-a.yaml"),
        "table_base: 2\nprofile: cloud-init\n",
    )
    .unwrap();
    std::fs::write(etc.join("config.d/30-c.yaml.dpkg-old"), "table_base: x\n").unwrap();
    std::fs::write(etc.join("config.d/.hidden.yaml"), "table_base: x\n").unwrap();
    let sources = Layers::default().with_root(Some(dir.path().to_path_buf()));
    let l = load(&sources).unwrap();
    assert_eq!(l.settings.plan.table_base, 3);
    assert_eq!(l.settings.plan.profile, Profile::CloudInit);
    assert_eq!(l.settings.root, dir.path());
    assert_eq!(l.files.len(), 3);
    assert!(l.files[1].ends_with("config.d/10-a.yaml"));
    // --config reads that one file only.
    let only = dir.path().join("only.yaml");
    std::fs::write(&only, "table_base: 7\n").unwrap();
    let l = load(&sources.clone().with_file(Some(only.clone()))).unwrap();
    assert_eq!((l.settings.plan.table_base, l.files.len()), (7, 1));
    // ... and it must exist.
    let e = load(
        &sources
            .clone()
            .with_file(Some(dir.path().join("nope.yaml"))),
    )
    .unwrap_err();
    assert!(e.to_string().contains("nope.yaml"), "{e}");
    // LEASEHOOK_ROOT is the root when --root is not given.
    let mut s = Layers::from_env(env(&[(ROOT_ENV, dir.path().to_str().unwrap())]));
    assert_eq!(load(&s).unwrap().settings.plan.table_base, 3);
    s.env.insert(CONFIG_ENV.into(), only.display().to_string());
    assert_eq!(load(&s).unwrap().settings.plan.table_base, 7);
}

#[test]
fn show_prints_every_key_with_its_origin() {
    let l = merged(
        &[(
            "/etc/leasehook/config.yaml",
            "table_base: 20000\ndatasource:\n  LXD: {fallback: false}\n",
        )],
        &Layers::from_env(env(&[("LEASEHOOK_IMDS_SYNC_BUDGET_S", "1")])),
    )
    .unwrap();
    let y = show_yaml(&l);
    for key in KEYS.iter() {
        let leaf = key.name.rsplit('.').next().unwrap();
        assert!(
            y.contains(&format!("{leaf}: ")),
            "{} missing in\n{y}",
            key.name
        );
    }
    assert!(y.contains("/etc/leasehook/config.yaml line 1"), "{y}");
    assert!(
        y.contains("environment LEASEHOOK_IMDS_SYNC_BUDGET_S"),
        "{y}"
    );
    // What it prints is itself a configuration that gives the same settings.
    let again = merged(&[("/shown.yaml", &y)], &Layers::default()).unwrap();
    let mut want = l.settings.clone();
    want.plan.priority_base = None;
    let mut got = again.settings.clone();
    got.plan.priority_base = None;
    got.imds.endpoints = None;
    got.cloud_endpoints.clear();
    got.fallback.global = None;
    assert_eq!(got, want, "{y}");
    let j = show_json(&l);
    assert_eq!(j["settings"]["table_base"], 20_000);
    assert_eq!(j["settings"]["imds"]["sync_budget_s"], 1.0);
    assert_eq!(j["settings"]["datasource"]["LXD"]["fallback"], false);
    assert_eq!(
        j["origins"]["table_base"],
        "/etc/leasehook/config.yaml line 1"
    );
    assert_eq!(
        j["origins"]["datasource.LXD.fallback"],
        "/etc/leasehook/config.yaml line 3"
    );
}

#[test]
fn a_file_that_is_not_our_yaml_is_never_quoted() {
    // Issue 18, item 10: `--config /etc/shadow` echoed a line of it (the parser
    // reads `root:HASH:...` as a key). Only the position, and key names that are
    // key names, may be shown.
    let shadow = "root:$y$j9T$abcdefSECRET:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n";
    for (text, want) in [
        (
            shadow,
            "configuration /etc/shadow: an unknown field (not shown: it is not a key name), expected one of enabled, profile, table_base, priority_base, primary_rules, secondary_addresses, unmanaged, nics, kubernetes, provider, imds, imdsv1_fallback, gce, azure, aliyun, oracle, openstack, datasource_list, fallback, datasource, log_level, metrics, root at line 1, column 1; see docs/configuration.md for the keys",
        ),
        (
            "imds:\n  budget_s: 1\n  SECRET pass: 2\n",
            "configuration /etc/shadow: an unknown field (not shown: it is not a key name), expected one of endpoints, sync_budget_s, budget_s, bind_interface at line 3, column 3; see docs/configuration.md for the keys",
        ),
        (
            "\u{0}SECRET",
            "configuration /etc/shadow: not YAML leasehook can read (the text is not shown) at line 1, column 1; see docs/configuration.md for the keys",
        ),
        (
            "tabel_base: 3\n",
            "configuration /etc/shadow: unknown field `tabel_base`, expected one of enabled, profile, table_base, priority_base, primary_rules, secondary_addresses, unmanaged, nics, kubernetes, provider, imds, imdsv1_fallback, gce, azure, aliyun, oracle, openstack, datasource_list, fallback, datasource, log_level, metrics, root at line 1, column 1; see docs/configuration.md for the keys",
        ),
        (
            "table_base: 1\ntable_base: 2\n",
            "configuration /etc/shadow: duplicate mapping key: table_base, set DuplicateKeyPolicy in Options if acceptable at line 2, column 1; see docs/configuration.md for the keys",
        ),
        (
            "imds: [SECRET]\n",
            "configuration /etc/shadow: expected mapping start at line 1, column 7; see docs/configuration.md for the keys",
        ),
    ] {
        let e = parse_file("/etc/shadow", text)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(!e.contains("SECRET") && !e.contains("19000"), "{e}");
        assert_eq!(e, want);
    }
}

#[test]
fn provider_is_auto_or_ec2_and_a_planned_name_says_so() {
    let d = merged(&[], &Layers::default()).unwrap();
    assert_eq!(
        d.settings.provider,
        crate::source::provider::ProviderChoice::Auto
    );
    let l = merged(
        &[("/etc/leasehook/config.yaml", "provider: ec2\n")],
        &Layers::default(),
    )
    .unwrap();
    assert_eq!(
        l.settings.provider,
        crate::source::provider::ProviderChoice::Named(
            crate::source::provider::ProviderKind::from_name("ec2").unwrap()
        )
    );
    // Every provider SPEC §4 names is built: an unknown name lists them all.
    let (value, want) = (
        "digitalocean",
        "expected auto, ec2, gce, azure, aliyun, oracle or openstack (got \"digitalocean\")",
    );
    let e = merged(
        &[(
            "/etc/leasehook/config.yaml",
            &format!("provider: {value}\n"),
        )],
        &Layers::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("provider") && e.contains(want), "{e}");
}

/// `nics:` (issue 36): entries read, shown with their origin, and every mistake
/// named by file, line and the entry's key.
#[test]
fn nics_entries_parse_and_mistakes_name_the_line_and_key() {
    let text = "table_base: 10000\nnics:\n  - match: device-number:1\n    routes:\n      - to: 192.0.2.0/24\n        via: gateway\n      - to: 203.0.113.0/24\n        via: 10.98.1.5\n    rules:\n      - to: 198.51.100.0/24\n        priority: 9000\n    prefix_addresses: 2\n";
    let l = merged(&[("/c.yaml", text)], &Layers::default()).unwrap();
    let nics = &l.settings.plan.nics;
    assert_eq!(nics.len(), 1);
    assert_eq!(nics[0].matches.to_string(), "device-number:1");
    assert_eq!(nics[0].routes.len(), 2);
    assert_eq!(nics[0].routes[0].via, Via::Gateway);
    assert_eq!(nics[0].routes[1].via.to_string(), "10.98.1.5");
    assert_eq!(nics[0].rules[0].priority, 9000);
    assert_eq!(nics[0].prefix_addresses, 2);
    assert!(!nics[0].allow_default);
    assert_eq!(l.origin("nics").to_string(), "/c.yaml line 3");
    let shown = show_yaml(&l);
    assert!(
        shown.contains("\"match\":\"device-number:1\"") && shown.contains("# /c.yaml line 3"),
        "{shown}"
    );
    assert_eq!(
        show_json(&l)["settings"]["nics"][0]["rules"][0]["to"],
        "198.51.100.0/24"
    );
    let entry = "nics:\n  - match: eth1\n";
    assert_refused(&[
        (
            "nics:\n  - routes: []\n",
            "configuration /c.yaml line 2: nics[0].match: ",
            "missing",
        ),
        (
            "nics:\n  - match: \"eth1; reboot\"\n",
            "configuration /c.yaml line 2: nics[0].match: ",
            "a name holds only",
        ),
        (
            &format!("{entry}    routes:\n      - to: 192.0.2.0/24\n        via: router\n"),
            "configuration /c.yaml line 5: nics[0].routes[0].via: ",
            "expected gateway",
        ),
        (
            &format!("{entry}    routes:\n      - to: 192.0.2.1/24\n        via: gateway\n"),
            "configuration /c.yaml line 4: nics[0].routes[0].to: ",
            "host bits are set: the prefix is 192.0.2.0/24",
        ),
        (
            &format!("{entry}    routes:\n      - via: gateway\n"),
            "configuration /c.yaml line 4: nics[0].routes[0].to: ",
            "missing",
        ),
        (
            &format!(
                "{entry}    routes:\n      - to: 192.0.2.0/24\n        via: \"2001:db8::1\"\n"
            ),
            "line 5: nics[0].routes[0].via: ",
            "other family",
        ),
        (
            &format!("{entry}    rules:\n      - to: 198.51.100.0/24\n        priority: 0\n"),
            "configuration /c.yaml line 5: nics[0].rules[0].priority: ",
            "from 1 to 32765",
        ),
        (
            &format!("{entry}    rules:\n      - to: 198.51.100.0/24\n        priority: 32766\n"),
            "line 5: nics[0].rules[0].priority: ",
            "from 1 to 32765",
        ),
        (
            &format!("{entry}    prefix_addresses: 17\n"),
            "configuration /c.yaml line 3: nics[0].prefix_addresses: ",
            "from 0 to 16",
        ),
        (
            &format!("{entry}    allow_default: yes please\n"),
            "configuration /c.yaml line 3: nics[0].allow_default: ",
            "true or false",
        ),
        (
            &format!("{entry}    rutes: []\n"),
            "configuration /c.yaml: ",
            "unknown field `rutes`",
        ),
    ]);
    // No environment form.
    assert!(KEYS.iter().any(|k| k.name == "nics" && k.env.is_none()));
}
