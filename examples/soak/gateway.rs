//! The gateway under soak, as a process of its own, and what the soak reads
//! of it (its RSS, its `/metrics`).

use std::process::{Child, Command, Stdio};

use idgate::sandbox::SandboxHandle;

/// `VmRSS` of process `pid`, in KiB.
pub fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
/// Kills the gateway process when the soak ends, however it ends.
pub struct GatewayProcess(pub Child);

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The value of an unlabelled gauge in a Prometheus text exposition.
pub fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

pub const WEBHOOK_USER: &str = "sandbox";
pub const WEBHOOK_PASSWORD: &str = "soak-webhook-password-0123456789";

/// Starts the gateway binary in front of `sandbox`; its gRPC and HTTP URLs.
pub fn start_gateway(
    sandbox: &SandboxHandle,
    operator: &idgate::sandbox::OperatorConfig,
    dir: &std::path::Path,
    http: u16,
) -> anyhow::Result<(GatewayProcess, String)> {
    let (grpc, admin) = (free_port(), free_port());
    let secret = |name: &str, value: &str| -> anyhow::Result<String> {
        let path = dir.join(name);
        std::fs::write(&path, value)?;
        Ok(path.display().to_string())
    };
    let mut toml = format!(
        "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [serving]\ndrain_delay_secs = 0\n\
         [auth]\nmode = \"none\"\n\
         [upstream]\nbase_url = \"{}\"\nresult_base_url = \"{}\"\n\
         [[operators]]\nname = \"default\"\nlogin = \"{}\"\npassword_file = \"{}\"\n\
         [webhook]\nbasic_user = \"{WEBHOOK_USER}\"\nbasic_password_file = \"{}\"\n\
         [watch]\nwebhook_grace_secs = 2\npoll_initial_ms = 100\npoll_max_ms = 500\n",
        sandbox.base_url(),
        sandbox.result_base_url(),
        operator.login,
        secret("operator-password", &operator.password)?,
        secret("webhook-password", WEBHOOK_PASSWORD)?,
    );
    for (i, channel) in sandbox.channels().into_iter().enumerate() {
        toml.push_str(&format!(
            "[[channels]]\nname = \"{}\"\nbase_url = \"{}\"\npriority = {i}\n",
            channel.name, channel.base_url
        ));
    }
    let config = dir.join("idgate.toml");
    std::fs::write(&config, toml)?;
    let exe = std::env::current_exe()?;
    let binary = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .ok_or_else(|| anyhow::anyhow!("no idgate binary beside the examples"))?;
    let child = Command::new(binary)
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok((GatewayProcess(child), format!("http://127.0.0.1:{grpc}")))
}
