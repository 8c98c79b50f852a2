//! The printed report: phase 1's rate, latencies and costs per journey,
//! phase 2's memory per open watch. Figures only: no appkey, token, CPF,
//! name or image ever reaches it.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    journey::pct, load::Load, measure::Figures, otlp_sink::SpanTally, setup::WatchRoom,
    watches::WatchFigures,
};

/// The cores this process may run on.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, usize::from)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn failures(failed: &BTreeMap<String, u64>) -> String {
    if failed.is_empty() {
        return "none".to_owned();
    }
    failed
        .iter()
        .map(|(key, n)| format!("{n} {key}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Spans received per journey, and the `StartSession3D` traces among them
/// (one per journey when no span was dropped).
pub struct Spans {
    pub tally: SpanTally,
    pub journeys: u64,
}

pub fn phase1(
    load: &Load,
    figures: &Figures,
    spans: &Spans,
    rss_kib: u64,
    (shared, shared_bytes): (u64, f64),
) {
    println!(
        "\nPhase 1: {} journeys completed in {:.1} s = {:.1} journeys/s for the replica; failed: {}",
        figures.journeys,
        figures.seconds,
        figures.journeys_per_second(),
        failures(&load.failed)
    );
    println!("\n| RPC | p50 ms | p99 ms |\n|---|---|---|");
    for (step, latencies) in &load.steps {
        println!(
            "| {step} | {:.1} | {:.1} |",
            ms(pct(latencies, 0.5)),
            ms(pct(latencies, 0.99))
        );
    }
    println!(
        "| whole journey | {:.1} | {:.1} |",
        ms(pct(&load.latencies, 0.5)),
        ms(pct(&load.latencies, 0.99))
    );
    let [gateway, sandbox, redis, own] = figures.cpu_us;
    let busy = (gateway + sandbox + redis + own) * figures.journeys_per_second() / 1e6;
    let by_command: Vec<String> = figures
        .by_command
        .iter()
        .map(|(command, n)| format!("{n:.2} {command}"))
        .collect();
    let t = &spans.tally;
    let per = |n: u64| n as f64 / spans.journeys.max(1) as f64;
    println!("\n| per journey | |\n|---|---|");
    println!("| gateway CPU (utime + stime, all threads) | {gateway:.0} µs |");
    println!("| sandbox CPU (the vendor's stand-in) | {sandbox:.0} µs |");
    println!("| Redis CPU | {redis:.0} µs |");
    println!("| this process's CPU (load generator, OTLP sink, stdout drains) | {own:.0} µs |");
    println!(
        "| cores busy, all four together (of the machine's {}) | {busy:.2} |",
        cores()
    );
    println!(
        "| Redis commands processed (INFO stats) | {:.2} |",
        figures.redis_commands
    );
    println!(
        "| Redis bytes in / out | {:.0} / {:.0} B |",
        figures.redis_in, figures.redis_out
    );
    println!(
        "| Redis calls by command (INFO commandstats) | {} |",
        by_command.join(", ")
    );
    println!(
        "| spans received by the OTLP sink | {:.2} ({:.2} StartSession3D traces: 1.00 when none was lost) |",
        per(t.spans + t.other_spans),
        per(t.traces)
    );
    println!(
        "| gateway stdout (JSON access log and other lines) | {:.2} lines, {:.0} B |",
        figures.log_lines, figures.log_bytes
    );
    println!(
        "at the end of the run: the gateway's RSS {:.1} MiB; Redis used_memory {:.1} MiB ({:.2} MiB per journey a second)",
        rss_kib as f64 / 1024.0,
        figures.redis_used_memory / (1024.0 * 1024.0),
        figures.redis_used_memory
            / (1024.0 * 1024.0)
            / figures.journeys_per_second().max(f64::EPSILON)
    );
    println!(
        "journey results held on Redis at the end ({{p}}result:<ref>, none expected): {shared}, {shared_bytes:.0} B each on average"
    );
    println!(
        "(spans over every journey of the phase, warm-up included: {} journeys, {} exports{})",
        spans.journeys,
        t.exports,
        if t.undecodable > 0 {
            format!(", {} undecodable", t.undecodable)
        } else {
            String::new()
        }
    );
}

pub fn phase2(figures: &WatchFigures, room: &WatchRoom) {
    let [before, created, open] = figures.rss_kib;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "\nPhase 2 (run first, on the fresh replica): {} of {} WatchJourney streams open on journeys that stay open, over {} connections ({} streams each at most); failed: {}",
        figures.opened,
        figures.wanted,
        figures.connections,
        figures.per_connection,
        failures(&figures.failed)
    );
    println!(
        "gateway RSS: {:.1} MiB before, {:.1} MiB after creating the journeys ({:.1} s), {:.1} MiB with the streams open ({:.1} s to open)",
        mib(before),
        mib(created),
        figures.create_seconds,
        mib(open),
        figures.open_seconds
    );
    println!(
        "per 10,000 open watches: {:.1} MiB ({:.2} KiB a watch); the gateway's gauges: idgate_watch_watchers {}, idgate_watch_journeys {}",
        figures.kib_per_10k() / 1024.0,
        figures.kib_per_10k() / 10_000.0,
        figures
            .gauges
            .0
            .map_or("-".to_owned(), |v| format!("{v:.0}")),
        figures
            .gauges
            .1
            .map_or("-".to_owned(), |v| format!("{v:.0}")),
    );
    let grace = if figures.oldest_watch_seconds < 30.0 {
        "within [watch] webhook_grace_secs (30): no watch had begun reading the vendor"
    } else {
        "past [watch] webhook_grace_secs (30): the oldest watches had begun reading the vendor's result"
    };
    println!(
        "the oldest watch was {:.1} s old at the last reading, {grace}",
        figures.oldest_watch_seconds
    );
    let raised = room.raised();
    if !raised.is_empty() {
        println!("watch limits raised: {}", raised.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentile_is_the_nearest_rank_of_the_sorted_latencies() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(pct(&sorted, 0.5), Duration::from_millis(51));
        assert_eq!(pct(&sorted, 0.99), Duration::from_millis(99));
        assert_eq!(pct(&sorted, 1.0), Duration::from_millis(100));
        assert_eq!(pct(&sorted[..1], 0.99), Duration::from_millis(1));
        assert_eq!(pct(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn failures_are_listed_by_key_or_none() {
        assert_eq!(failures(&BTreeMap::new()), "none");
        let failed = BTreeMap::from([
            ("Unavailable".to_owned(), 2),
            ("ResourceExhausted OVERLOADED".to_owned(), 1),
        ]);
        assert_eq!(
            failures(&failed),
            "1 ResourceExhausted OVERLOADED, 2 Unavailable"
        );
    }
}
