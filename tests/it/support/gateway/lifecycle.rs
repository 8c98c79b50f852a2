//! Starting, reloading and stopping gateways: a [`TestGateway`] on a
//! manual clock, one reloadable from a file, a sibling on the same
//! sandbox, a gateway as `idgate serve` starts it, and an
//! [`ExternalGateway`] on a sandbox of its own.

use std::sync::Arc;

use idgate::{
    channels::ChannelSpec,
    config::{Config, UpstreamConfig},
    sandbox::{ManualClock, SandboxConfig, SandboxHandle},
    server::{Gateway, StartOptions},
};
use tonic::transport::Channel;

use super::{TestGateway, clients::through_tonic, test_config, use_upstream};

/// Starts `config` as `idgate serve` does (the system clock), for tests
/// that run in real time or on an upstream of their own.
pub async fn start_gateway(config: Config) -> Gateway {
    idgate::server::start(without_process_otel(config))
        .await
        .expect("gateway starts")
}

/// `config` reading no `OTEL_*` variable of the test process (a
/// configuration a test loaded from TOML reads them by default).
pub fn without_process_otel(mut config: Config) -> Config {
    if config.telemetry.otel_env.is_process() {
        config.telemetry.otel_env = idgate::telemetry::OtelEnv::none();
    }
    config
}

impl TestGateway {
    /// A gateway with the test configuration.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A gateway with the test configuration changed by `edit`.
    pub async fn start_with(edit: impl FnOnce(&mut Config)) -> Self {
        let mut config = test_config();
        edit(&mut config);
        Self::launch(config, None).await
    }

    /// Starts `config` on a manual clock; `config_path` is what
    /// [`Gateway::reload`] re-reads.
    async fn launch(config: Config, config_path: Option<std::path::PathBuf>) -> Self {
        let clock = Arc::new(ManualClock::new());
        let gateway = idgate::server::start_with(
            without_process_otel(config),
            StartOptions {
                config_path,
                sandbox_clock: Some(clock.clone()),
                span_export: None,
            },
        )
        .await
        .expect("gateway starts");
        let channel = Channel::from_shared(gateway.grpc_url())
            .expect("url")
            .connect()
            .await
            .expect("connect to the gateway");
        TestGateway {
            gateway,
            clock,
            channel: through_tonic(channel),
        }
    }

    /// A gateway with the test configuration whose [`Gateway::reload`]
    /// re-reads `config_path` (what SIGHUP does in `idgate serve`).
    pub async fn start_reloadable(config_path: &std::path::Path) -> Self {
        Self::start_reloadable_with(config_path, |_| {}).await
    }

    /// [`TestGateway::start_reloadable`] with the test configuration
    /// changed by `edit` (e.g. the `[auth]` and `[[callers]]` the file
    /// holds too).
    pub async fn start_reloadable_with(
        config_path: &std::path::Path,
        edit: impl FnOnce(&mut Config),
    ) -> Self {
        let mut config = test_config();
        edit(&mut config);
        Self::launch(config, Some(config_path.to_owned())).await
    }

    /// Stops the gateway and its sandbox.
    pub async fn stop(self) {
        self.gateway.shutdown().await;
    }

    /// The embedded sandbox's channels as `[[channels]]` entries (own
    /// listeners, priority in sandbox order, default timeout and breaker).
    pub fn sandbox_channel_specs(&self) -> Vec<ChannelSpec> {
        self.sandbox()
            .channels()
            .into_iter()
            .zip(0..)
            .map(|(c, priority)| ChannelSpec::new(c.name, c.base_url, priority))
            .collect()
    }

    /// Reloads the channels as [`TestGateway::sandbox_channel_specs`]
    /// changed by `edit` (e.g. one channel's timeout).
    pub fn reload_channels(&self, edit: impl FnOnce(&mut Vec<ChannelSpec>)) {
        let mut config = test_config();
        config.channels = self.sandbox_channel_specs();
        edit(&mut config.channels);
        self.gateway.reload_from(&config).expect("reload channels");
    }

    /// A second gateway on this gateway's sandbox, as a deployment with an
    /// external upstream and explicit `[[channels]]` would run.
    pub async fn sibling(&self) -> TestGateway {
        let sandbox = self.sandbox();
        let upstream = UpstreamConfig {
            base_url: sandbox.base_url(),
            result_base_url: sandbox.result_base_url(),
            ..UpstreamConfig::default()
        };
        let channels = self.sandbox_channel_specs();
        TestGateway::start_with(move |config| {
            use_upstream(config, upstream);
            config.channels = channels;
            // The first gateway's journeys are foreign to this one.
            config.journeys.accept_foreign_appkeys = true;
        })
        .await
    }
}

/// A gateway pointed at a sandbox started on its own (not embedded), so
/// the gateway's `[upstream]` settings (timeouts, body bounds) apply.
pub struct ExternalGateway {
    /// The gateway.
    pub gw: TestGateway,
    /// The sandbox it talks to.
    pub sandbox: SandboxHandle,
    /// A second gateway on the same sandbox with the default `[upstream]`
    /// settings: the calls a test needs to succeed go through it, so that
    /// the settings under test (a short timeout) cannot fail them.
    pub patient: TestGateway,
}

impl ExternalGateway {
    /// Starts a sandbox, then a gateway on it whose upstream settings are
    /// changed by `edit`.
    pub async fn start(edit: impl FnOnce(&mut UpstreamConfig)) -> Self {
        let sandbox = crate::support::sandbox::start_on(
            SandboxConfig::default(),
            Arc::new(ManualClock::new()),
        )
        .await;
        let mut upstream = UpstreamConfig {
            base_url: sandbox.base_url(),
            result_base_url: sandbox.result_base_url(),
            ..UpstreamConfig::default()
        };
        let patient_upstream = upstream.clone();
        edit(&mut upstream);
        // `gw` acts on journeys `patient` created: foreign to it.
        let gw = TestGateway::start_with(move |c| {
            use_upstream(c, upstream);
            c.journeys.accept_foreign_appkeys = true;
        })
        .await;
        let patient = TestGateway::start_with(move |c| use_upstream(c, patient_upstream)).await;
        ExternalGateway {
            gw,
            sandbox,
            patient,
        }
    }
}
