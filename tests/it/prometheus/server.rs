//! A real `prometheus` process for the live test: started on the rule
//! files, scraping the gateway, and queried through its HTTP API.

use std::{
    net::SocketAddr,
    process::{Child, Stdio},
    time::{SystemTime, UNIX_EPOCH},
};

use super::*;

/// A `prometheus` child process on a free loopback port with a temporary
/// data directory; killed and cleaned up on drop.
pub(super) struct Prometheus {
    child: Child,
    dir: PathBuf,
    url: String,
    http: reqwest::Client,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `url`'s readiness every 100 ms: `Some(true)` once Prometheus
/// answers ready, `Some(false)` if it exited first, `None` after [`WAIT`].
async fn ready_or_exited(http: &reqwest::Client, url: &str, child: &mut Child) -> Option<bool> {
    let give_up = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < give_up {
        if child.try_wait().expect("prometheus's status").is_some() {
            return Some(false);
        }
        let ready = http.get(format!("{url}/-/ready")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            return Some(true);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every second with the rule
    /// files of `deploy/prometheus` evaluated every second.
    pub(super) async fn start(target: SocketAddr) -> Self {
        let binary = binary("prometheus");
        let dir = std::env::temp_dir().join(format!("idgate-prometheus-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus temp dir");
        let rules: Vec<String> = rule_files()
            .iter()
            .map(|p| format!("  - {}\n", p.display()))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n{}\
             scrape_configs:\n  - job_name: idgate\n    static_configs:\n      - targets: ['{target}']\n",
            rules.concat()
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("http client");
        // A port below the ephemeral range (`support/fixed_port.rs`); one
        // another process took before Prometheus bound it: another port.
        let (child, url) = loop {
            let port = crate::fixed_port::fixed_port().expect("a free port");
            let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
            let mut child = crate::child_env::command(&binary)
                .arg(format!(
                    "--config.file={}",
                    dir.join("prometheus.yml").display()
                ))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}: {PACKAGE_HINT}", binary.display()));
            let url = format!("http://127.0.0.1:{port}");
            let ready = ready_or_exited(&http, &url, &mut child).await;
            if ready == Some(true) {
                break (child, url);
            }
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
            assert!(
                ready.is_some() && log.contains("address already in use"),
                "prometheus not ready within {WAIT:?} or exited:\n{log}"
            );
        };
        Prometheus {
            child,
            dir,
            url,
            http,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Polls `check` every 100 ms until it holds; fails after [`WAIT`]
    /// with Prometheus's log.
    pub(super) async fn until(&self, what: &str, mut check: impl AsyncFnMut() -> bool) {
        let give_up = tokio::time::Instant::now() + WAIT;
        while !check().await {
            if tokio::time::Instant::now() > give_up {
                panic!(
                    "not within {WAIT:?}: {what}\nprometheus log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) async fn get(&self, path_and_query: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path_and_query}", self.url))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path_and_query}: {e}"));
        let body = response.text().await.expect("Prometheus API body");
        serde_json::from_str(&body).expect("Prometheus API answers JSON")
    }

    /// `/api/v1/query` of `expr` at the current time: the result's series,
    /// or the API's error (a parse error, for instance).
    pub(super) async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let q = serde_urlencoded::to_string([("query", expr)]).expect("encode query");
        let answer = self.get(&format!("/api/v1/query?{q}")).await;
        if answer["status"] != "success" {
            return Err(format!("{}: {}", answer["errorType"], answer["error"]));
        }
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Waits until Prometheus holds a scrape of the gateway that started
    /// after `after` (Unix seconds), so everything done before is in it.
    pub(super) async fn scraped_after(&self, after: f64) {
        self.until("a scrape of the gateway after the last step", async || {
            self.query(r#"timestamp(up{job="idgate"})"#)
                .await
                .ok()
                .and_then(|r| r.first().cloned())
                .and_then(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()))
                .is_some_and(|t| t > after)
        })
        .await;
    }

    /// True when every rule group's last evaluation started after `t`
    /// (Unix seconds).
    pub(super) async fn groups_evaluated_after(&self, t: f64) -> bool {
        let answer = self.get("/api/v1/rules").await;
        let groups = answer["data"]["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        !groups.is_empty()
            && groups.iter().all(|g| {
                g["lastEvaluation"]
                    .as_str()
                    .and_then(|s| {
                        time::OffsetDateTime::parse(
                            s,
                            &time::format_description::well_known::Rfc3339,
                        )
                        .ok()
                    })
                    .is_some_and(|e| e.unix_timestamp_nanos() as f64 / 1e9 > t)
            })
    }

    /// Every rule Prometheus loaded.
    pub(super) async fn rules(&self) -> Vec<Value> {
        let answer = self.get("/api/v1/rules").await;
        assert_eq!(answer["status"], "success", "{answer}");
        answer["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    }
}
