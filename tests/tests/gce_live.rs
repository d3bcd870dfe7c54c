// SPDX-License-Identifier: Apache-2.0
//! GCE's metadata followed live (issue 35 item 2): the NIC list's long poll.
//!
//! * `in_process`: the emulator's `wait_for_change` as the real server's (an
//!   `ETag` on every answer, a stale `last_etag` answered at once, the current
//!   one held until the list changes or `timeout_sec` passes) and leasehook's
//!   client against it (always compiled).
//! * `world` (the `netns` feature): `leasehook watch` in the GCE world, no
//!   refresh timer: an alias range added to the secondary NIC's metadata gets
//!   its rule, one long poll open at a time and none added while idle; the
//!   timer's `refresh` leaves the followed NIC alone while the heartbeat is
//!   fresh; HTTP 500s and garbage from the long poll are logged, backed off and
//!   survived. Needs root, isc-dhcp-client and dnsmasq, and fails, never skips,
//!   without them.

#![cfg(test)]

mod in_process {
    use std::time::{Duration, Instant};

    use leasehook_core::source::gce::change::{Snapshot, changes};
    use leasehook_core::source::gce::live::Polled;
    use leasehook_core::source::gce::{Gce, GceProvider};
    use leasehook_tests::gce_emulator::{
        Config, GceEmulator, long_polls, open_long_polls, world_tree,
    };
    use leasehook_tests::world::{MAC1, wait_until};
    use serde_json::json;

    fn client(emu: &GceEmulator) -> Gce {
        GceProvider::try_new(Some(&emu.base_url()))
            .unwrap()
            .client()
            .unwrap()
    }

    #[test]
    fn the_long_poll_is_held_until_the_nic_list_changes() {
        let emu =
            GceEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree())).unwrap();
        let gce = client(&emu);
        let first = gce.poll_interfaces(None, Duration::from_secs(60)).unwrap();
        let before = Snapshot::parse(&first.body).unwrap();
        assert_eq!(before.nics.len(), 2);
        // Another etag: answered at once, the same list.
        let t = Instant::now();
        let again = gce
            .poll_interfaces(Some("0000"), Duration::from_secs(60))
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(again, first);
        // The current one, nothing changing: held for timeout_sec, then the same.
        let t = Instant::now();
        let held = gce
            .poll_interfaces(Some(&first.etag), Duration::from_secs(1))
            .unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(900),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(held, first);
        // Held, then an alias range appears on nic1: answered with the new list.
        let waiting = {
            let (gce, etag) = (client(&emu), first.etag.clone());
            std::thread::spawn(move || gce.poll_interfaces(Some(&etag), Duration::from_secs(60)))
        };
        assert!(
            wait_until(Duration::from_secs(10), || open_long_polls(&emu.log()) == 1),
            "{:#?}",
            emu.log()
        );
        emu.set(
            "instance/network-interfaces/1/ip-aliases",
            json!(["10.98.1.21/32", "10.98.1.32/28"]),
        )
        .unwrap();
        let Polled { etag, body } = waiting.join().unwrap().unwrap();
        assert_ne!(etag, first.etag);
        let after = Snapshot::parse(&body).unwrap();
        assert_eq!(changes(&before, &after).changed, [MAC1.parse().unwrap()]);
        assert_eq!(open_long_polls(&emu.log()), 0);
        // Three long polls, each counted once (held ones log `open`, then
        // `200:held`).
        assert_eq!(long_polls(&emu.log()), 3, "{:#?}", emu.log());
        let statuses: Vec<String> = emu
            .log()
            .iter()
            .filter(|e| e.path.contains("wait_for_change"))
            .map(|e| e.status.clone())
            .collect();
        assert_eq!(statuses, ["200", "open", "200:held", "open", "200:held"]);
    }

    #[test]
    fn the_control_path_refuses_what_it_cannot_set() {
        let emu =
            GceEmulator::start("127.0.0.1:0".parse().unwrap(), Config::new(world_tree())).unwrap();
        assert!(emu.set("", json!(1)).is_err());
        assert!(
            emu.set("instance/network-interfaces/7/ip", json!("x"))
                .is_err()
        );
        assert!(emu.set("instance/network-interfaces/3", json!({})).is_err());
        emu.set(
            "instance/network-interfaces/2",
            json!({"mac": "42:01:0a:00:02:1e"}),
        )
        .unwrap();
        let p = client(&emu)
            .poll_interfaces(None, Duration::from_secs(5))
            .unwrap();
        assert!(p.body.contains("42:01:0a:00:02:1e"), "{}", p.body);
    }
}

#[cfg(feature = "netns")]
mod world {
    use std::process::{Child, Stdio};
    use std::time::{Duration, Instant};

    use leasehook_tests::gce_emulator::{long_polls, open_long_polls, read_log};
    use leasehook_tests::netns::{leasehook_bin, terminate};
    use leasehook_tests::world::{
        CloudDhcp, MAC1, MetadataService, World, WorldOptions, wait_until,
    };
    use serde_json::json;

    const NICS: &str = "/computeMetadata/v1/instance/network-interfaces";
    const NEW_RULE: &str = "10001 from 10.98.1.32/28 lookup 10001 proto 176";

    fn options(scenario: &serde_json::Value) -> WorldOptions {
        WorldOptions {
            tree: None,
            dhcp: CloudDhcp::Gce,
            metadata: Some(MetadataService {
                cloud: "gce".to_owned(),
                args: vec![
                    "--bind".to_owned(),
                    "169.254.169.254:80".to_owned(),
                    "--scenario".to_owned(),
                    scenario.to_string(),
                ],
                addresses: Vec::new(),
            }),
            extra_hook_env: vec![("LEASEHOOK_PROVIDER".to_owned(), "gce".to_owned())],
            ..WorldOptions::default()
        }
    }

    /// The GCE world (Debian's option-121 exit hook beside leasehook's), both
    /// NICs bound and recorded.
    fn bound(tag: &str, scenario: &serde_json::Value) -> World {
        let mut w = World::with_option_121_hook(tag, &options(scenario));
        w.bind_both_routed();
        w
    }

    fn watch(w: &World) -> Child {
        let mut cmd = w.inst.command(leasehook_bin().to_str().unwrap());
        cmd.envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.arg("watch")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    }

    /// SIGTERM; how long it took to exit, its success and its log.
    fn stop(watch: Child) -> (Duration, bool, String) {
        let (status, took, log) = terminate(watch);
        (took, status.success(), log)
    }

    fn gce_log(w: &World) -> Vec<leasehook_tests::gce_emulator::LogEntry> {
        read_log(&w.dir.0.join("gce.log"))
    }

    /// The NIC list asked without waiting (the hooks', `refresh`'s).
    fn plain_asks(w: &World) -> usize {
        gce_log(w)
            .iter()
            .filter(|e| e.path.starts_with(NICS) && !e.path.contains("wait_for_change"))
            .count()
    }

    fn set_aliases(w: &World, aliases: &serde_json::Value) {
        w.gce_set("instance/network-interfaces/1/ip-aliases", aliases);
    }

    fn refresh_v(w: &World) -> String {
        let out = w
            .inst
            .command(leasehook_bin().to_str().unwrap())
            .envs(w.hook_env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(["refresh", "-v"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn an_alias_range_added_to_the_metadata_is_routed_by_the_long_poll() {
        let w = bound("gcepoll-alias", &json!({}));
        let watcher = watch(&w);
        // The first answer, then one long poll held.
        assert!(
            wait_until(Duration::from_secs(20), || open_long_polls(&gce_log(&w))
                == 1),
            "{:#?}",
            gce_log(&w)
        );
        // Idle: still that one request, no new one.
        let polls = long_polls(&gce_log(&w));
        std::thread::sleep(Duration::from_secs(4));
        let log = gce_log(&w);
        assert_eq!(long_polls(&log), polls, "{log:#?}");
        assert_eq!(open_long_polls(&log), 1, "{log:#?}");
        assert_eq!(polls, 1, "{log:#?}");
        // The timer's refresh leaves eth1 to the follower: no request for it.
        let asked = plain_asks(&w);
        let out = refresh_v(&w);
        assert!(
            out.contains("eth1: unchanged (followed live by `leasehook watch`"),
            "{out}"
        );
        assert_eq!(plain_asks(&w), asked, "{:#?}", gce_log(&w));
        // An alias range appears on nic1: routed with no refresh run.
        assert!(!w.our_rules().iter().any(|r| r == NEW_RULE));
        let t = Instant::now();
        set_aliases(&w, &json!(["10.98.1.21/32", "10.98.1.32/28"]));
        let routed = wait_until(Duration::from_secs(30), || {
            w.our_rules().iter().any(|r| r == NEW_RULE)
        });
        let took = t.elapsed();
        let (stopped, ok, log) = stop(watcher);
        assert!(routed, "{:#?}\n{log}", w.our_rules());
        eprintln!("alias range routed {took:?} after the metadata changed; stopped in {stopped:?}");
        assert!(ok, "{log}");
        assert!(
            log.contains(&format!("GCE metadata: changed {MAC1}")),
            "{log}"
        );
        assert!(!log.contains("panicked"), "{log}");
        // Stopped: the heartbeat is gone and the timer asks again.
        assert!(!w.root.join("run/leasehook/gce-live.json").exists());
        let asked = plain_asks(&w);
        let out = refresh_v(&w);
        assert!(!out.contains("followed live"), "{out}");
        assert!(plain_asks(&w) > asked, "{:#?}", gce_log(&w));
    }

    #[test]
    fn errors_from_the_long_poll_are_logged_and_backed_off() {
        let on_long_polls = |r: serde_json::Value| {
            let mut r = r;
            r["path"] = json!(NICS);
            r["query"] = json!("wait_for_change=true");
            r
        };
        let scenario = json!({"rules": [
            on_long_polls(json!({"status": 500, "count": 2})),
            on_long_polls(json!({"status": 200, "body": "[{\"mac\": 7}]", "count": 1})),
        ]});
        let w = bound("gcepoll-fault", &scenario);
        let watcher = watch(&w);
        // 500, 500, garbage, then held.
        assert!(
            wait_until(Duration::from_secs(30), || open_long_polls(&gce_log(&w))
                == 1),
            "{:#?}",
            gce_log(&w)
        );
        set_aliases(&w, &json!(["10.98.1.21/32", "10.98.1.32/28"]));
        let routed = wait_until(Duration::from_secs(30), || {
            w.our_rules().iter().any(|r| r == NEW_RULE)
        });
        let (_, ok, log) = stop(watcher);
        assert!(routed, "{log}");
        assert!(ok, "{log}");
        assert!(!log.contains("panicked"), "{log}");
        for want in [
            "the long poll failed:",
            "HTTP 500",
            "asking again in 1 s",
            "asking again in 2 s",
            "network-interfaces/0/mac",
            "asking again in 4 s",
            "the long poll is live",
        ] {
            assert!(log.contains(want), "{want}:\n{log}");
        }
        // Two 500s and the garbage, then the held one: the pause after each
        // error doubles (1 s, 2 s, 4 s; lower bounds only).
        let log = gce_log(&w);
        let n = long_polls(&log);
        assert!((4..=5).contains(&n), "{n}: {log:#?}");
        let t: Vec<f64> = log
            .iter()
            .filter(|e| e.path.contains("wait_for_change") && !e.status.ends_with(":held"))
            .map(|e| e.t)
            .collect();
        for (i, least) in [0.9, 1.9, 3.9].into_iter().enumerate() {
            assert!(t[i + 1] - t[i] >= least, "pause {i}: {t:?}");
        }
    }
}
