//! The example as `cargo test --workspace` runs it: the binary built with
//! the workspace's features (no second build of DataFusion), run as a user
//! runs it. It checks every answer against the rows computed in Rust and
//! exits non-zero on a mismatch; this test holds it to that.

use std::process::Command;

#[test]
fn every_sql_answer_matches_the_rows_computed_in_rust() {
    let out = Command::new(env!("CARGO_BIN_EXE_datafusion-sql"))
        .args(["--rows", "200000"])
        .output()
        .expect("running datafusion-sql");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "datafusion-sql failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("all answers match the rows computed in Rust"),
        "no confirmation line in:\n{stdout}"
    );
}

#[test]
fn a_bad_argument_is_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_datafusion-sql"))
        .args(["--rows", "0"])
        .output()
        .expect("running datafusion-sql");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rows must be from 1"));
}
