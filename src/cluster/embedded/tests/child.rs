//! Tests over a real second process: this test binary run again on one
//! ignored test ([`child`]), told what to do by an environment variable.
//! It writes, or holds the store open, and says so on its stdout.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::*;

/// What the child does, and where: `write:<dir>`, `hold:<dir>` or `fill:<dir>`.
const ROLE: &str = "IDGATE_EMBEDDED_CHILD";

/// Concurrent writers in the writing child: commits carry several writes.
const WRITERS: u32 = 8;

/// Starts this test binary again as the child, in `role`.
fn spawn(role: &str) -> Child {
    child_command(Command::new(std::env::current_exe().unwrap()), role)
}

/// Starts the child in `role` with files limited to `blocks` blocks of
/// the shell's `ulimit -f`: a disk that fills, whoever runs the test
/// (root is not spared, as it would be by permissions or quotas).
fn spawn_with_file_limit(role: &str, blocks: u32) -> Child {
    let mut shell = Command::new("/bin/sh");
    shell
        .arg("-c")
        .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
        .arg(std::env::current_exe().unwrap());
    child_command(shell, role)
}

fn child_command(mut command: Command, role: &str) -> Child {
    command
        .args([
            "cluster::embedded::tests::child::child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn child_config(dir: &str) -> StoreConfig {
    StoreConfig {
        path: dir.into(),
        ..StoreConfig::default()
    }
}

/// The child's body; does nothing unless run by a test below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of the tests below, run by them"]
async fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let (what, dir) = role.split_once(':').unwrap();
    if what == "fill" {
        return fill(dir).await;
    }
    let store = Embedded::open(&child_config(dir), None).unwrap();
    match what {
        "hold" => {
            println!("open");
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        "write" => {
            let writers = (0..WRITERS).map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in (w..).step_by(WRITERS as usize) {
                        let key = i.to_be_bytes();
                        let value = format!("secret-{i}");
                        store
                            .insert(JOURNEYS, &key, value.as_bytes(), in_an_hour())
                            .await
                            .unwrap();
                        // Acknowledged only once durable, as a caller would be.
                        println!("ack {i}");
                    }
                })
            });
            futures_util::future::join_all(writers).await;
        }
        other => panic!("unknown role {other}"),
    }
}

/// The filling child: writes until refused, and says how it was refused
/// (`open <error>` or `write <error>`, then `next <error>` for the write
/// after).
async fn fill(dir: &str) {
    // Past the file size limit a write fails with EFBIG, once the signal
    // the kernel sends with it no longer ends the process.
    let _handled =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(25)).unwrap();
    let store = match Embedded::open(&child_config(dir), None) {
        Ok(store) => store,
        Err(e) => return println!("open {e:?}"),
    };
    let value = vec![7u8; 64 * 1024];
    for i in 0u32.. {
        if let Err(e) = store
            .insert(JOURNEYS, &i.to_be_bytes(), &value, in_an_hour())
            .await
        {
            println!("write {e:?}");
            let next = store.insert(JOURNEYS, b"next", b"v", in_an_hour()).await;
            return println!("next {:?}", next.err());
        }
    }
}

/// The lines of a child's stdout that start with `prefix`, the prefix cut.
fn said(child: Child, prefix: &str) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix(prefix).map(str::to_owned))
        .collect()
}

#[test]
fn a_full_disk_fails_the_start_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data").display().to_string();
    // Smaller than a new store file.
    let open = said(spawn_with_file_limit(&format!("fill:{data}"), 16), "open ");
    assert_eq!(open.len(), 1, "the open was refused");
    assert!(open[0].starts_with("DiskFull"), "{open:?}");
    assert!(open[0].contains(&data), "{open:?}");
}

#[test]
fn a_disk_that_fills_refuses_the_write_and_every_write_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data").display().to_string();
    let child = spawn_with_file_limit(&format!("fill:{data}"), 8192);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {text:?}"))
            .to_owned()
    };
    let (write, next) = (line("write "), line("next "));
    assert!(write.starts_with("DiskFull"), "{write}");
    assert!(write.contains(&data), "{write}");
    // Nothing is written on a file in an unknown state until it is reopened.
    assert!(next.starts_with("Some(Halted"), "{next}");
    // Reopened (the disk has room again), every acknowledged record is there.
    let store = Embedded::open(&child_config(&data), None).unwrap();
    assert!(store.count(JOURNEYS, b"", usize::MAX).unwrap() > 0);
}

#[test]
fn every_acknowledged_write_survives_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data").display().to_string();
    for round in 0..3 {
        let mut child = spawn(&format!("write:{data}"));
        let mut acked = Vec::new();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Killed at a different point each round, writes in flight.
        for line in lines {
            let line = line.unwrap();
            if let Some(i) = line.strip_prefix("ack ") {
                acked.push(i.parse::<u32>().unwrap());
            }
            if acked.len() >= 150 + round * 97 {
                child.kill().unwrap();
                break;
            }
        }
        child.wait().unwrap();
        assert!(
            acked.len() >= 150,
            "round {round}: the child wrote too little"
        );
        let store = Embedded::open(&child_config(&data), None).unwrap();
        for i in &acked {
            let record = store.get(JOURNEYS, &i.to_be_bytes()).unwrap();
            assert_eq!(
                value(record),
                Some(format!("secret-{i}").into_bytes()),
                "round {round}: acknowledged record {i} lost"
            );
        }
        // The next round starts over the same keys: they are taken.
        drop(store);
        std::fs::remove_dir_all(&data).unwrap();
    }
}

#[test]
fn a_second_process_on_one_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data").display().to_string();
    let mut child = spawn(&format!("hold:{data}"));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.unwrap() == "open"),
        "the child opened the store"
    );
    let e = Embedded::open(&child_config(&data), None).unwrap_err();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(matches!(e, StoreError::Locked { .. }), "{e:?}");
    assert!(e.to_string().contains(&data), "{e}");
    // Once the holder is gone, so is its lock.
    Embedded::open(&child_config(&data), None).unwrap();
}
