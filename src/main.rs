//! The `idgate` binary: the gateway, the sandbox, and clients of both.

/// mimalloc instead of glibc's allocator: a call allocates and frees
/// dozens of small buffers (headers, frames, spans) across threads, and
/// glibc's malloc/free were about a tenth of a call's CPU in the hop's
/// profile; mimalloc measured 9 % less CPU per call (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::{process::ExitCode, time::Duration};

use anyhow::Context as _;
use clap::Parser as _;
use idgate::{
    cli::{
        args::{ChannelsCommand, Cli, Command, RolloutCommand},
        journey::{JourneyPlan, Person},
    },
    config::Config,
};

/// The admin API `args` name, and its token (from the flag, the
/// environment or the file).
fn admin_target(
    args: idgate::cli::args::AdminArgs,
) -> anyhow::Result<(
    idgate::cli::channels::AdminTarget,
    idgate::domain::AdminToken,
)> {
    let text = token_text(args.token, args.token_file.as_deref())?.unwrap_or_default();
    let token = idgate::domain::AdminToken::new(text).context("the admin token is empty")?;
    let target = idgate::cli::channels::AdminTarget {
        addr: args.admin,
        tls: args.tls.client(),
    };
    Ok((target, token))
}

/// The token given inline or in a file (trailing newline dropped); the
/// error names the file, never its content.
fn token_text(
    inline: Option<String>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<String>> {
    match (inline, file) {
        (Some(token), _) => Ok(Some(token)),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map(|t| Some(t.trim_end_matches(['\r', '\n']).to_owned()))
            .with_context(|| format!("reading the token file {}", path.display())),
        (None, None) => Ok(None),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("idgate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { config } => {
            let config_path = config;
            let config = Config::load(config_path.as_deref()).context("loading configuration")?;
            let telemetry =
                idgate::telemetry::init(&config.telemetry, &config.audit, cli.log_format)
                    .context("starting telemetry")?;
            // Before the listeners: a SIGHUP during start-up must not kill
            // the process (its default action), only wait to be handled.
            let signals = Signals::install();
            let gateway = idgate::server::start_with(
                config,
                idgate::server::StartOptions {
                    config_path: config_path.clone(),
                    span_export: telemetry.span_export_stats(),
                    ..Default::default()
                },
            )
            .await
            .context("starting the gateway")?;
            signals.serve_until_stopped(&gateway).await;
            gateway.shutdown().await;
            flush_telemetry(telemetry).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { config } => {
            let loaded = Config::load(Some(&config)).context("loading configuration")?;
            let checked = idgate::server::check(&loaded).context("checking configuration")?;
            println!("{}: {checked}", config.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Sandbox { config } => {
            let config = Config::load(config.as_deref()).context("loading configuration")?;
            let telemetry =
                idgate::telemetry::init(&config.telemetry, &config.audit, cli.log_format)
                    .context("starting telemetry")?;
            let sandbox = idgate::sandbox::Sandbox::start(
                config.sandbox.clone(),
                std::sync::Arc::new(idgate::sandbox::SystemClock),
            )
            .await
            .context("starting the sandbox")?;
            println!("sandbox base_url        {}", sandbox.base_url());
            println!("sandbox result_base_url {}", sandbox.result_base_url());
            for ch in sandbox.channels() {
                println!(
                    "sandbox channel {:<12} {} (vendor {})",
                    ch.name, ch.base_url, ch.vendor
                );
            }
            println!("sandbox admin           {}", sandbox.admin_url());
            // The built-in test operator is printed so a new user can log in;
            // configured operators' passwords are theirs to know.
            let builtin = idgate::sandbox::SandboxConfig::default().operators;
            for op in &config.sandbox.operators {
                if builtin
                    .iter()
                    .any(|b| b.login == op.login && b.password == op.password)
                {
                    println!("operator login/password {}/{}", op.login, op.password);
                } else {
                    println!(
                        "operator login          {} (password as configured)",
                        op.login
                    );
                }
            }
            tokio::signal::ctrl_c()
                .await
                .context("waiting for ctrl-c")?;
            sandbox.shutdown().await;
            flush_telemetry(telemetry).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Journey(args) => {
            let default = idgate::cli::inputs::default_person();
            let plan = JourneyPlan {
                gateway: args.gateway,
                liveness: args.liveness,
                document: args.document,
                person: Person {
                    cpf: args.cpf.unwrap_or(default.cpf),
                    name: args.name.unwrap_or(default.name),
                    birth_date: args.birth_date.unwrap_or(default.birth_date),
                    customer_reference: args.reference,
                },
                operator_profile: args.operator_profile,
                result_timeout: Duration::from_secs(args.result_timeout),
            };
            let token = match token_text(args.token, args.token_file.as_deref())? {
                Some(text) => Some(
                    idgate::domain::CallerToken::new(text).context("the caller token is empty")?,
                ),
                None => None,
            };
            let mut out = Stdout;
            let tls = args.tls.client();
            match idgate::cli::journey::run_as(&plan, &tls, token.as_ref(), &mut out).await {
                Ok(_) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("idgate journey: {e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Channels(args) => {
            use idgate::cli::channels as cli;
            let (admin, token) = admin_target(args.admin)?;
            let text = match args.command {
                ChannelsCommand::List => cli::list(admin, &token).await,
                ChannelsCommand::Mode { mode, force } => {
                    cli::set_mode_forced(admin, &token, &mode, force).await
                }
                ChannelsCommand::Rollout { command } => {
                    use idgate::cli::rollout;
                    match command {
                        RolloutCommand::Start(options) => {
                            rollout::start(admin, &token, &options).await
                        }
                        RolloutCommand::Status => rollout::status(admin, &token).await,
                        RolloutCommand::Abort => rollout::abort(admin, &token).await,
                    }
                }
                ChannelsCommand::Probe { name, consume } => {
                    idgate::cli::rollout::probe(admin, &token, &name, consume).await
                }
                ChannelsCommand::Drain { name } => cli::drain(admin, &token, &name).await,
                ChannelsCommand::Undrain { name } => cli::undrain(admin, &token, &name).await,
                ChannelsCommand::Compare {
                    window,
                    gateways,
                    json,
                } => {
                    use idgate::cli::compare;
                    match compare::parse_window(&window) {
                        Ok(secs) => {
                            let targets = if gateways.is_empty() {
                                vec![admin]
                            } else {
                                gateways
                                    .into_iter()
                                    .map(|addr| cli::AdminTarget {
                                        addr,
                                        tls: admin.tls.clone(),
                                    })
                                    .collect()
                            };
                            compare::compare(targets, &token, secs, json).await
                        }
                        Err(e) => Err(e),
                    }
                }
            }
            .map_err(|e| match e {
                // Refused before anything was sent: the message says why.
                cli::CliError::Mode { .. }
                | cli::CliError::Window(_)
                | cli::CliError::TokenNotAHeader => anyhow::Error::new(e),
                _ => anyhow::Error::new(e).context("calling the channel admin service"),
            })?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Usage(args) => {
            use idgate::cli::usage;
            let (admin, token) = admin_target(args.admin)?;
            let query = usage::UsageQuery {
                from: args.from,
                to: args.to,
                caller: args.caller,
            };
            let text = usage::usage(admin, &token, &query, args.json)
                .await
                .context("calling the admin service for usage")?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Exports the spans still buffered and stops the exporter; a failure is
/// reported but does not change the exit code (the work itself is done).
async fn flush_telemetry(telemetry: idgate::telemetry::TelemetryExporters) {
    if let Err(e) = telemetry.shutdown().await {
        eprintln!("idgate: {e}");
    }
}

/// Writes progress straight to stdout as it happens.
struct Stdout;

impl std::fmt::Write for Stdout {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        out.write_all(s.as_bytes()).map_err(|_| std::fmt::Error)?;
        out.flush().map_err(|_| std::fmt::Error)
    }
}

/// The signals `idgate serve` handles: Ctrl-C or SIGTERM stop the
/// gateway; SIGHUP reloads its configuration and the listeners'
/// certificates.
struct Signals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Registers the handlers (SIGTERM, SIGHUP) at once, so that a signal
    /// arriving before the gateway is up waits to be handled.
    fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let unix = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) {
                (Ok(term), Ok(hup)) => Some((term, hup)),
                _ => None,
            };
            Self { unix }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Waits for a stop signal, reloading the configuration on each SIGHUP.
    async fn serve_until_stopped(self, gateway: &idgate::server::Gateway) {
        #[cfg(unix)]
        {
            let Some((mut term, mut hup)) = self.unix else {
                let _ = tokio::signal::ctrl_c().await;
                return;
            };
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => return,
                    _ = term.recv() => return,
                    _ = hup.recv() => {
                        // Said (INFO or ERROR) and counted by the reload itself.
                        let _ = gateway.reload().await;
                    }
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = gateway;
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
