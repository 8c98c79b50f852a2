//! `examples/clients/node/journey.js` (@grpc/grpc-js, @grpc/proto-loader
//! reading `proto/`) takes a journey to `Completo` through a gateway.

use super::{QuickstartGateway, in_repo};
use crate::support::process::child_command;

/// Asserts `node` runs and the quickstart's packages are installed.
fn assert_node_ready() {
    let node = child_command("node", std::env::vars_os())
        .arg("--version")
        .output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "no node on PATH: install Debian's nodejs and npm (scripts/test does)"
    );
    let modules = in_repo("examples/clients/node/node_modules/@grpc/grpc-js");
    assert!(
        modules.is_dir(),
        "{} is missing: run scripts/test, which runs npm ci in examples/clients/node",
        modules.display()
    );
}

#[tokio::test]
async fn the_node_quickstart_runs_a_3d_journey_to_completo_retrying_and_handling_a_typed_error() {
    assert_node_ready();
    let gw = QuickstartGateway::start().await;
    let mut command = child_command("node", std::env::vars_os());
    command.arg(in_repo("examples/clients/node/journey.js"));
    let output = gw.run(command).await;
    gw.assert_journey_completed("Node", &output).await;
}
