//! The Containerfile's contract without a container engine: the gateway
//! binary serves as an unprivileged user, its configuration read-only, its
//! working directory and HOME unwritable, and writes nothing there.
//!
//! The binary is this build's `idgate` (`CARGO_BIN_EXE_idgate`, the test
//! profile): the same code the image's release build compiles. As root
//! the test runs it as uid/gid 65534 (`nobody`); as any other user it
//! already is unprivileged and runs as that user.

use std::{
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::support::{
    gateway::{connect, happy_person},
    process::ServeProcess,
    wait::EVENT_WAIT,
};

/// `nobody`: the uid and gid the gateway runs as when the test is root.
const UNPRIVILEGED: u32 = 65534;

/// The effective uid of `pid` (`self` for this process), from `/proc`.
fn effective_uid(pid: &str) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("/proc status")
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse().ok())
        .expect("Uid line")
}

/// Whether every directory above `path` lets others through and `path`
/// lets others read and run it.
fn others_can_run(path: &Path) -> bool {
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode())
            .unwrap_or(0)
    };
    mode(path) & 0o005 == 0o005
        && path
            .ancestors()
            .skip(1)
            .filter(|a| !a.as_os_str().is_empty())
            .all(|a| mode(a) & 0o001 != 0)
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[tokio::test]
async fn the_gateway_serves_as_an_unprivileged_user_with_nothing_writable() {
    let as_root = effective_uid("self") == 0;
    let temp = crate::support::temp::dir("image");
    let dir = temp.path().to_path_buf();
    set_mode(&dir, 0o755);
    let config = dir.join("idgate.toml");
    std::fs::write(
        &config,
        "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [serving]\ndrain_delay_secs = 0\nshutdown_grace_secs = 5\n\
         [store]\nbackend = \"memory\"\n",
    )
    .expect("write config");
    set_mode(&config, 0o444);
    // The state in memory: the store is the one thing a gateway writes
    // (a volume in the manifests), and this test proves nothing else is.
    // HOME and the working directory: present, readable, not writable.
    let home = dir.join("home");
    std::fs::create_dir(&home).expect("home");
    set_mode(&home, 0o555);

    // /root is 0700: a binary under it is out of reach of uid 65534, so it
    // runs from a copy (removed with `dir`).
    let mut binary = PathBuf::from(env!("CARGO_BIN_EXE_idgate"));
    if as_root && !others_can_run(&binary) {
        let copy = dir.join("idgate");
        std::fs::copy(&binary, &copy).expect("copy the binary");
        set_mode(&copy, 0o755);
        binary = copy;
    }
    let mut command = Command::new(&binary);
    command
        .args(["serve", "--config"])
        .arg(&config)
        .current_dir(&home)
        .env_clear()
        .env("HOME", &home)
        .env("RUST_LOG", "info");
    if as_root {
        use std::os::unix::process::CommandExt as _;
        command.uid(UNPRIVILEGED).gid(UNPRIVILEGED);
    }
    let mut serve = ServeProcess::spawn(command);
    let grpc = serve.field("idgate listening", "grpc");

    let uid = effective_uid(&serve.id().to_string());
    assert_ne!(uid, 0, "the gateway runs unprivileged");
    if as_root {
        assert_eq!(uid, UNPRIVILEGED);
    }

    let channel = connect(format!("http://{grpc}")).await;
    let status = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health check")
        .into_inner()
        .status();
    assert_eq!(status, ServingStatus::Serving);
    let created = idgate::proto::v1::journey_service_client::JourneyServiceClient::new(channel)
        .create_journey(happy_person())
        .await
        .expect("CreateJourney is served")
        .into_inner();
    assert!(!created.appkey.is_empty());

    serve.signal("TERM");
    let exit = serve
        .exit_within(EVENT_WAIT)
        .await
        .expect("the gateway exits after SIGTERM");
    assert!(exit.success(), "{exit}");
    assert_eq!(
        std::fs::read_dir(&home).expect("home").count(),
        0,
        "nothing was written in HOME"
    );
    set_mode(&home, 0o755);
}
