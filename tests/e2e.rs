//! The end-to-end tests, one binary: each module is one file of `tests/`, run
//! through the real binary against the simulated server (in a pseudo-terminal
//! or headless). One binary is linked once and its tests share the test
//! threads, so a long test (a crash-consistency run, the demo) overlaps the
//! short ones instead of waiting in line. One file's tests:
//! `cargo test --test e2e FILE::`.
//!
//! Their own binaries: the real servers' tests, opt-in and heavy
//! (`cargo test --test real_vllm`, `cargo test --test real_llamacpp`), and
//! the Slurm test (`cargo test --test slurm`), whose cluster of three shards
//! runs alone rather than beside three other tests.
//! A new file of `tests/` is declared here (or as a `[[test]]` of
//! `Cargo.toml`): `every_test_file_is_compiled` below fails until it is.

mod common;
mod pty;
mod simclient;

mod attach;
mod attach_pty;
mod classify;
mod cli;
mod commands_file;
mod corpus;
mod crash_consistency;
mod demo;
mod failures;
mod flood;
mod gpu_fake_nvml;
mod gpu_sources;
mod hardening;
mod layers;
mod llamacpp_shape;
mod loadtest;
mod lying_server;
mod packing;
mod plan_errors;
mod plan_hardening;
mod prepare;
mod report;
mod resume;
mod resume_all;
mod server_clock;
mod shard_dirs;
mod shared_files;
mod short_outputs;
mod sim_faults;
mod sim_http;
mod sim_pacing;
mod sweep_attach_pty;
mod sweep_dir;
mod tokenizer;
mod tui_pty;

/// Every `tests/*.rs` is this binary's module or its own `[[test]]`: a file
/// left out would never be compiled nor run, and nobody would see it.
#[test]
fn every_test_file_is_compiled() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let here = std::fs::read_to_string(root.join("tests/e2e.rs")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for e in std::fs::read_dir(root.join("tests")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(module) = name.strip_suffix(".rs") else {
            continue;
        };
        let declared = here.contains(&format!("\nmod {module};\n"))
            || manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            declared,
            "tests/{name} is neither a module of tests/e2e.rs nor a [[test]] of Cargo.toml"
        );
    }
}
