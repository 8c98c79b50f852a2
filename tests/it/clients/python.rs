//! `examples/clients/python/journey.py` (grpcio, code generated from
//! `proto/` at run time) takes a journey to `Completo` through a gateway.

use super::{QuickstartGateway, in_repo};
use crate::support::process::child_command;

/// The interpreter of `target/test-venv`, with the quickstart's packages.
fn venv_python() -> std::path::PathBuf {
    let python = in_repo("target/test-venv/bin/python");
    let usable = child_command(&python, std::env::vars_os())
        .args(["-c", "import grpc, grpc_tools, grpc_status"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        usable,
        "{} lacks PyPI's grpcio, grpcio-tools or grpcio-status: run scripts/test, which \
         makes the venv (Debian's python3-venv) and installs examples/clients/python/requirements.txt",
        python.display()
    );
    python
}

#[tokio::test]
async fn the_python_quickstart_runs_a_3d_journey_to_completo_retrying_and_handling_a_typed_error() {
    let python = venv_python();
    let gw = QuickstartGateway::start().await;
    let mut command = child_command(python, std::env::vars_os());
    command.arg(in_repo("examples/clients/python/journey.py"));
    let output = gw.run(command).await;
    gw.assert_journey_completed("Python", &output).await;
}
