// SPDX-License-Identifier: Apache-2.0
//! Performs IO: `leasehook-demo`, the README's main command (run through
//! `scripts/demo.sh`, which installs what it needs and cleans up after Ctrl-C).
//!
//! It builds a throwaway world of network namespaces (`leasehook_tests::world`): a
//! VPC router with dnsmasq, the IMDS emulator at 169.254.169.254 and an ENI-like
//! source check, and a two-NIC instance where real dhclient runs leasehook's exit
//! hook. It shows the rules and routes leasehook installs, proves that a request
//! from the secondary address works with them and fails without, and removes
//! everything again.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use leasehook_tests::netns::{leasehook_bin, run};
use leasehook_tests::world::{World, WorldOptions, wait_until};

fn indent(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .fold(String::new(), |mut out, l| {
            let _ = writeln!(out, "    {l}");
            out
        })
}

fn demo() -> Result<(), String> {
    println!("leasehook demo: an instance with two NICs in a VPC made of network namespaces");
    println!(
        "  router: dnsmasq (10.98.0.0/24, 10.98.1.0/24), IMDS at 169.254.169.254, echo host 198.51.100.10,"
    );
    println!(
        "          and rp_filter=1, which drops packets from the wrong subnet as an ENI's source check does"
    );
    println!(
        "  instance: eth0 (device 0) and eth1 (device 1, addresses 10.98.1.20 and 10.98.1.21), real dhclient"
    );
    println!("            with leasehook's exit hook\n");
    let mut w = World::new("demo", &WorldOptions::default());

    println!("[1] dhclient eth0 (the primary NIC)");
    w.bind("eth0", false);
    println!("    bound 10.98.0.10; the primary gets no policy rules\n");

    println!("[2] dhclient eth1 (the secondary NIC)");
    let t = Instant::now();
    w.dhclient_start("eth1", false);
    let installed = wait_until(Duration::from_secs(30), || {
        w.our_rules().len() == 2 && w.our_routes().len() == 2
    });
    if !installed {
        return Err(format!(
            "leasehook did not install the rules:\n{}",
            w.log("eth1", false)
        ));
    }
    println!(
        "    lease to rules installed in {} ms; leasehook's rules (ip rule):",
        t.elapsed().as_millis()
    );
    print!("{}", indent(&w.inst.ip(&["rule"])));
    println!("    table 10001 (ip route show table 10001):");
    print!(
        "{}",
        indent(&w.inst.ip(&["route", "show", "table", "10001"]))
    );
    println!("    addresses on eth1:");
    print!(
        "{}",
        indent(&w.inst.ip(&["-br", "address", "show", "eth1"]))
    );
    let root = w.root.display().to_string();
    let bin = leasehook_bin().display().to_string();
    println!("    leasehook status:");
    print!(
        "{}",
        indent(&String::from_utf8_lossy(
            &run(w.inst.command(&bin).args(["status", "--root", &root])).stdout
        ))
    );

    println!("\n[3] HTTP request to 198.51.100.10 from the secondary address 10.98.1.21");
    match w.echo_from("10.98.1.21") {
        Some(seen) => println!("    answered; the echo host saw the request come from {seen}"),
        None => return Err("the request from the secondary address failed".to_owned()),
    }

    println!("\n[4] the same request without policy routing (`leasehook flush --iface eth1`)");
    run(w
        .inst
        .command(&bin)
        .args(["flush", "--root", &root, "--iface", "eth1"]));
    match w.echo_from("10.98.1.21") {
        None => println!(
            "    times out: it leaves through eth0, and the VPC drops a 10.98.1.x source there"
        ),
        Some(_) => {
            return Err(
                "the request worked without policy routing: the demo's source check is broken"
                    .to_owned(),
            );
        }
    }
    println!("\ncleaning up (namespaces, dnsmasq, emulator, /etc/netns entries)");
    Ok(())
}

fn main() -> ExitCode {
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasehook-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
