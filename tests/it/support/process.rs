//! Tests that measure the whole process.

/// Set in the child process that runs one test alone.
const ALONE: &str = "IDGATE_IT_ALONE";

/// For a test that measures the whole process (its RSS), which the tests
/// running beside it in this binary would blur: runs the test named `name`
/// (its path in this binary) alone in a child process of this test binary.
/// Returns true in that child, where the test's body runs; in the parent,
/// waits for the child, asserts it ran the one test and passed, and
/// returns false.
pub fn alone_in_own_process(name: &str) -> bool {
    if std::env::var_os(ALONE).is_some() {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE, name)
        .output()
        .expect("run the test alone");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} alone: {}\n{stdout}\n{stderr}",
        output.status
    );
    print!("{stdout}");
    false
}
