//! Shared set-up: a sandbox on ephemeral ports with a manual clock, and a
//! small client for its operations.

use std::sync::Arc;
use std::time::Duration;

use idgate::sandbox::samples::{self, LivenessOutcome, TestPerson};
use idgate::sandbox::{Clock, ManualClock, Sandbox, SandboxConfig, SandboxHandle};
use serde_json::{Value, json};

use super::net::http_client;

/// Where the manual clock starts: a fixed instant, for reproducible dates.
pub const START: time::OffsetDateTime = time::macros::datetime!(2025-01-06 12:00:00 UTC);

/// An HTTP answer: status, raw body and (when JSON) the parsed body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub raw: bytes::Bytes,
}

impl Resp {
    /// A string field of the body (empty when absent).
    pub fn str(&self, key: &str) -> String {
        self.body[key].as_str().unwrap_or_default().to_owned()
    }
}

/// A running sandbox with its clock and a client.
pub struct Env {
    pub sandbox: SandboxHandle,
    pub clock: Arc<ManualClock>,
    pub http: reqwest::Client,
}

/// The default configuration with the webhook off.
pub fn config() -> SandboxConfig {
    SandboxConfig::default()
}

pub async fn start() -> Env {
    start_with(config()).await
}

pub async fn start_with(config: SandboxConfig) -> Env {
    let clock = Arc::new(ManualClock::starting_at(START));
    Env {
        sandbox: start_on(config, clock.clone()).await,
        clock,
        http: http_client(),
    }
}

/// Starts a sandbox with `config` on `clock`, every listener on
/// `127.0.0.1:0`.
pub async fn start_on(config: SandboxConfig, clock: Arc<dyn Clock>) -> SandboxHandle {
    Sandbox::start(config, clock).await.expect("sandbox starts")
}

pub async fn into_resp(response: reqwest::Response) -> Resp {
    let status = response.status().as_u16();
    let raw = response.bytes().await.expect("body readable");
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Resp { status, body, raw }
}

impl Env {
    /// A core operation's URL (`/credencial` -> `{base}/service/captcha/credencial`).
    pub fn core(&self, path: &str) -> String {
        format!("{}/service/captcha{path}", self.sandbox.base_url())
    }

    /// The result operation's URL.
    pub fn result_url(&self) -> String {
        format!(
            "{}/service/captcha/document/result",
            self.sandbox.result_base_url()
        )
    }

    /// A channel's own listener root.
    pub fn channel_base(&self, name: &str) -> String {
        self.sandbox
            .channels()
            .into_iter()
            .find(|c| c.name == name)
            .map(|c| c.base_url)
            .expect("channel configured")
    }

    pub fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }

    pub async fn post_form(&self, url: &str, pairs: &[(&str, &str)]) -> Resp {
        let body = serde_urlencoded::to_string(pairs).expect("form encodes");
        self.post_raw(url, "application/x-www-form-urlencoded", body.into_bytes())
            .await
    }

    pub async fn post_json(&self, url: &str, value: &Value) -> Resp {
        self.post_raw(url, "application/json", value.to_string().into_bytes())
            .await
    }

    pub async fn post_raw(&self, url: &str, content_type: &str, body: Vec<u8>) -> Resp {
        let response = self
            .http
            .post(url)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("request sent");
        into_resp(response).await
    }

    /// The whole `/credencial` body, as the gateway passes it to `/appkey`.
    pub async fn credential(&self) -> String {
        let r = self
            .post_form(
                &self.core("/credencial"),
                &[("user", "sandbox"), ("pass", "sandbox")],
            )
            .await;
        assert_eq!(r.status, 200, "credential: {:?}", r.body);
        String::from_utf8(r.raw.to_vec()).expect("utf-8 body")
    }

    pub async fn appkey_with(&self, token: &str, person: TestPerson) -> Resp {
        self.post_form(
            &self.core("/appkey"),
            &[
                ("user", "sandbox"),
                ("token", token),
                ("cpf", person.cpf),
                ("nome", person.name),
                ("nascimento", person.birth_date),
                ("idExternoCliente", "journey42"),
            ],
        )
        .await
    }

    pub async fn appkey(&self, person: TestPerson) -> String {
        let token = self.credential().await;
        let r = self.appkey_with(&token, person).await;
        assert_eq!(r.status, 200, "appkey: {:?}", r.body);
        r.str("appkey")
    }

    pub async fn challenge(&self, appkey: &str) -> Resp {
        self.post_form(&self.core("/challenge"), &[("appkey", appkey)])
            .await
    }

    pub async fn captcha(&self, appkey: &str, chkey: &str, outcome: LivenessOutcome) -> Resp {
        let images = samples::snapshots_payload(outcome, &["cod01", "cod02"]);
        self.post_form(
            &self.core("/captcha"),
            &[("appkey", appkey), ("chkey", chkey), ("images", &images)],
        )
        .await
    }

    /// Challenge then captcha: a 2D proof with `outcome`.
    pub async fn liveness_2d(&self, appkey: &str, outcome: LivenessOutcome) -> Resp {
        let c = self.challenge(appkey).await;
        assert_eq!(c.status, 200, "challenge: {:?}", c.body);
        self.captcha(appkey, &c.str("chkey"), outcome).await
    }

    /// `{root}/service/captcha/3d/session-token`, `root` being a listener
    /// root or a `.../channels/{name}` prefix (pass the full prefix).
    pub async fn session_token(
        &self,
        prefix: &str,
        appkey: &str,
        user_agent: Option<&str>,
    ) -> Resp {
        let mut body = json!({ "appkey": appkey });
        if let Some(ua) = user_agent {
            body["userAgent"] = json!(ua);
        }
        self.post_json(&format!("{prefix}/3d/session-token"), &body)
            .await
    }

    pub async fn liveness_3d(&self, prefix: &str, appkey: &str, session: &str) -> Resp {
        self.post_json(
            &format!("{prefix}/3d/liveness"),
            &json!({ "appkey": appkey, "sessionToken": session }),
        )
        .await
    }

    pub async fn upload(&self, appkey: &str, images: &[Vec<u8>]) -> Resp {
        let images: Vec<String> = images.iter().map(|i| samples::base64(i)).collect();
        self.post_json(
            &self.core("/document"),
            &json!({ "appkey": appkey, "images": images }),
        )
        .await
    }

    pub async fn digital_licence(&self, appkey: &str, bytes: &[u8]) -> Resp {
        self.post_json(
            &self.core("/document"),
            &json!({ "appkey": appkey, "qrcode": samples::base64(bytes) }),
        )
        .await
    }

    pub async fn result(&self, appkey: &str) -> Resp {
        self.post_form(&self.result_url(), &[("appkey", appkey)])
            .await
    }
}

/// The standard 3D path prefix under a listener root.
pub fn standard(root: &str) -> String {
    format!("{root}/service/captcha")
}
