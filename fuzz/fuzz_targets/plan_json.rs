// SPDX-License-Identifier: Apache-2.0
//! Fuzz target: the plan JSON `leasehook apply --plan` reads (serde of
//! `model::Plan`), then what apply does before netlink: validation against links
//! named as the plan names them, the diff against an empty kernel, and the
//! renderers. A plan that parses must print back to the same plan.
#![no_main]

use leasehook_core::apply::{self, LinkIndex};
use leasehook_core::diff::{self, State};
use leasehook_core::model::Plan;
use leasehook_core::render;
use leasehook_fuzz::text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(plan) = serde_json::from_str::<Plan>(&text(data)) else {
        return;
    };
    let links: LinkIndex = plan
        .interfaces
        .iter()
        .zip(1u32..)
        .map(|(i, n)| (i.name.clone(), n))
        .collect();
    let _ = apply::validate(&plan, &links);
    let _ = diff::diff(&plan, &State::default());
    let _ = render::ip(&plan);
    let _ = render::netplan(&plan);
    let _ = render::networkd(&plan);
    let printed = render::json(&plan);
    let back = serde_json::from_str::<Plan>(&printed);
    assert!(
        matches!(&back, Ok(b) if *b == plan),
        "plan JSON does not round-trip: {printed}"
    );
});
