//! One row's measurement (warm-up, then the measured phase with CPU read
//! from `/proc` around it) and the report of all rows.

use std::{
    net::SocketAddr,
    process::Command,
    time::{Duration, Instant},
};

use crate::{
    Args,
    load::{Load, Tally, Target, drive},
    otlp_sink::SpanTally,
};

/// One row's figures.
pub struct Row {
    pub name: String,
    pub load: Load,
    pub elapsed: Duration,
    pub tally: Tally,
    pub hop_cpu_us: Option<f64>,
    pub bench_cpu_us: f64,
    /// Calls answered, the warm-up's included: what idgate traced.
    pub served: usize,
    /// What the OTLP sink received while this row's idgate ran.
    pub spans: Option<SpanTally>,
    /// Lines and bytes idgate wrote to stdout from serving to exit.
    pub log: Option<(u64, u64)>,
    /// idgate's `/metrics` series about span export, read before it stopped.
    pub exporter_series: Vec<String>,
}

impl Row {
    pub fn calls_per_second(&self) -> f64 {
        self.tally.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// Mean, p50, p99 and max, in milliseconds.
    pub fn latency_ms(&self) -> [f64; 4] {
        let l = &self.tally.latencies;
        if l.is_empty() {
            return [0.0; 4];
        }
        let at = |q: f64| l[((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1];
        let mean = l.iter().map(|&n| n as f64).sum::<f64>() / l.len() as f64;
        [mean, at(0.50) as f64, at(0.99) as f64, at(1.0) as f64].map(|n| n / 1e6)
    }

    /// Spans received per call served.
    pub fn spans_per_call(&self) -> Option<f64> {
        self.spans
            .map(|s| s.spans as f64 / self.served.max(1) as f64)
    }
}

/// utime + stime of `pid` (`self` for this process), all its threads,
/// those that ended included, in clock ticks.
pub fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which sits in parentheses; utime and
    // stime are fields 14 and 15 of proc(5).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

pub fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` has them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

/// Warm-up, then the measured phase, reading CPU around it.
pub async fn measure(
    name: &str,
    target: Target,
    addr: SocketAddr,
    hop_pid: Option<u32>,
    args: &Args,
) -> anyhow::Result<Row> {
    let load = |calls| Load {
        calls,
        connections: args.connections.max(1),
        streams: args.streams.max(1),
    };
    let limit = Duration::from_secs(args.max_seconds);
    let mut served = 0;
    if args.warmup > 0 {
        served += drive(target.clone(), addr, load(args.warmup), limit)
            .await?
            .ok;
    }
    let hz = clock_ticks_per_second() as f64;
    let hop_pid = hop_pid.map(|p| p.to_string());
    let hop_before = hop_pid.as_deref().map(cpu_ticks);
    let bench_before = cpu_ticks("self");
    let started = Instant::now();
    let mut tally = drive(target, addr, load(args.calls), limit).await?;
    let elapsed = started.elapsed();
    let bench_ticks = cpu_ticks("self") - bench_before;
    let hop_ticks = hop_pid
        .as_deref()
        .map(cpu_ticks)
        .zip(hop_before)
        .map(|(a, b)| a - b);
    tally.latencies.sort_unstable();
    let per_call = |ticks: u64| ticks as f64 / hz * 1e6 / tally.ok.max(1) as f64;
    Ok(Row {
        name: name.to_owned(),
        load: load(args.calls),
        elapsed,
        hop_cpu_us: hop_ticks.map(per_call),
        bench_cpu_us: per_call(bench_ticks),
        served: served + tally.ok,
        spans: None,
        log: None,
        exporter_series: Vec::new(),
        tally,
    })
}

/// What the sink's count says about lost spans.
fn span_note(name: &str, spans: &SpanTally, served: usize, series: &[String]) -> String {
    let expected = spans.expected(served);
    let missing = spans.missing(served);
    let mut note = format!(
        "{name}: the OTLP sink received {} spans in {} exports for {served} calls ({:.2} per call); \
         a call makes {} (the commonest trace), so a lossless export is at least {expected}: {missing} missing ({:.1} %)",
        spans.spans,
        spans.exports,
        spans.spans as f64 / served.max(1) as f64,
        spans.spans_per_call,
        missing as f64 * 100.0 / expected.max(1) as f64,
    );
    if spans.other_spans > 0 {
        note += &format!(
            "; {} spans of other traces (health checks, /metrics, background Redis commands) left out",
            spans.other_spans
        );
    }
    if spans.undecodable > 0 {
        note += &format!("; {} exports could not be decoded", spans.undecodable);
    }
    if series.is_empty() {
        note +=
            "; idgate's /metrics has no exporter series (received vs expected is the drop count)";
    } else {
        note += &format!("; idgate's /metrics: {}", series.join(", "));
    }
    note
}

pub fn print_rows(rows: &[Row], json: bool, load_before: &str) {
    println!(
        "{:<30} {:>9} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>15} {:>17} {:>10}",
        "target",
        "calls/s",
        "ok",
        "failed",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "max ms",
        "hop CPU us/call",
        "bench CPU us/call",
        "spans/call"
    );
    for r in rows {
        let [mean, p50, p99, max] = r.latency_ms();
        let or_dash = |v: Option<f64>, digits: usize| {
            v.map(|c| format!("{c:.digits$}"))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<30} {:>9.0} {:>7} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>15} {:>17.1} {:>10}",
            r.name,
            r.calls_per_second(),
            r.tally.ok,
            r.tally.failed,
            mean,
            p50,
            p99,
            max,
            or_dash(r.hop_cpu_us, 1),
            r.bench_cpu_us,
            or_dash(r.spans_per_call(), 2),
        );
    }
    if let Some(r) = rows.first() {
        println!(
            "{} calls per row over {} connections x {} streams (one process: load generator + upstream + OTLP sink + stdout drain; idgate: a child process); load average before {load_before}, after {}",
            r.load.calls,
            r.load.connections,
            r.load.streams,
            load_average()
        );
    }
    for r in rows {
        if let Some(spans) = &r.spans {
            println!(
                "{}",
                span_note(&r.name, spans, r.served, &r.exporter_series)
            );
        }
        if let Some((lines, bytes)) = r.log {
            println!(
                "{}: idgate wrote {lines} lines ({bytes} bytes) to stdout for {} calls ({:.2} lines, {:.0} bytes per call)",
                r.name,
                r.served,
                lines as f64 / r.served.max(1) as f64,
                bytes as f64 / r.served.max(1) as f64
            );
        }
        if let Some(e) = &r.tally.first_error {
            println!("{}: first failure: {e}", r.name);
        }
    }
    if json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                let [mean, p50, p99, max] = r.latency_ms();
                serde_json::json!({
                    "target": r.name,
                    "calls": r.load.calls,
                    "connections": r.load.connections,
                    "streams": r.load.streams,
                    "ok": r.tally.ok,
                    "failed": r.tally.failed,
                    "calls_per_second": r.calls_per_second(),
                    "latency_ms": {"mean": mean, "p50": p50, "p99": p99, "max": max},
                    "hop_cpu_us_per_call": r.hop_cpu_us,
                    "bench_cpu_us_per_call": r.bench_cpu_us,
                    "served": r.served,
                    "otlp_spans_received": r.spans.map(|s| s.spans),
                    "otlp_spans_expected": r.spans.map(|s| s.expected(r.served)),
                    "otlp_other_spans": r.spans.map(|s| s.other_spans),
                    "otlp_spans_per_call": r.spans_per_call(),
                    "exporter_series": r.exporter_series,
                    "stdout_lines": r.log.map(|(l, _)| l),
                    "stdout_bytes": r.log.map(|(_, b)| b),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_spent_cpu() {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_ticks("self") > 0);
        assert_eq!(cpu_ticks("no-such-process"), 0);
        assert!(clock_ticks_per_second() > 0);
    }

    #[test]
    fn the_span_note_counts_the_missing_spans() {
        let spans = SpanTally {
            exports: 4,
            undecodable: 0,
            spans: 270,
            traces: 100,
            other_spans: 0,
            spans_per_call: 3,
            short: 30,
        };
        let note = span_note("deployed", &spans, 100, &[]);
        assert!(
            note.contains("a lossless export is at least 300: 30 missing (10.0 %)"),
            "{note}"
        );
        assert!(note.contains("no exporter series"), "{note}");
    }
}
