//! Plaintext hops off loopback: the network legs the configuration sends
//! over without TLS to another machine. Each one carries appkeys, images
//! or personal data (upstream, channels), sealed appkeys and control
//! state (Redis), span attributes (OTLP), or bearer tokens received
//! (`grpc_tokens`, `admin_token`) readable on the wire.
//!
//! Nothing here refuses such a configuration (a private network with its
//! own encryption is a valid choice); the server logs a WARN at start for
//! each hop and exposes their count by kind (`idgate_plaintext_hops`).
//! Hops are named by configuration key or variable, never by URL.

use super::Config;

/// The kinds of hop, the gauge's bounded label values.
pub use crate::telemetry::metrics::PLAINTEXT_HOP_KINDS as HOP_KINDS;

/// The OTLP endpoint variables the exporters read.
const OTLP_ENDPOINT_VARS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
];

/// One plaintext hop off loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaintextHop {
    /// One of [`HOP_KINDS`].
    pub kind: &'static str,
    /// The configuration key or variable that names it.
    pub key: String,
}

/// True when `url` uses the plaintext `scheme` (`http`, `redis`) towards
/// a host other than loopback. A URL that does not parse is not judged
/// here (loading or the start refuses it).
pub fn is_plaintext_off_loopback(url: &str, scheme: &str) -> bool {
    let Ok(uri) = url.trim().parse::<http::Uri>() else {
        return false;
    };
    uri.scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
        && uri.host().is_some_and(|h| !crate::net::is_loopback_host(h))
}

impl Config {
    /// Every plaintext hop off loopback this configuration (and the OTLP
    /// variables `env` answers) sends over; `admin_served`: an admin token
    /// is configured, so the admin listener runs.
    pub fn plaintext_hops(
        &self,
        env: impl Fn(&str) -> Option<String>,
        admin_served: bool,
    ) -> Vec<PlaintextHop> {
        let mut hops = Vec::new();
        let mut check = |kind, key: String, url: &str, scheme| {
            if is_plaintext_off_loopback(url, scheme) {
                hops.push(PlaintextHop { kind, key });
            }
        };
        if let Some(up) = &self.upstream {
            check("upstream", "upstream.base_url".into(), &up.base_url, "http");
            check(
                "upstream",
                "upstream.result_base_url".into(),
                &up.result_base_url,
                "http",
            );
        }
        for (i, channel) in self.channels.iter().enumerate() {
            check(
                "channel",
                format!("channels[{i}].base_url"),
                &channel.base_url,
                "http",
            );
        }
        if let Some(url) = &self.cluster.redis_url {
            check("redis", "cluster.redis_url".into(), url, "redis");
        }
        for (i, node) in self.cluster.nodes.iter().enumerate() {
            check("redis", format!("cluster.nodes[{i}]"), node, "redis");
        }
        // A sentinel given as host:port is reached without TLS, and so is
        // the master it names.
        for (i, sentinel) in self.cluster.sentinels.iter().enumerate() {
            let sentinel = sentinel.trim();
            let url = if sentinel.contains("://") {
                sentinel.to_owned()
            } else {
                format!("redis://{sentinel}")
            };
            check("redis", format!("cluster.sentinels[{i}]"), &url, "redis");
        }
        for var in OTLP_ENDPOINT_VARS {
            if let Some(url) = env(var) {
                check("otlp", var.to_owned(), &url, "http");
            }
        }
        // Bearer tokens received without TLS off loopback
        // (`allow_plaintext_tokens`).
        if self.takes_tokens_in_clear() {
            hops.push(PlaintextHop {
                kind: "grpc_tokens",
                key: "auth.allow_plaintext_tokens".to_owned(),
            });
        }
        // The admin token received without TLS off loopback
        // (`allow_plaintext_admin`).
        if admin_served && self.takes_admin_token_in_clear() {
            hops.push(PlaintextHop {
                kind: "admin_token",
                key: "listen.allow_plaintext_admin".to_owned(),
            });
        }
        hops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plaintext_schemes_off_loopback_are_hops() {
        for (url, scheme, hop) in [
            ("http://vendor.example:8080/api", "http", true),
            ("HTTP://10.0.0.7", "http", true),
            ("http://[2001:db8::1]:80", "http", true),
            ("https://vendor.example", "http", false),
            ("http://127.0.0.1:8080", "http", false),
            ("http://127.8.9.10", "http", false),
            ("http://localhost:1", "http", false),
            ("http://api.localhost", "http", false),
            ("http://[::1]:4318", "http", false),
            ("redis://redis.internal:6379/0", "redis", true),
            ("rediss://redis.internal:6379", "redis", false),
            ("redis://127.0.0.1:6379", "redis", false),
            ("not a url", "http", false),
        ] {
            assert_eq!(is_plaintext_off_loopback(url, scheme), hop, "{url}");
        }
    }

    #[test]
    fn hops_are_named_by_key_never_by_url() {
        let config = Config::from_toml_and_env(
            "[upstream]\nbase_url = \"http://vendor.example/api\"\n\
             result_base_url = \"https://vendor.example/result\"\n\
             [[operators]]\nname = \"d\"\nlogin = \"l\"\n\
             [[channels]]\nname = \"p\"\nbase_url = \"https://a.example\"\n\
             [[channels]]\nname = \"q\"\nbase_url = \"http://b.example\"\n",
            Vec::<(String, String)>::new(),
        )
        .unwrap();
        let env = |var: &str| {
            (var == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .then(|| "http://collector:4317".to_owned())
        };
        let hops = config.plaintext_hops(env, false);
        let named: Vec<(&str, &str)> = hops.iter().map(|h| (h.kind, h.key.as_str())).collect();
        assert_eq!(
            named,
            [
                ("upstream", "upstream.base_url"),
                ("channel", "channels[1].base_url"),
                ("otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            ]
        );
        assert!(Config::default().plaintext_hops(|_| None, true).is_empty());
    }

    #[test]
    fn sentinels_off_loopback_are_hops_unless_rediss() {
        let mut config = Config::default();
        config.cluster.master_name = Some("fleet".into());
        config.cluster.sentinels = vec![
            "10.0.0.1:26379".into(),
            "redis://10.0.0.2:26379".into(),
            "127.0.0.1:26379".into(),
        ];
        let keys: Vec<String> = config
            .plaintext_hops(|_| None, false)
            .into_iter()
            .map(|h| h.key)
            .collect();
        assert_eq!(keys, ["cluster.sentinels[0]", "cluster.sentinels[1]"]);
        config.cluster.sentinels = vec![
            "rediss://10.0.0.1:26379".into(),
            "rediss://10.0.0.2:26379".into(),
        ];
        assert!(config.plaintext_hops(|_| None, false).is_empty());
    }

    #[test]
    fn an_admin_token_served_off_loopback_without_tls_is_a_hop() {
        let mut config = Config::default();
        config.listen.admin = ([0, 0, 0, 0], 50052).into();
        let kinds = |c: &Config, served| -> Vec<&'static str> {
            c.plaintext_hops(|_| None, served)
                .into_iter()
                .map(|h| h.kind)
                .collect()
        };
        assert_eq!(kinds(&config, true), ["admin_token"]);
        assert!(kinds(&config, false).is_empty(), "no token, no listener");
        assert!(config.check_admin_token_over_tls().is_err());
        config.listen.allow_plaintext_admin = true;
        assert!(config.check_admin_token_over_tls().is_ok());
        assert_eq!(
            kinds(&config, true),
            ["admin_token"],
            "allowed, still a hop"
        );
        config.listen.admin = ([127, 0, 0, 1], 50052).into();
        assert!(kinds(&config, true).is_empty());
    }
}
