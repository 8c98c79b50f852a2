//! Temporary files and directories that go with their test (`tempfile`,
//! under `$TMPDIR`, named `idgate-test-…`): nothing a test writes stays
//! in the temporary directory after it, passed or failed.

use std::{cell::RefCell, io::Write as _, path::PathBuf};

thread_local! {
    /// Files of [`file`], removed when the thread that made them ends: a
    /// test's own thread (libtest runs each test on a thread of its own)
    /// or a worker of the test's runtime, which ends with it.
    static KEPT: RefCell<Vec<tempfile::TempPath>> = const { RefCell::new(Vec::new()) };
}

/// A directory named `idgate-test-{what}-…`, removed (with its contents)
/// when the value drops.
pub fn dir(what: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("idgate-test-{what}-"))
        .tempdir()
        .expect("a temporary directory")
}

/// A file named `idgate-test-{what}-…` holding `content` (owner-only, as
/// secrets are), removed when the current thread ends, so with its test.
/// For paths that configuration builders keep, where no guard could be
/// held beside them.
pub fn file(what: &str, content: &[u8]) -> PathBuf {
    let mut file = tempfile::Builder::new()
        .prefix(&format!("idgate-test-{what}-"))
        .tempfile()
        .expect("a temporary file");
    file.write_all(content).expect("write the temporary file");
    let path = file.into_temp_path();
    let kept = path.to_path_buf();
    KEPT.with(|k| k.borrow_mut().push(path));
    kept
}

#[test]
fn a_temporary_file_is_removed_when_its_thread_ends() {
    let path = std::thread::spawn(|| {
        let path = file("probe", b"x");
        assert_eq!(std::fs::read(&path).expect("exists meanwhile"), b"x");
        path
    })
    .join()
    .expect("thread");
    assert!(!path.exists(), "{} left behind", path.display());
}
