// SPDX-License-Identifier: Apache-2.0
//! Helpers shared by the fuzz targets: turning raw fuzzer bytes into the shapes
//! leasehook's parsers take (an environment map, several text parts).

use leasehook_core::event::Env;

/// The input as text (lossy: a DHCP client's environment reaches the hooks as
/// bytes, and the shims convert it the same way).
#[must_use]
pub fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// An environment built from `KEY=VALUE` lines, without the checks of
/// `parse_env_dump`: a real environment may hold any key, and a line without `=`
/// is skipped.
#[must_use]
pub fn env_of(text: &str) -> Env {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Splits the input into `n` parts at NUL bytes; missing parts are empty and the
/// last part keeps any further NULs.
#[must_use]
pub fn parts(text: &str, n: usize) -> Vec<String> {
    let mut out: Vec<String> = text.splitn(n, '\0').map(str::to_owned).collect();
    out.resize(n, String::new());
    out
}

/// The first line (without its newline) and the rest.
#[must_use]
pub fn first_line(text: &str) -> (&str, &str) {
    text.split_once('\n').unwrap_or((text, ""))
}
