//! What phase 1 reads before and after its measured run (the CPU ticks of
//! each process, Redis' own counters, the lines the gateway wrote) and the
//! figures per journey it makes of them.

use std::{collections::BTreeMap, time::Instant};

use crate::{child::Output, counters, cpu};

/// The processes of the run, by pid.
#[derive(Clone, Copy)]
pub struct Pids {
    pub gateway: u32,
    pub sandbox: u32,
    pub redis: u32,
}

/// The counters read at one moment.
pub struct Snapshot {
    at: Instant,
    /// CPU ticks (utime + stime, every thread) of the gateway, the sandbox,
    /// Redis, and this process (load generator, OTLP sink, stdout drains).
    cpu: [u64; 4],
    /// `INFO stats` as numbers.
    stats: BTreeMap<String, f64>,
    /// `INFO commandstats`: calls by command.
    commands: BTreeMap<String, f64>,
    /// `INFO memory`'s `used_memory`, in bytes.
    used_memory: f64,
    /// The bytes of the `INFO` answer itself: counted in the next
    /// snapshot's `total_net_output_bytes`, and not a journey's.
    info_bytes: f64,
    /// Lines and bytes the gateway wrote to stdout.
    log: (u64, u64),
}

/// The `INFO stats commandstats memory` request as Redis reads it (RESP),
/// counted in `total_net_input_bytes`.
const INFO_REQUEST_BYTES: f64 = 56.0;

impl Snapshot {
    /// Reads every counter; one `INFO` of Redis' (left out of the figures).
    pub async fn take(
        pids: Pids,
        redis: &mut redis::aio::MultiplexedConnection,
        gateway_output: &Output,
    ) -> anyhow::Result<Snapshot> {
        let text: String = redis::cmd("INFO")
            .arg("stats")
            .arg("commandstats")
            .arg("memory")
            .query_async(redis)
            .await?;
        let stats = counters::info_numbers(&text);
        Ok(Snapshot {
            at: Instant::now(),
            cpu: [
                cpu::process_ticks(pids.gateway)?,
                cpu::process_ticks(pids.sandbox)?,
                cpu::process_ticks(pids.redis)?,
                cpu::process_ticks(std::process::id())?,
            ],
            used_memory: stats.get("used_memory").copied().unwrap_or(0.0),
            stats,
            commands: counters::command_calls(&text),
            // A bulk string: `$<len>\r\n<text>\r\n`.
            info_bytes: (text.len() + text.len().to_string().len() + 5) as f64,
            log: gateway_output.read(),
        })
    }
}

/// Journey results held on Redis (`{p}result:<ref>`, which releases
/// before Redis carried no result wrote): how many, and their mean size
/// in bytes (`SCAN`, `STRLEN`; read after the run's last snapshot). None
/// is expected: the figure shows a result never reaches Redis.
pub async fn shared_results(
    redis: &mut redis::aio::MultiplexedConnection,
) -> anyhow::Result<(u64, f64)> {
    let pattern = format!("{}result:*", crate::setup::KEY_PREFIX);
    let (mut cursor, mut keys, mut bytes) = (0u64, 0u64, 0u64);
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(redis)
            .await?;
        for key in batch {
            let len: u64 = redis::cmd("STRLEN").arg(&key).query_async(redis).await?;
            keys += 1;
            bytes += len;
        }
        if next == 0 {
            return Ok((keys, bytes as f64 / keys.max(1) as f64));
        }
        cursor = next;
    }
}

/// Phase 1's figures per journey completed.
#[derive(Debug, PartialEq)]
pub struct Figures {
    pub journeys: u64,
    pub seconds: f64,
    /// CPU microseconds per journey: gateway, sandbox, Redis, this process.
    pub cpu_us: [f64; 4],
    /// Commands Redis processed, and its bytes in and out (`INFO stats`).
    pub redis_commands: f64,
    pub redis_in: f64,
    pub redis_out: f64,
    /// Redis' calls by command (`INFO commandstats`; a script's own calls
    /// counted besides its `EVAL`), most first.
    pub by_command: Vec<(String, f64)>,
    /// Access-log (and other) lines and bytes the gateway wrote.
    pub log_lines: f64,
    pub log_bytes: f64,
    /// Redis' `used_memory` at the end of the run, in bytes: what the
    /// journeys' keys hold at this rate (their records, for a day, most of
    /// it).
    pub redis_used_memory: f64,
}

impl Figures {
    /// The figures of `journeys` completed between `before` and `after`;
    /// `tick` is /proc's clock ticks per second.
    pub fn of(journeys: u64, before: &Snapshot, after: &Snapshot, tick: f64) -> Figures {
        let n = journeys.max(1) as f64;
        let stat = |key: &str| {
            after.stats.get(key).copied().unwrap_or(0.0)
                - before.stats.get(key).copied().unwrap_or(0.0)
        };
        let cpu_us = std::array::from_fn(|i| {
            after.cpu[i].saturating_sub(before.cpu[i]) as f64 / tick * 1e6 / n
        });
        let mut by_command: Vec<(String, f64)> = counters::delta(&before.commands, &after.commands)
            .into_iter()
            .filter(|(command, _)| command != "info")
            .map(|(command, calls)| (command, calls / n))
            .filter(|(_, per)| *per >= 0.005)
            .collect();
        by_command.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Figures {
            journeys,
            seconds: after.at.duration_since(before.at).as_secs_f64(),
            cpu_us,
            // The first snapshot's INFO is the run's, not a journey's.
            redis_commands: (stat("total_commands_processed") - 1.0) / n,
            redis_in: (stat("total_net_input_bytes") - INFO_REQUEST_BYTES) / n,
            redis_out: (stat("total_net_output_bytes") - before.info_bytes) / n,
            by_command,
            log_lines: after.log.0.saturating_sub(before.log.0) as f64 / n,
            log_bytes: after.log.1.saturating_sub(before.log.1) as f64 / n,
            redis_used_memory: after.used_memory,
        }
    }

    pub fn journeys_per_second(&self) -> f64 {
        self.journeys as f64 / self.seconds.max(f64::EPSILON)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn snapshot(at: Instant, cpu: [u64; 4], info: &str, log: (u64, u64)) -> Snapshot {
        Snapshot {
            at,
            cpu,
            stats: counters::info_numbers(info),
            commands: counters::command_calls(info),
            used_memory: counters::info_numbers(info)
                .get("used_memory")
                .copied()
                .unwrap_or(0.0),
            info_bytes: 1_000.0,
            log,
        }
    }

    #[test]
    fn the_figures_are_deltas_per_journey_without_the_runs_own_info() {
        let t = Instant::now();
        let before = snapshot(
            t,
            [100, 50, 10, 20],
            "# Stats\r\ntotal_commands_processed:1000\r\ntotal_net_input_bytes:44044\r\n\
             total_net_output_bytes:50000\r\n# Commandstats\r\n\
             cmdstat_set:calls=300,usec=900,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n",
            (10, 1_000),
        );
        let after = snapshot(
            t + Duration::from_secs(10),
            [300, 150, 20, 70],
            "total_commands_processed:1801\r\ntotal_net_input_bytes:144100\r\n\
             total_net_output_bytes:151000\r\nused_memory:5000000\r\n\
             cmdstat_set:calls=600,usec=1800,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_info:calls=8,usec=80,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_xadd:calls=100,usec=500,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_pexpire:calls=0,usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=0\r\n",
            (210, 81_000),
        );
        let f = Figures::of(100, &before, &after, 100.0);
        assert_eq!(f.seconds, 10.0);
        assert_eq!(f.journeys_per_second(), 10.0);
        // 200 ticks at 100 a second over 100 journeys: 20 ms = 20,000 us.
        assert_eq!(f.cpu_us, [20_000.0, 10_000.0, 1_000.0, 5_000.0]);
        assert_eq!(f.redis_commands, 8.0);
        assert_eq!((f.redis_in, f.redis_out), (1_000.0, 1_000.0));
        assert_eq!(
            f.by_command,
            vec![("set".to_owned(), 3.0), ("xadd".to_owned(), 1.0)]
        );
        assert_eq!((f.log_lines, f.log_bytes), (2.0, 800.0));
        assert_eq!(f.redis_used_memory, 5_000_000.0);
    }

    #[test]
    fn info_parsing_keeps_numbers_and_command_calls_only() {
        let info = "# Server\r\nredis_version:7.0.15\r\nprocess_id:4242\r\n\
                    used_cpu_sys:1.5\r\ncmdstat_evalsha:calls=12,usec=1\r\nbroken\r\n";
        let numbers = counters::info_numbers(info);
        assert_eq!(numbers.get("process_id"), Some(&4242.0));
        assert_eq!(numbers.get("used_cpu_sys"), Some(&1.5));
        // A version is no number.
        assert!(!numbers.contains_key("redis_version"));
        assert_eq!(
            counters::command_calls(info),
            BTreeMap::from([("evalsha".to_owned(), 12.0)])
        );
    }
}
