//! Tests over a real second process: this test binary run again on one
//! ignored test ([`child`]), told what to do by an environment variable.
//! It writes, or holds the store open, and says so on its stdout.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::*;

/// What the child does, and where: `write:<dir>` or `hold:<dir>`.
const ROLE: &str = "IDGATE_EMBEDDED_CHILD";

/// Concurrent writers in the writing child: commits carry several writes.
const WRITERS: u32 = 8;

/// Starts this test binary again as the child, in `role`.
fn spawn(role: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
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
