//! What Redis and the replicas count: the Redis commands a gateway sent
//! (`idgate_cluster_operations_total`) and what Redis says it processed
//! (`INFO stats`, `INFO commandstats`). Shared by the fleet examples
//! (included by path).

use std::collections::BTreeMap;

/// `idgate_cluster_operations_total` of a `/metrics` text, by command: the
/// Redis commands a gateway sent.
pub fn cluster_commands(metrics: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("idgate_cluster_operations_total{command=\"") else {
            continue;
        };
        let Some((command, rest)) = rest.split_once('"') else {
            continue;
        };
        if let Some(value) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *out.entry(command.to_owned()).or_default() += value;
        }
    }
    out
}

/// `field:value` of a Redis `INFO` text, as numbers.
pub fn info_numbers(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| Some((k.to_owned(), v.trim().parse().ok()?)))
        .collect()
}

/// Calls by command of an `INFO commandstats` text
/// (`cmdstat_get:calls=12,usec=...`).
pub fn command_calls(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_")?.split_once(':'))
        .filter_map(|(command, fields)| {
            let calls = fields.split(',').find_map(|f| f.strip_prefix("calls="))?;
            Some((command.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// `after - before`, command by command (absent before: zero).
pub fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}
