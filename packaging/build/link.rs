// SPDX-License-Identifier: Apache-2.0
//! The build script of the two shipped binaries (`cli/` and `hook/` name it in
//! their `Cargo.toml`): in a release build, links them with identical code folding
//! (`--icf=all`), which merges the many byte-identical functions that generics
//! leave behind (serde's visitors, netlink's message types, sorting). It takes
//! about 190 KB off the two binaries together, at no cost in speed
//! (docs/packaging.md has the numbers). Rust's `x86_64` Linux target links with its
//! own LLD, which has the option; `LEASEHOOK_LINK_ICF=0` leaves it out, for a
//! linker without it (GNU ld). It also leaves out `.eh_frame_hdr`
//! (`--no-eh-frame-hdr`, about 115 KB): the unwinder's index, which nothing
//! shipped uses (`panic = "abort"`; debuggers read `.eh_frame` itself), and which
//! issue 22's two providers needed to stay under 8 MiB (docs/packaging.md). And
//! it drops `.eh_frame` itself (`no-eh-frame.ld`, about 930 KB of the two
//! binaries): without the index no unwinder finds those tables, and nothing
//! shipped unwinds. Tests and debug builds are linked as before.

#[allow(clippy::print_stdout)] // Cargo reads a build script's instructions on standard output.
fn main() {
    println!("cargo::rerun-if-env-changed=LEASEHOOK_LINK_ICF");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let wanted = !std::env::var("LEASEHOOK_LINK_ICF").is_ok_and(|v| v == "0");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && wanted && linux {
        println!("cargo::rustc-link-arg-bins=-Wl,--icf=all");
        println!("cargo::rustc-link-arg-bins=-Wl,--no-eh-frame-hdr");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../packaging/build/no-eh-frame.ld");
        println!("cargo::rerun-if-changed={}", script.display());
        println!("cargo::rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
}
