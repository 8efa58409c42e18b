//! The `tpukit` program answers `--help` and `--version` on every command and subcommand, and
//! refuses what it does not know with its usage.

use std::process::{Command, Output};

fn tpukit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpukit"))
        .args(args)
        .output()
        .expect("the tpukit binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every command, and the first line its `--help` starts with.
const COMMANDS: [(&[&str], &str); 7] = [
    (&[], "usage: tpukit COMMAND [--help] [--version]"),
    (&["list"], "usage: tpukit list"),
    (&["kernels"], "usage: tpukit kernels [--dtype f32|bf16]"),
    (&["lower"], "usage: tpukit lower NAME --shape"),
    (
        &["bundle"],
        "usage: tpukit bundle build [-o FILE] [--portable] [--no-tpu]\n       tpukit bundle inspect",
    ),
    (
        &["bundle", "build"],
        "usage: tpukit bundle build [-o FILE] [--portable] [--no-tpu]\n  compile",
    ),
    (&["bundle", "inspect"], "usage: tpukit bundle inspect FILE"),
];

#[test]
fn every_command_answers_help() {
    for (command, usage) in COMMANDS {
        for flag in ["--help", "-h"] {
            let out = tpukit(&[command, &[flag]].concat());
            assert!(out.status.success(), "{command:?} {flag}: {}", stderr(&out));
            assert!(
                stdout(&out).starts_with(usage),
                "{command:?} {flag}:\n{}",
                stdout(&out)
            );
            assert_eq!(stderr(&out), "");
        }
    }
}

#[test]
fn help_wins_over_the_other_arguments() {
    // what would otherwise be parsed (and fail, or build a bundle) is not
    let out = tpukit(&["bundle", "build", "-o", "/nonexistent/x.tpkb", "--help"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("usage: tpukit bundle build"));
    let out = tpukit(&["lower", "softmax", "--bogus", "-h"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("usage: tpukit lower"));
}

#[test]
fn every_command_answers_version() {
    let expected = format!("tpukit {}\n", env!("CARGO_PKG_VERSION"));
    for (command, _) in COMMANDS {
        for flag in ["--version", "-V"] {
            let out = tpukit(&[command, &[flag]].concat());
            assert!(out.status.success(), "{command:?} {flag}");
            assert_eq!(stdout(&out), expected, "{command:?} {flag}");
        }
    }
}

#[test]
fn unknown_options_are_refused_with_the_usage() {
    let out = tpukit(&["bundle", "build", "--bogus"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown option `--bogus`"));
    assert!(stderr(&out).contains("usage: tpukit bundle build"));
    let out = tpukit(&["lower", "softmax", "--bogus"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("usage: tpukit lower"));
    let out = tpukit(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("usage: tpukit COMMAND"));
    let out = tpukit(&["list", "extra"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("list takes no arguments"));
}

#[test]
fn list_still_lists() {
    let out = tpukit(&["list"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("catalog:\n"));
    assert!(stdout(&out).contains("\ntpublas:\n"));
}
