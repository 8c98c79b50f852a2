//! What refuses a start of `idgate serve` and `idgate check`, each named
//! with the store's path and the cause (never a fallback to memory), and
//! a store at `store.max_bytes`, which refuses new journeys and keeps
//! every live one.

use std::time::Duration;

use idgate::{
    cluster::{
        Embedded, StoreConfig,
        embedded::{Expiry, Table},
    },
    domain::Operation,
};
use tonic::Code;

use super::{Site, stderr};
use crate::support::gateway::assert_error;

/// `idgate check` and `idgate serve` both refuse `site`, naming `path`
/// and `cause` on stderr.
fn check_and_serve_refuse(site: &Site, path: &std::path::Path, cause: &str) {
    let check = site.command("check").output().expect("run idgate check");
    let serve = site.refused_start();
    for (what, output) in [("check", check), ("serve", serve)] {
        let said = stderr(&output);
        assert!(said.contains(&path.display().to_string()), "{what}: {said}");
        assert!(said.contains(cause), "{what}: {said}");
        assert!(!String::from_utf8_lossy(&output.stdout).contains("idgate listening"));
    }
}

#[tokio::test]
async fn an_unwritable_store_path_fails_the_start_and_the_check_naming_it() {
    let site = Site::new("").await;
    // A file where the store's directory should be: no user, root
    // included, can make a directory there.
    std::fs::write(site.store_dir(), b"not a directory").expect("a file in the way");
    check_and_serve_refuse(&site, &site.store_dir(), "is not writable");
}

#[tokio::test]
async fn a_corrupt_store_file_fails_the_start_and_the_check_naming_it() {
    let site = Site::new("").await;
    std::fs::create_dir(site.store_dir()).expect("the store's directory");
    let file = site.store_dir().join("store.redb");
    std::fs::write(&file, vec![0x5a; 64 * 1024]).expect("a file that is no store");
    check_and_serve_refuse(&site, &file, "is corrupt");
}

#[tokio::test]
async fn a_second_process_on_one_store_path_refuses_to_start_naming_it() {
    let site = Site::new("").await;
    let first = site.serve().await;
    let file = site.store_dir().join("store.redb");
    check_and_serve_refuse(&site, &file, "locked by another process");
    // The first one serves on.
    let owner = site.token("svc-owner");
    first
        .create(&owner, &uuid::Uuid::new_v4().to_string())
        .await
        .expect("the first process serves");
    first.stop("TERM").await;
}

#[tokio::test]
async fn a_store_at_max_bytes_refuses_create_journey_naming_the_key_and_keeps_live_journeys() {
    let site = Site::new("max_bytes = 1048576\n").await;
    let owner = site.token("svc-owner");
    let first = site.serve().await;
    let kept = first
        .create(&owner, &uuid::Uuid::new_v4().to_string())
        .await
        .expect("create");
    first.stop("TERM").await;

    // The store filled while the gateway is stopped (live records of
    // another table, sealed under the store's own key file).
    {
        let config = StoreConfig {
            path: site.store_dir(),
            max_bytes: 1 << 20,
            ..StoreConfig::default()
        };
        let store = Embedded::open(&config, None).expect("open the stopped gateway's store");
        let filler = Table::new("filler");
        let expires = Expiry::after(Duration::from_secs(3600));
        // Large records, then ever smaller ones into what is left.
        let mut n = 0u32;
        for size in [16 * 1024, 1024, 16] {
            let value = vec![7u8; size];
            while store
                .insert(filler, &n.to_be_bytes(), &value, expires)
                .await
                .is_ok()
            {
                n += 1;
            }
        }
        assert!(n > 0);
    }

    let second = site.serve().await;
    let appkeys_bought = site.vendor.calls(Operation::Appkey, None);
    let refused = second
        .create(&owner, &uuid::Uuid::new_v4().to_string())
        .await
        .expect_err("the store is full");
    assert_error(&refused, Code::ResourceExhausted, "OVERLOADED");
    assert!(
        refused.message().contains("store.max_bytes"),
        "{}",
        refused.message()
    );
    // Refused before an appkey was bought; the live journey goes on.
    assert_eq!(site.vendor.calls(Operation::Appkey, None), appkeys_bought);
    second
        .start_3d(&owner, &kept.appkey)
        .await
        .expect("a live journey is not forgotten to make room");
    second.stop("TERM").await;
}
