//! The `idgate` command line: every subcommand and its options, parsed
//! by clap (the binary runs them; `cli`'s other modules are the clients).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::journey::{DocumentChoice, LivenessMode};
use crate::telemetry::LogFormat;

/// `idgate`: the gateway, the sandbox, and clients of both.
#[derive(Parser)]
#[command(
    name = "idgate",
    version,
    about = "gRPC gateway for identity-verification journeys"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// What `idgate` is asked to do.
#[derive(Subcommand)]
pub enum Command {
    /// Runs the gateway. With no [upstream] configured, starts the sandbox in process.
    Serve {
        /// Configuration file (TOML); `IDGATE_*` variables override it.
        #[arg(long, short, env = "IDGATE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Validates a configuration as `serve` would and reads the files it
    /// names, binding and calling nothing (a pre-deploy check).
    Check {
        /// Configuration file (TOML); `IDGATE_*` variables override it.
        #[arg(long, short, env = "IDGATE_CONFIG")]
        config: PathBuf,
    },
    /// Runs the sandbox alone: the reference REST service, for local tests.
    Sandbox {
        /// Configuration file whose [sandbox] table configures it.
        #[arg(long, short, env = "IDGATE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Drives a whole journey through a running gateway and prints each step.
    Journey(JourneyArgs),
    /// Inspects and steers the 3D liveness vendor channels of a running gateway.
    Channels(ChannelsArgs),
    /// Prints a running gateway's usage by caller and UTC day, for charge-back:
    /// journeys created, vendor calls billed per operation, refusals per reason.
    Usage(UsageArgs),
}

/// Where the admin API of a running gateway is, and its token: what
/// every admin subcommand (`channels`, `usage`) takes.
#[derive(clap::Args)]
pub struct AdminArgs {
    /// The gateway's admin address (`https://` for a listener with TLS).
    #[arg(long, default_value = super::channels::DEFAULT_ADMIN_ADDR)]
    pub admin: String,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The admin bearer token; prefer --token-file (a command line is
    /// visible to others).
    #[arg(
        long,
        env = "IDGATE_ADMIN_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file",
        required_unless_present = "token_file"
    )]
    pub token: Option<String>,
    /// A file holding the admin bearer token, read once.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// `idgate usage`: the charge-back report, through the admin API.
#[derive(clap::Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The first UTC day, YYYY-MM-DD.
    #[arg(long)]
    pub from: String,
    /// The last UTC day, YYYY-MM-DD (inclusive).
    #[arg(long)]
    pub to: String,
    /// Only this configured caller.
    #[arg(long)]
    pub caller: Option<String>,
    /// Prints JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// TLS options of the clients (`https://` addresses).
#[derive(clap::Args)]
pub struct TlsArgs {
    /// PEM CA certificates to trust beside the system's roots.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// PEM client certificate, for a listener that requires one (mTLS).
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's PEM private key.
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
}

impl TlsArgs {
    /// The client TLS settings these options name.
    pub fn client(self) -> super::tls::ClientTls {
        super::tls::ClientTls {
            ca: self.ca,
            cert: self.cert,
            key: self.key,
        }
    }
}

/// `idgate journey`: a whole journey through a running gateway.
#[derive(clap::Args)]
pub struct JourneyArgs {
    /// The gateway's gRPC address (`https://` for a listener with TLS).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    pub gateway: String,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Liveness proof to run.
    #[arg(long, value_enum, default_value_t = LivenessMode::ThreeD)]
    pub liveness: LivenessMode,
    /// Document to submit.
    #[arg(long, value_enum, default_value_t = DocumentChoice::Rg)]
    pub document: DocumentChoice,
    /// End user's CPF (default: a sandbox test person).
    #[arg(long)]
    pub cpf: Option<String>,
    /// End user's name.
    #[arg(long)]
    pub name: Option<String>,
    /// End user's birth date, YYYY-MM-DD.
    #[arg(long)]
    pub birth_date: Option<String>,
    /// Customer reference of the journey.
    #[arg(long, default_value = "IDGATEDEMO1")]
    pub reference: String,
    /// Operator profile (default: the gateway's first).
    #[arg(long, default_value = "")]
    pub operator_profile: String,
    /// How long to wait for the result, in seconds.
    #[arg(long, default_value_t = 120)]
    pub result_timeout: u64,
    /// The caller's bearer token (a JWT), for a gateway whose [auth] asks
    /// for one; prefer --token-file (a command line is visible to others).
    #[arg(
        long,
        env = "IDGATE_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// A file holding the caller's bearer token (e.g. a projected
    /// service-account token), read once.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// `idgate channels`: the admin API of a running gateway.
#[derive(clap::Args)]
pub struct ChannelsArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: ChannelsCommand,
}

/// One `idgate channels` command.
#[derive(Subcommand)]
pub enum ChannelsCommand {
    /// Lists the channels: mode, circuit state, drain flag, counters.
    List,
    /// Sets the routing mode: auto, force_primary, force_alternative, channel:<name>
    /// or weighted:<name>=<weight>,... (e.g. weighted:primary=90,alternative=10).
    Mode {
        /// The mode.
        mode: String,
        /// Gives weight to a channel that failed its last conformance probe.
        #[arg(long)]
        force: bool,
    },
    /// A guarded rollout of new sessions to a channel: step by step, each
    /// step judged against the incumbent, rolled back at once on a breach.
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
    /// Checks a channel against the REST contract with calls that consume
    /// nothing (a session token for a probe person of `[probe]`).
    Probe {
        /// Channel name.
        name: String,
        /// Also sends /3d/liveness: finishes the probe appkey (may be billed).
        #[arg(long)]
        consume: bool,
    },
    /// Stops routing new sessions to a channel (its sessions still verify there).
    Drain {
        /// Channel name.
        name: String,
    },
    /// Routes new sessions to a drained channel again.
    Undrain {
        /// Channel name.
        name: String,
    },
    /// Compares the channels' vendor figures over a window: sessions,
    /// verifications, pass rate (95% interval), p50/p95 latency, error and
    /// contingency rates: the whole fleet's through any replica whose Redis
    /// answers, else summed over every gateway given.
    Compare {
        /// How far back: 90s, 30m, 1h, 2d (at most the gateways' retention).
        #[arg(long, default_value = "1h")]
        window: String,
        /// A replica's admin address; one is enough in a fleet whose Redis
        /// answers, else once per replica (this sums their own figures);
        /// default: --admin.
        #[arg(long = "gateway")]
        gateways: Vec<String>,
        /// Prints JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// One `idgate channels rollout` command.
#[derive(Subcommand)]
pub enum RolloutCommand {
    /// Starts a rollout (one at a time in the fleet).
    Start(super::rollout::StartOptions),
    /// Shows the fleet's rollout and every step's verdict.
    Status,
    /// Aborts the running rollout: the incumbent back at 100%.
    Abort,
}
