//! Every metric family the gateway exposes on `GET /metrics` is
//! documented in `docs/observability.md`.
//!
//! The families are read from the gateway's own exposition (`# HELP` and
//! `# TYPE` lines), not from a list kept here, so a metric registered
//! without a line in the doc fails this test.

use std::collections::BTreeSet;

use crate::support::gateway::TestGateway;

/// `docs/observability.md`, read from the repository.
fn observability_doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/observability.md");
    std::fs::read_to_string(path).expect("read docs/observability.md")
}

/// The metric family names of an exposition: the name after `# HELP` and
/// `# TYPE`.
fn families(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter_map(|line| {
            line.strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
        })
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Every metric-like word of the doc (`idgate_rpc_requests_total`, ...).
fn documented_names(doc: &str) -> BTreeSet<&str> {
    doc.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.contains('_'))
        .collect()
}

/// A family is documented under its own name or under the name its
/// samples carry (`_total` of a counter, `_bucket`/`_sum`/`_count` of a
/// histogram).
fn is_documented(family: &str, names: &BTreeSet<&str>) -> bool {
    ["", "_total", "_bucket", "_sum", "_count"]
        .iter()
        .any(|suffix| names.contains(format!("{family}{suffix}").as_str()))
}

#[tokio::test]
async fn every_metric_family_the_gateway_exposes_is_documented_in_observability_md() {
    let gw = TestGateway::start().await;
    // One journey, so that families filled in by traffic (RPCs, upstream
    // calls, channels, verifications) are present with their series.
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    gw.submit_rg(&appkey).await;
    let exposition = gw.metrics_text().await;
    gw.stop().await;

    let exposed = families(&exposition);
    assert!(
        exposed.contains("idgate_rpc_requests"),
        "the exposition lists its families:\n{exposition}"
    );
    let doc = observability_doc();
    let names = documented_names(&doc);
    let undocumented: Vec<&String> = exposed
        .iter()
        .filter(|family| !is_documented(family, &names))
        .collect();
    assert!(
        undocumented.is_empty(),
        "metric families exposed on /metrics but absent from docs/observability.md \
         (add a row to its Metrics table: type, labels, meaning): {undocumented:?}"
    );
}

#[test]
fn a_family_counts_as_documented_only_under_its_own_or_its_sample_names() {
    let names = documented_names(
        "| `idgate_rpc_requests_total` | counter |\n\
         | `idgate_rpc_duration_seconds` | histogram |\n\
         see idgate_watch_watchers.",
    );
    assert!(is_documented("idgate_rpc_requests", &names));
    assert!(is_documented("idgate_rpc_duration_seconds", &names));
    assert!(is_documented("idgate_watch_watchers", &names));
    // A prefix of a documented name is not documented.
    assert!(!is_documented("idgate_rpc", &names));
    assert!(!is_documented("idgate_watch_journeys", &names));
    assert_eq!(
        families("# HELP idgate_x Help text.\n# TYPE idgate_x counter\nidgate_x_total 1\n# EOF"),
        BTreeSet::from(["idgate_x".to_owned()])
    );
}
