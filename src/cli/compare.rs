//! `idgate channels compare`: the vendor figures of every channel, for the
//! whole fleet, side by side.
//!
//! A replica of a fleet whose Redis answers gives the fleet's figures
//! (`FIGURES_SCOPE_FLEET`): one `--gateway`, any replica, is enough, and
//! the first such answer is the result (adding several would count every
//! call several times). Otherwise each gateway answers with its own raw
//! counts (a replica counts only the calls it sent) and this command adds
//! the answers up, so `--gateway` once per replica gives the fleet's
//! figures. From the
//! sums it derives what a migration decision needs: pass rate with a 95%
//! Wilson interval, p50/p95 latency of both 3D operations (from the merged
//! histograms, so the percentiles are the fleet's, not an average of
//! replicas'), error rate and contingency rate.

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use serde_json::{Value, json};

use super::channels::{AdminTarget, CliError, connect, explain};
use crate::{
    api::figures::{figures_from_proto, seconds},
    channels::figures::{ChannelFigures, LatencyHistogram},
    domain::AdminToken,
    proto::v1 as pb,
};

/// Longest `--window`: 7 days, the longest retention a gateway accepts.
const MAX_WINDOW_SECS: u64 = 7 * 24 * 3_600;

/// Parses `--window`: a whole number with a unit, `s`, `m`, `h` or `d`
/// (`90s`, `30m`, `1h`, `2d`); a bare number is seconds.
pub fn parse_window(text: &str) -> Result<u32, CliError> {
    let text = text.trim();
    let bad = || CliError::Window("a whole number with s, m, h or d, e.g. 1h, up to 7d");
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    if digits.is_empty() || digits.len() > 9 {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3_600,
        "d" => n * 86_400,
        _ => return Err(bad()),
    };
    if secs == 0 || secs > MAX_WINDOW_SECS {
        return Err(bad());
    }
    u32::try_from(secs).map_err(|_| bad())
}

/// Whose calls an answer of `compare` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole fleet's, from its Redis, through one gateway.
    Fleet,
    /// The sum of each gateway's own calls.
    Replicas,
}

/// The figures of `targets` over `window_secs`: the fleet's if a gateway
/// answers for it, else the sum of every gateway's own; the text table,
/// or JSON when `json`. An address given twice is asked once (its figures
/// would count twice).
pub async fn compare(
    mut targets: Vec<AdminTarget>,
    token: &AdminToken,
    window_secs: u32,
    json: bool,
) -> Result<String, CliError> {
    let mut seen = std::collections::HashSet::new();
    targets.retain(|t| seen.insert(t.addr.trim_end_matches('/').to_owned()));
    let mut sum: BTreeMap<String, ChannelFigures> = BTreeMap::new();
    let mut fleet = None;
    let mut window = window_secs;
    let count = targets.len();
    for target in targets {
        let mut client = connect(target, token).await?;
        let resp = client
            .get_channel_figures(pb::GetChannelFiguresRequest {
                window: Some(seconds(window_secs)),
            })
            .await
            .map_err(explain)?
            .into_inner();
        window = resp
            .window
            .and_then(|w| u32::try_from(w.seconds).ok())
            .unwrap_or(window_secs);
        if resp.scope() == pb::FiguresScope::Fleet {
            fleet = Some(figures_from_proto(&resp)?);
            break;
        }
        for (name, figures) in figures_from_proto(&resp)? {
            sum.entry(name).or_default().merge(&figures);
        }
    }
    let (scope, gateways, figures) = match fleet {
        Some(figures) => (Scope::Fleet, 1, figures),
        None => (Scope::Replicas, count, sum),
    };
    Ok(if json {
        format!("{:#}\n", figures_json(window, scope, gateways, &figures))
    } else {
        format_compare(window, scope, gateways, &figures)
    })
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

fn millis(d: Option<Duration>) -> String {
    match d {
        None => "-".to_owned(),
        Some(d) if d < Duration::from_millis(10) => format!("{:.1}ms", d.as_secs_f64() * 1e3),
        Some(d) => format!("{:.0}ms", d.as_secs_f64() * 1e3),
    }
}

fn latency_pair(h: &LatencyHistogram) -> String {
    format!("{}/{}", millis(h.quantile(0.5)), millis(h.quantile(0.95)))
}

const HEADER: &str = "CHANNEL              SESSIONS  VERIFICATIONS  PASS    PASS_95%_CI      SESSION_P50/P95    LIVENESS_P50/P95   ERRORS  CONTINGENCY";

/// The table of `idgate channels compare`.
pub fn format_compare(
    window_secs: u32,
    scope: Scope,
    gateways: usize,
    figures: &BTreeMap<String, ChannelFigures>,
) -> String {
    let mut out = String::new();
    let window = window_text(window_secs);
    let _ = match scope {
        Scope::Fleet => writeln!(
            out,
            "figures of the last {window} of the whole fleet (from its Redis, through one gateway)"
        ),
        Scope::Replicas => writeln!(
            out,
            "figures of the last {window} summed over {gateways} gateway(s) (each its own calls)"
        ),
    };
    let _ = writeln!(out, "{HEADER}");
    for (name, t) in figures {
        let pass = t.pass_rate();
        let _ = writeln!(
            out,
            "{:<20} {:>8}  {:>13}  {:<6}  {:<15}  {:<17}  {:<17}  {:>6}  {:>11}",
            name,
            t.sessions_started,
            t.verifications(),
            percent(pass.map(|p| p.0)),
            pass.map_or_else(
                || "-".to_owned(),
                |(_, lo, hi)| format!("{}-{}", percent(Some(lo)), percent(Some(hi)))
            ),
            latency_pair(&t.session_latency),
            latency_pair(&t.liveness_latency),
            percent(t.error_rate()),
            percent(t.contingency_rate()),
        );
    }
    let _ = writeln!(
        out,
        "(PASS: valid / (valid + invalid 300.1 + blocked 300.2); ERRORS: failed calls / calls, both operations; CONTINGENCY: isContingency answers / sessions)"
    );
    out
}

fn window_text(secs: u32) -> String {
    match secs {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The JSON of `idgate channels compare --json`: the derived figures and
/// the raw counts they come from.
pub fn figures_json(
    window_secs: u32,
    scope: Scope,
    gateways: usize,
    figures: &BTreeMap<String, ChannelFigures>,
) -> Value {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let errors = |e: &crate::channels::figures::ErrorCounts| {
        e.classes()
            .map(|(c, n)| (c.to_owned(), json!(n)))
            .collect::<serde_json::Map<_, _>>()
    };
    let channels: Vec<Value> = figures
        .iter()
        .map(|(name, t)| {
            let pass = t.pass_rate();
            json!({
                "channel": name,
                "sessions": t.sessions_started,
                "contingency_answers": t.contingency_answers,
                "session_errors": errors(&t.session_errors),
                "verifications": t.verifications(),
                "valid": t.valid,
                "invalid": t.invalid,
                "blocked": t.blocked,
                "other": t.other,
                "verification_errors": errors(&t.verification_errors),
                "pass_rate": pass.map(|p| p.0),
                "pass_rate_ci95": pass.map(|(_, lo, hi)| [lo, hi]),
                "session_p50_seconds": secs(t.session_latency.quantile(0.5)),
                "session_p95_seconds": secs(t.session_latency.quantile(0.95)),
                "liveness_p50_seconds": secs(t.liveness_latency.quantile(0.5)),
                "liveness_p95_seconds": secs(t.liveness_latency.quantile(0.95)),
                "error_rate": t.error_rate(),
                "contingency_rate": t.contingency_rate(),
            })
        })
        .collect();
    json!({
        "window_seconds": window_secs,
        "scope": match scope {
            Scope::Fleet => "fleet",
            Scope::Replicas => "replicas",
        },
        "gateways": gateways,
        "channels": channels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_with_their_unit_and_bad_ones_are_refused() {
        assert_eq!(parse_window("1h").unwrap(), 3_600);
        assert_eq!(parse_window("30m").unwrap(), 1_800);
        assert_eq!(parse_window("90").unwrap(), 90);
        assert_eq!(parse_window("7d").unwrap(), 604_800);
        for bad in ["", "h", "0h", "8d", "1w", "-1h", "1.5h", "99999999999999h"] {
            assert!(parse_window(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_table_shows_pass_rate_interval_latency_and_rates() {
        let mut t = ChannelFigures {
            sessions_started: 10,
            contingency_answers: 1,
            valid: 9,
            invalid: 1,
            ..ChannelFigures::default()
        };
        for _ in 0..10 {
            t.liveness_latency.observe(Duration::from_millis(700));
        }
        let figures = BTreeMap::from([("alternative".to_owned(), t)]);
        let text = format_compare(3_600, Scope::Replicas, 2, &figures);
        assert!(text.contains("last 1h summed over 2 gateway(s)"), "{text}");
        let row = text.lines().find(|l| l.starts_with("alternative")).unwrap();
        for want in ["90.0%", "59.6%-98.2%", "10.0%", "0.0%", "-/-"] {
            assert!(row.contains(want), "{want} in {row}");
        }
        let v = figures_json(3_600, Scope::Replicas, 2, &figures);
        assert_eq!(v["scope"], "replicas");
        let fleet = format_compare(3_600, Scope::Fleet, 1, &figures);
        assert!(fleet.contains("last 1h of the whole fleet"), "{fleet}");
        assert_eq!(v["channels"][0]["invalid"], 1);
        assert!(v["channels"][0]["liveness_p50_seconds"].as_f64().unwrap() > 0.5);
    }
}
