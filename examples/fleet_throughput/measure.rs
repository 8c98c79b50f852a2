//! What a measured run reads before and after (CPU ticks of each part of
//! the run, Redis' counters, what the replicas sent), and the figures it
//! makes of them.

use std::{collections::BTreeMap, time::Instant};

use super::{Load, counters, cpu, envoy::Envoy, journey::pct, replica::Replica};

/// The counters read before and after a measured run.
pub struct Snapshot {
    at: Instant,
    /// CPU ticks by part: replicas, Envoy, sandbox, Redis, this process.
    replicas: u64,
    envoy: u64,
    sandbox: u64,
    redis: u64,
    own: u64,
    /// Redis' `total_commands_processed` and its calls by command.
    redis_commands: f64,
    redis_by_command: BTreeMap<String, f64>,
    /// `idgate_cluster_operations_total` of the running replicas, summed.
    sent: BTreeMap<String, f64>,
}

/// The fleet's processes and the handles to read them.
pub struct Fleet<'a> {
    pub replicas: &'a [Replica],
    pub envoy: &'a Envoy,
    pub redis_pid: u32,
    pub redis: redis::aio::MultiplexedConnection,
    pub http: reqwest::Client,
}

impl Fleet<'_> {
    pub async fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        // One INFO: between two snapshots Redis counts exactly one of ours.
        let text: String = redis::cmd("INFO")
            .arg("stats")
            .arg("commandstats")
            .query_async(&mut self.redis)
            .await?;
        let mut sent = BTreeMap::new();
        for r in self.replicas.iter().filter(|r| r.pid().is_some()) {
            let metrics = self
                .http
                .get(format!("http://127.0.0.1:{}/metrics", r.http))
                .send()
                .await?
                .error_for_status()?
                .text()
                .await?;
            for (command, n) in counters::cluster_commands(&metrics) {
                *sent.entry(command).or_default() += n;
            }
        }
        let mut replicas = 0;
        for pid in self.replicas.iter().filter_map(Replica::pid) {
            replicas += cpu::process_ticks(pid)?;
        }
        Ok(Snapshot {
            at: Instant::now(),
            replicas,
            envoy: cpu::process_ticks(self.envoy.pid())?,
            sandbox: cpu::own_threads_ticks("sandbox")?,
            redis: cpu::process_ticks(self.redis_pid)?,
            own: cpu::process_ticks(std::process::id())?,
            redis_commands: counters::info_numbers(&text)
                .get("total_commands_processed")
                .copied()
                .unwrap_or(0.0),
            redis_by_command: counters::command_calls(&text),
            sent,
        })
    }
}

/// One replica count's figures.
pub struct Row {
    replicas: usize,
    load: Load,
    elapsed: f64,
    /// CPU milliseconds per journey: replicas, Envoy, sandbox, Redis, load
    /// generator.
    cpu_ms: [f64; 5],
    redis_per_journey: f64,
    sent_per_journey: f64,
    by_command: Vec<(String, f64)>,
}

impl Row {
    pub fn of(
        replicas: usize,
        load: Load,
        before: &Snapshot,
        after: &Snapshot,
        tick: f64,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            load.completed > 0,
            "{replicas} replicas: no journey completed"
        );
        let n = load.completed as f64;
        let ms = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / tick * 1e3 / n;
        let sandbox = ms(before.sandbox, after.sandbox);
        let cpu_ms = [
            ms(before.replicas, after.replicas),
            ms(before.envoy, after.envoy),
            sandbox,
            ms(before.redis, after.redis),
            ms(before.own, after.own) - sandbox,
        ];
        let mut by_command: Vec<(String, f64)> =
            counters::delta(&before.redis_by_command, &after.redis_by_command)
                .into_iter()
                .filter(|(c, _)| c != "info")
                .map(|(c, v)| (c, v / n))
                .filter(|(_, v)| *v >= 0.005)
                .collect();
        by_command.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(Self {
            replicas,
            elapsed: after.at.duration_since(before.at).as_secs_f64(),
            cpu_ms,
            // The `INFO` of the first snapshot is the run's own, not a journey's.
            redis_per_journey: (after.redis_commands - before.redis_commands - 1.0) / n,
            sent_per_journey: counters::delta(&before.sent, &after.sent)
                .values()
                .sum::<f64>()
                / n,
            by_command,
            load,
        })
    }

    pub fn rate(&self) -> f64 {
        self.load.completed as f64 / self.elapsed
    }

    pub fn failed(&self) -> u64 {
        self.load.failed.values().sum()
    }

    fn print(&self) {
        let [replicas, envoy, sandbox, redis, loadgen] = self.cpu_ms;
        let total: f64 = self.cpu_ms.iter().sum();
        println!(
            "| {} | {:.1} | {:.0} / {:.0} ms | {} | {:.1} | {:.1} | {replicas:.2} | {envoy:.2} | {sandbox:.2} | {redis:.2} | {loadgen:.2} | {total:.2} | {:.2} |",
            self.replicas,
            self.rate(),
            pct(&self.load.latencies, 0.5).as_secs_f64() * 1e3,
            pct(&self.load.latencies, 0.99).as_secs_f64() * 1e3,
            self.failed(),
            self.redis_per_journey,
            self.sent_per_journey,
            total * self.rate() / 1e3,
        );
    }
}

pub fn report(rows: &[Row]) {
    println!(
        "\n| replicas | journeys/s | journey p50 / p99 | failed | Redis commands per journey (INFO) | sent by the replicas per journey | CPU ms per journey: replicas | Envoy | sandbox | Redis | load generator | all | cores busy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        row.print();
    }
    println!("\nRedis commands per journey, by command (INFO commandstats):");
    for row in rows {
        let list: Vec<String> = row
            .by_command
            .iter()
            .map(|(c, v)| format!("{v:.2} {c}"))
            .collect();
        println!("- {} replicas: {}", row.replicas, list.join(", "));
    }
    println!("\nStep latency p50 / p99 (ms):");
    for row in rows {
        let list: Vec<String> = row
            .load
            .steps
            .iter()
            .map(|(step, v)| {
                format!(
                    "{step} {:.1} / {:.1}",
                    pct(v, 0.5).as_secs_f64() * 1e3,
                    pct(v, 0.99).as_secs_f64() * 1e3
                )
            })
            .collect();
        println!("- {} replicas: {}", row.replicas, list.join(", "));
    }
    println!("\nProjection from CPU per journey (one core each):");
    for row in rows {
        let [replicas, envoy, _, redis, _] = row.cpu_ms;
        println!(
            "- {} replicas: a replica with a core of its own ~{:.0} journeys/s ({replicas:.2} ms); Envoy ~{:.0}/s per core; Redis ~{:.0}/s per core",
            row.replicas,
            1e3 / replicas,
            1e3 / envoy,
            1e3 / redis
        );
    }
    for row in rows.iter().filter(|r| r.failed() > 0) {
        println!(
            "\nfailed with {} replicas: {:?}",
            row.replicas, row.load.failed
        );
    }
}
