// SPDX-License-Identifier: Apache-2.0
//! The boot part of `leasehook status`: which datasource is in use, whether its
//! data came from the cache, and since when — read from this boot's `boot.json`.

use std::fmt::Write as _;
use std::path::Path;

use leasehook_core::boot::state::{self, BootState, Verdict};
use serde_json::{Value, json};

use crate::init_cmd::when;

fn current(root: &Path) -> Option<BootState> {
    state::read(root, state::boot_id(root).as_deref())
}

/// Lines for the text status.
pub(crate) fn text(root: &Path) -> String {
    let mut out = String::new();
    let Some(st) = current(root) else {
        out.push_str("datasource: unknown (leasehook init has not run this boot)\n");
        return out;
    };
    let from_cache = st
        .origin
        .is_some_and(leasehook_core::boot::Origin::from_cache);
    let _ = match (st.verdict, st.datasource, &st.instance_id, st.origin) {
        (Verdict::Found, Some(ds), Some(id), Some(origin)) => writeln!(
            out,
            "datasource: {ds} {id:?}: {origin}; in use since {} ({} stage)",
            when(st.decided_at_ms),
            st.stage
        ),
        (Verdict::NeedsNetwork, ..) => writeln!(
            out,
            "datasource: not decided yet (the local stage left it to the network stage at {})",
            when(st.decided_at_ms)
        ),
        (Verdict::Disabled, ..) => writeln!(out, "datasource: none (disabled)"),
        _ => writeln!(
            out,
            "datasource: None (no datasource answered and the cache could not stand in) since {}",
            when(st.decided_at_ms)
        ),
    };
    if from_cache && let Some(ms) = st.fetched_at_ms {
        let _ = writeln!(out, "  from the cache: data fetched {}", when(ms));
    }
    if !st.cache.is_empty() {
        let _ = writeln!(out, "  cache: {}", st.cache);
    }
    for e in &st.cache_errors {
        let _ = writeln!(
            out,
            "  cache NOT written: {e} (the next boot cannot fall back to it)"
        );
    }
    out
}

/// The `datasource` member of the JSON status.
pub(crate) fn json(root: &Path) -> Value {
    let Some(st) = current(root) else {
        return Value::Null;
    };
    json!({
        "verdict": st.verdict,
        "stage": st.stage,
        "datasource": st.datasource,
        "instance_id": st.instance_id,
        "origin": st.origin,
        "from_cache": st.origin.is_some_and(leasehook_core::boot::Origin::from_cache),
        "since_ms": st.decided_at_ms,
        "fetched_at_ms": st.fetched_at_ms,
        "cache": st.cache,
        "new_instance": st.new_instance,
        "cache_errors": st.cache_errors,
    })
}
