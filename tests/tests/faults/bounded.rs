//! Bounded hooks (issue 18, items 5-10): no request past the budget, nothing
//! planted under the root opened blocking or followed, a lock held by a stopped
//! worker, a full run folder, a configuration that is not leasehook's, a caller
//! reading the shim's standard error to its end.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use leasehook_tests::clouds::Cloud;
use leasehook_tests::netns::run;
use leasehook_tests::world::{MAC1, default_tree};
use serde_json::{Value, json};

use crate::disk::Tmpfs;
use crate::instance::{
    Imds, Instance, STATE, THREE_IPS, WITH_22, renew, renew_healthy, text, tree_with,
    tree_without_eth1_subnet,
};
use crate::matrix::{FileWant, Kernel, Row, Seen};

matrix! {
    #[cfg(feature = "netns")]
    bound_token_dance => Row {
        name: "bound_token_dance",
        fault: "IMDS slow and refusing the cached token: every answer takes 1.5 s, the stale token gets a 401 (401, token PUT, GET again), the budget is 1 s",
        does: "the token dance is one request: all of it ends within one request timeout (2 s), so the DHCP client is held at most the budget plus 2 s; keeps the last applied state",
        log: "timed out (whole request",
        max_secs: 3.5,
        run: || renew(Cloud::Ec2, &Imds::Scenario(json!({"rules": [{"path": "/latest", "delay": 1.5}]}))),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_no_request_after_budget => Row {
        name: "bound_no_request_after_budget",
        fault: "IMDS answers 500 after 0.9 s, then never answers; the budget is 1 s",
        does: "no request starts once the budget is spent (nor after a pause that would end after it): one request, then the last applied state is kept",
        log: "HTTP 500; keeping the last applied state",
        not_in_log: "timed out",
        max_secs: 2.0,
        run: run_no_request_after_budget,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_fifo_generation => Row {
        name: "bound_fifo_generation",
        fault: "a FIFO at `run/leasehook/generation/eth1` (RENEW)",
        does: "never opens it blocking: the counter is unreadable, so it starts again and the FIFO is replaced by a file; the event applies",
        files: &[FileWant::Holds("run/leasehook/generation/eth1", "1")],
        log: "generation/eth1\": is a special file; the event counter starts again",
        run: || run_planted(Plant::Fifo("run/leasehook/generation/eth1")),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_fifo_lock => Row {
        name: "bound_fifo_lock",
        fault: "a FIFO at `run/leasehook/lock/eth1.lock` (RENEW)",
        does: "refuses the lock file at once with an error naming it (a lock it cannot trust is never taken or replaced); nothing changed",
        exit: Some(1),
        log: "lock/eth1.lock\": is a special file",
        run: || run_planted(Plant::Fifo("run/leasehook/lock/eth1.lock")),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_fifo_refreshed_stamp => Row {
        name: "bound_fifo_refreshed_stamp",
        fault: "a FIFO at `run/leasehook/refreshed/eth1`, then `leasehook refresh`",
        does: "never opens the stamp blocking: it is refused (logged) and the refresh goes on; IMDS agrees, so nothing changes",
        log: "refreshed/eth1\": is a special file",
        run: run_fifo_refreshed_stamp,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_symlinked_run_dir => Row {
        name: "bound_symlinked_run_dir",
        fault: "`run/leasehook` is a symlink to another folder (RENEW)",
        does: "refuses it with an error naming it; nothing is read or written through it, nothing changed",
        exit: Some(1),
        files: &[FileWant::Absent("outside/lock"), FileWant::Absent("outside/generation"), FileWant::Absent("outside/iface")],
        log: "run/leasehook\": is a symlink, which is never followed; refusing to use it",
        run: || run_planted(Plant::SymlinkedRunDir),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_huge_state => Row {
        name: "bound_huge_state",
        fault: "`run/leasehook/iface/eth1.json` is 1.5 GB (sparse) and `run/leasehook/generation/eth1` a symlink to `/dev/zero` (RENEW)",
        does: "reads neither: the state file is refused by its size and set aside, the link is not followed; the kernel, observed, needs no change, and the state is recorded again",
        files: &[
            FileWant::Holds(STATE, "10.98.1.21/32"),
            FileWant::Holds("run/leasehook/iface/eth1.json.corrupt", ""),
        ],
        log: "is larger than 4194304 bytes; set aside",
        run: || run_planted(Plant::HugeState),
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_lock_held_by_stopped_worker => Row {
        name: "bound_lock_held_by_stopped_worker",
        fault: "the interface's lock is held by a SIGSTOPped worker (RENEW with a new address; synchronous budget 1 s, total 15 s)",
        does: "signals the worker once, waits for the lock for the synchronous budget, then queues the event for a worker; once the lock is free the worker applies the new address",
        kernel: WITH_22,
        files: &[FileWant::Holds(STATE, "10.98.1.22/32"), FileWant::Absent("run/leasehook/pending/eth1.json")],
        log: "the interface's lock is still held after 1000 ms",
        max_secs: 2.0,
        run: run_lock_held_by_stopped_worker,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_release_run_dir_full => Row {
        name: "bound_release_run_dir_full",
        fault: "`run/leasehook` full (a full tmpfs) at RELEASE",
        does: "the event counter cannot be written, which is logged; the removal goes on: every object of the lease and its state file are removed",
        kernel: Kernel::NONE,
        files: &[FileWant::Absent(STATE)],
        log: "No space left on device (os error 28); going on without the event counter",
        run: run_release_run_dir_full,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_config_not_yaml => Row {
        name: "bound_config_not_yaml",
        fault: "`LEASEHOOK_CONFIG` names a file that is not leasehook's YAML (a copy of a shadow file)",
        does: "refuses the configuration, quoting only the position and what is wrong, never the file's content; nothing done",
        exit: Some(2),
        log: "an unknown field (not shown: it is not a key name)",
        not_in_log: "FAKEHASH",
        run: run_config_not_yaml,
        ..Row::KEEPS
    };
    #[cfg(feature = "netns")]
    bound_stderr_read_to_end => Row {
        name: "bound_stderr_read_to_end",
        fault: "the caller reads the shim's standard error (a pipe) to its end while a worker waits (BOUND on a new ENI whose subnet IMDS never serves; total budget 15 s)",
        does: "the worker does not inherit the pipe: the caller's read ends when the shim exits, after the synchronous budget",
        kernel: Kernel::NONE,
        files: &[FileWant::Holds("run/leasehook/pending/eth1.json", "\"pid\":")],
        log: "finishes the wait",
        run: run_stderr_read_to_end,
        ..Row::KEEPS
    };
}

/// A good BOUND, then a RENEW against IMDS that answers 500 after 0.9 s and then
/// never answers: the request a pause would have started at the budget's end
/// would hang for its whole timeout. The emulator must see exactly one request.
fn run_no_request_after_budget() -> Seen {
    let mut i = Instance::new("fbudget");
    i.bound();
    i.faulted(|i| {
        let seen_before = std::fs::read_to_string(Cloud::Ec2.log(&i.dir.0))
            .unwrap_or_default()
            .lines()
            .count();
        let url = i.start_imds(
            &default_tree(),
            &Imds::Scenario(json!({"rules": [
                {"path": "/latest", "until": 0.9, "delay": 0.9, "status": 500},
                {"path": "/latest", "from": 0.9, "action": "drop"}
            ]})),
        );
        let (out, elapsed) = i.shim("RENEW", &url);
        let log = std::fs::read_to_string(Cloud::Ec2.log(&i.dir.0)).unwrap_or_default();
        let requests: Vec<&str> = log.lines().skip(seen_before).collect();
        assert_eq!(
            requests.len(),
            1,
            "a request started after the budget: {requests:?}\n{}",
            text(&out)
        );
        (out, elapsed)
    })
}

/// What a row plants under the root after a good BOUND.
#[derive(Clone, Copy)]
enum Plant {
    Fifo(&'static str),
    SymlinkedRunDir,
    HugeState,
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    run(Command::new("mkfifo").arg(path));
}

/// A good BOUND, the plant, then a RENEW with a healthy IMDS.
fn run_planted(plant: Plant) -> Seen {
    let mut i = Instance::new("fplant");
    i.bound();
    match plant {
        Plant::Fifo(rel) => mkfifo(&i.root.join(rel)),
        Plant::SymlinkedRunDir => {
            let run_dir = i.root.join("run/leasehook");
            let outside = i.root.join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::rename(&run_dir, i.root.join("run/moved")).unwrap();
            symlink(&outside, &run_dir).unwrap();
        }
        Plant::HugeState => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(i.root.join(STATE))
                .unwrap();
            f.set_len(1_500_000_000).unwrap();
            let g = i.root.join("run/leasehook/generation/eth1");
            std::fs::remove_file(&g).unwrap();
            symlink("/dev/zero", &g).unwrap();
        }
    }
    i.faulted(|i| renew_healthy(i, Cloud::Ec2))
}

/// A good BOUND, a FIFO where `refresh` keeps eth1's stamp, then `leasehook
/// refresh` with a healthy IMDS (issue 18, item 6: it hung there, holding the
/// interface's lock).
fn run_fifo_refreshed_stamp() -> Seen {
    let mut i = Instance::new("frefstamp");
    i.bound();
    mkfifo(&i.root.join("run/leasehook/refreshed/eth1"));
    i.faulted(|i| {
        let url = i.start(Cloud::Ec2, &Imds::healthy());
        i.refresh_env(
            Cloud::Ec2,
            &url,
            &[("LEASEHOOK_IMDS_BIND_INTERFACE", "false")],
        )
    })
}

/// A process that looks like eth1's waiting worker (`... --worker eth1` in its
/// command line), holds eth1's lock, is named by the hand-over and is stopped.
pub(crate) struct StoppedWorker(Child, u32);

impl StoppedWorker {
    fn start(i: &Instance) -> Self {
        let lock = i.root.join("run/leasehook/lock/eth1.lock");
        // `-o`: flock holds the lock, its child (no process of its own below
        // it: a busy loop, stopped at once) does not, so the lock goes with them.
        let child = Command::new("flock")
            .arg("-o")
            .arg(&lock)
            .args(["sh", "-c", "while :; do :; done", "--worker", "eth1"])
            .spawn()
            .unwrap();
        // flock runs sh as its child: the pid to name is sh's.
        let flock_pid = child.id();
        let until = Instant::now() + Duration::from_secs(5);
        let sh = loop {
            let kids =
                std::fs::read_to_string(format!("/proc/{flock_pid}/task/{flock_pid}/children"))
                    .unwrap_or_default();
            if let Some(pid) = kids.split_whitespace().next() {
                break pid.parse::<u32>().unwrap();
            }
            assert!(Instant::now() < until, "flock did not start its child");
            std::thread::sleep(Duration::from_millis(10));
        };
        let env: leasehook_core::event::Env = [
            ("reason", "BOUND"),
            ("interface", "eth1"),
            ("new_ip_address", "10.98.1.20"),
            ("new_subnet_mask", "255.255.255.0"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let event = leasehook_core::event::dhclient::parse(&env).unwrap();
        let pending = json!({"generation": 1, "pid": sh, "event": event, "deadline_ms": 0});
        let dir = i.root.join("run/leasehook/pending");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("eth1.json"), pending.to_string()).unwrap();
        run(Command::new("kill").args(["-STOP", &sh.to_string()]));
        Self(child, sh)
    }
}

impl Drop for StoppedWorker {
    fn drop(&mut self) {
        // Continued, the worker takes the SIGTERM the hook sent it.
        let _ = Command::new("kill")
            .args(["-CONT", &self.1.to_string()])
            .status();
        std::thread::sleep(Duration::from_millis(100));
        let _ = Command::new("kill")
            .args(["-KILL", &self.1.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (at most `secs`) until no hand-over is pending for eth1 and no worker
/// for it runs.
fn wait_for_worker(root: &Path, secs: u64) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        // The hand-over goes before the worker's writes; its last-event record
        // (for `leasehook status`), no longer "deferred", comes after them all.
        let record = std::fs::read_to_string(root.join("run/leasehook/last-event/eth1.json"))
            .unwrap_or_default();
        if !root.join("run/leasehook/pending/eth1.json").exists()
            && !record.contains("\"outcome\":\"deferred\"")
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn run_lock_held_by_stopped_worker() -> Seen {
    let mut i = Instance::new("fstop");
    i.bound();
    let holder = StoppedWorker::start(&i);
    i.faulted(|i| {
        let url = i.start_imds(
            &tree_with(&[(MAC1, "local-ipv4s", THREE_IPS)]),
            &Imds::healthy(),
        );
        let (out, elapsed) = i.shim_env("RENEW", &url, &[("LEASEHOOK_IMDS_BUDGET_S", "15")]);
        let log = text(&out);
        assert_eq!(
            log.matches("stopped the waiting worker").count(),
            1,
            "one line per stopped worker:\n{log}"
        );
        let pending =
            std::fs::read_to_string(i.root.join("run/leasehook/pending/eth1.json")).unwrap();
        assert!(pending.contains("\"queued\":true"), "{pending}");
        // The stopped worker continues, takes its SIGTERM and lets the lock go; the
        // queued worker then takes the lock and applies.
        drop(holder);
        if !wait_for_worker(&i.root, 12) {
            let pending = std::fs::read_to_string(i.root.join("run/leasehook/pending/eth1.json"))
                .unwrap_or_default();
            let ps = Command::new("ps")
                .args(["-eo", "pid,stat,args"])
                .output()
                .unwrap();
            let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
            let ps: Vec<&str> = ps
                .lines()
                .filter(|l| l.contains("--worker") || l.contains("flock"))
                .collect();
            panic!("the queued worker did not finish: {pending}\n{ps:#?}\n{log}");
        }
        (out, elapsed)
    })
}

fn run_release_run_dir_full() -> Seen {
    let mut i = Instance::new("frelfull");
    i.bound();
    let run_dir = i.root.join("run/leasehook");
    let saved = i.dir.0.join("saved-run");
    run(Command::new("cp").arg("-a").arg(&run_dir).arg(&saved));
    let fs = Tmpfs::mount(&run_dir, "64k");
    run(Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", saved.display()))
        .arg(&run_dir));
    fs.fill();
    let mut seen = i.faulted(|i| {
        let url = i.start(Cloud::Ec2, &Imds::healthy());
        i.shim("RELEASE", &url)
    });
    // The mount goes first, then the namespace and folder.
    seen.keep.insert(0, Box::new(fs));
    seen
}

fn run_config_not_yaml() -> Seen {
    let mut i = Instance::new("fshadow");
    i.bound();
    let shadow = i.dir.file(
        "shadow",
        "root:$y$j9T$FAKEHASHsaltsalt$FAKEHASHvaluevaluevalue:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
    );
    i.faulted(|i| {
        let url = i.start(Cloud::Ec2, &Imds::healthy());
        let shadow = shadow.display().to_string();
        i.shim_env("RENEW", &url, &[("LEASEHOOK_CONFIG", &shadow)])
    })
}

/// Kills the worker a hand-over names when dropped (before the namespace goes).
struct KillWorker(PathBuf);

impl Drop for KillWorker {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["pid"].as_u64());
        if let Some(pid) = pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn run_stderr_read_to_end() -> Seen {
    let mut seen = Instance::new("fstderr").faulted(|i| {
        let url = i.start_imds(&tree_without_eth1_subnet(), &Imds::healthy());
        // `output()` reads standard error to its end: a worker holding the pipe would
        // keep it open for the whole 15 s budget.
        i.shim_env("BOUND", &url, &[("LEASEHOOK_IMDS_BUDGET_S", "15")])
    });
    let kill = KillWorker(seen.root.join("run/leasehook/pending/eth1.json"));
    seen.keep.insert(0, Box::new(kill));
    seen
}
