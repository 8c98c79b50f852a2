//! `idgate channels rollout start|status|abort` and `idgate channels
//! probe`: the guarded rollout and the conformance probe through
//! `ChannelAdminService`, as text to print. Options are checked here
//! before anything is sent; the gateway checks them again.

use std::{fmt::Write as _, time::Duration};

use super::channels::{AdminTarget, CliError, connect, explain};
use crate::{domain::AdminToken, proto::v1 as pb};

/// The options of `idgate channels rollout start` (parsed by clap in
/// `main.rs`); unset ones take the gateway's defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StartOptions {
    /// The channel new sessions move to.
    #[arg(long)]
    pub to: String,
    /// The channel they move from (default: the first other channel).
    #[arg(long)]
    pub from: Option<String>,
    /// The new channel's weight at each step, percent (default 5,25,50,100).
    #[arg(long)]
    pub steps: Option<String>,
    /// Least minutes per step, fractions accepted: 0.5 is 30 s (default 30).
    #[arg(long)]
    pub step_minutes: Option<f64>,
    /// Least session starts on the new channel per step (default 200).
    #[arg(long)]
    pub min_sessions: Option<u64>,
    /// Highest error rate of the new channel, 0 to 1 (default 0.02).
    #[arg(long)]
    pub max_error_rate: Option<f64>,
    /// Largest pass-rate drop below the incumbent, 0 to 1 (default 0.03).
    #[arg(long)]
    pub max_pass_rate_drop: Option<f64>,
    /// Starts even if the channel failed its last conformance probe.
    #[arg(long)]
    pub force: bool,
}

fn bad(flag: &'static str, why: impl Into<String>) -> CliError {
    CliError::Argument {
        flag,
        why: why.into(),
    }
}

/// `5,25,50,100` as percentages.
pub fn parse_steps(text: &str) -> Result<Vec<u32>, CliError> {
    text.split(',')
        .map(|s| {
            s.trim().parse::<u32>().map_err(|_| {
                bad(
                    "--steps",
                    "whole percentages separated by commas, e.g. 5,25,50,100",
                )
            })
        })
        .collect()
}

/// The request of `options`.
pub fn start_request(options: &StartOptions) -> Result<pb::StartRolloutRequest, CliError> {
    let steps = options
        .steps
        .as_deref()
        .map(parse_steps)
        .transpose()?
        .unwrap_or_default();
    let step_duration = match options.step_minutes {
        None => None,
        Some(m) if (0.0..=1_440.0).contains(&m) => {
            let d = Duration::from_secs_f64(m * 60.0);
            Some(prost_types::Duration {
                seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
            })
        }
        Some(_) => return Err(bad("--step-minutes", "minutes from 0 to 1440")),
    };
    for (flag, rate) in [
        ("--max-error-rate", options.max_error_rate),
        ("--max-pass-rate-drop", options.max_pass_rate_drop),
    ] {
        if rate.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
            return Err(bad(flag, "a rate from 0 to 1 (0.02 is 2%)"));
        }
    }
    Ok(pb::StartRolloutRequest {
        to: options.to.clone(),
        from: options.from.clone().unwrap_or_default(),
        steps,
        step_duration,
        min_sessions: options.min_sessions,
        max_error_rate: options.max_error_rate,
        max_pass_rate_drop: options.max_pass_rate_drop,
        force: options.force,
    })
}

/// `idgate channels rollout start`.
pub async fn start(
    addr: impl Into<AdminTarget>,
    token: &AdminToken,
    options: &StartOptions,
) -> Result<String, CliError> {
    let request = start_request(options)?;
    let mut client = connect(addr, token).await?;
    let resp = client
        .start_rollout(request)
        .await
        .map_err(explain)?
        .into_inner();
    Ok(resp
        .rollout
        .as_ref()
        .map_or_else(String::new, format_rollout))
}

/// `idgate channels rollout status`.
pub async fn status(addr: impl Into<AdminTarget>, token: &AdminToken) -> Result<String, CliError> {
    let mut client = connect(addr, token).await?;
    let resp = client
        .get_rollout(pb::GetRolloutRequest {})
        .await
        .map_err(explain)?
        .into_inner();
    Ok(resp.rollout.as_ref().map_or_else(
        || "no rollout was ever started\n".to_owned(),
        format_rollout,
    ))
}

/// `idgate channels rollout abort`.
pub async fn abort(addr: impl Into<AdminTarget>, token: &AdminToken) -> Result<String, CliError> {
    let mut client = connect(addr, token).await?;
    let resp = client
        .abort_rollout(pb::AbortRolloutRequest {})
        .await
        .map_err(explain)?
        .into_inner();
    Ok(resp
        .rollout
        .as_ref()
        .map_or_else(String::new, format_rollout))
}

/// `idgate channels probe NAME [--consume]`.
pub async fn probe(
    addr: impl Into<AdminTarget>,
    token: &AdminToken,
    name: &str,
    consume: bool,
) -> Result<String, CliError> {
    let mut client = connect(addr, token).await?;
    let resp = client
        .probe_channel(pb::ProbeChannelRequest {
            name: name.to_owned(),
            consume,
        })
        .await
        .map_err(explain)?
        .into_inner();
    Ok(format_probe(&resp))
}

fn state_text(state: i32) -> &'static str {
    match pb::RolloutState::try_from(state) {
        Ok(pb::RolloutState::Running) => "running",
        Ok(pb::RolloutState::Completed) => "completed",
        Ok(pb::RolloutState::RolledBack) => "ROLLED BACK",
        Ok(pb::RolloutState::Aborted) => "aborted",
        _ => "unknown",
    }
}

fn rate(r: f64) -> String {
    format!("{:.1}%", r * 100.0)
}

/// A rollout as text: where it stands, then one line per judged step.
pub fn format_rollout(r: &pb::Rollout) -> String {
    let mut out = String::new();
    let steps: Vec<String> = r.steps.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "rollout {} from {} to {}: {} at step {}/{} ({}% of new sessions to {})",
        r.id,
        r.from,
        r.to,
        state_text(r.state),
        r.step + 1,
        r.steps.len(),
        r.weight,
        r.to
    );
    let _ = writeln!(
        out,
        "steps {} | min sessions {} | max error rate {} | max pass-rate drop {}",
        steps.join(","),
        r.min_sessions,
        rate(r.max_error_rate),
        rate(r.max_pass_rate_drop)
    );
    if !r.breach.is_empty() {
        let _ = writeln!(out, "breach: {}", r.breach);
    }
    for v in &r.verdicts {
        let _ = writeln!(
            out,
            "  step {} at {}%: {}{} - {}",
            v.step + 1,
            v.weight,
            v.decision,
            if v.breach.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.breach)
            },
            v.detail
        );
    }
    out
}

/// A probe report as text: the verdict, then each check and field.
pub fn format_probe(p: &pb::ProbeChannelResponse) -> String {
    let mut out = String::new();
    let verdict = if p.conforming {
        "conforming"
    } else {
        "NOT CONFORMING"
    };
    let _ = writeln!(out, "channel {}: {verdict}", p.name);
    for c in &p.checks {
        let ms = c
            .elapsed
            .as_ref()
            .map_or(0, |d| d.seconds * 1_000 + i64::from(d.nanos) / 1_000_000);
        let _ = writeln!(
            out,
            "  {}: {} (HTTP {}, {} ms){}",
            c.name,
            if c.passed { "ok" } else { "FAILED" },
            c.http_status,
            ms,
            if c.problem.is_empty() {
                String::new()
            } else {
                format!(": {}", c.problem)
            }
        );
        for f in &c.fields {
            let _ = writeln!(
                out,
                "    {:<14} {:<8} found {}{}",
                f.field,
                f.expected,
                f.found,
                if f.passed { "" } else { "  <- wrong" }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_options_are_refused_before_anything_is_sent() {
        let opts = |edit: fn(&mut StartOptions)| {
            let mut o = StartOptions {
                to: "alternative".into(),
                ..StartOptions::default()
            };
            edit(&mut o);
            start_request(&o)
        };
        assert!(opts(|_| {}).is_ok());
        assert!(matches!(
            opts(|o| o.steps = Some("5,x,100".into())),
            Err(CliError::Argument {
                flag: "--steps",
                ..
            })
        ));
        assert!(matches!(
            opts(|o| o.step_minutes = Some(-1.0)),
            Err(CliError::Argument {
                flag: "--step-minutes",
                ..
            })
        ));
        assert!(matches!(
            opts(|o| o.max_error_rate = Some(2.0)),
            Err(CliError::Argument {
                flag: "--max-error-rate",
                ..
            })
        ));
        let fraction = opts(|o| o.step_minutes = Some(0.5)).expect("fractions of minutes");
        assert_eq!(fraction.step_duration.map(|d| d.seconds), Some(30));
    }
}
