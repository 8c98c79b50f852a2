//! The Grafana dashboard as a model Grafana accepts (ids, rows, the
//! datasource variable, trace links), and its variables made concrete so
//! Prometheus can run its queries.

use std::collections::BTreeSet;

use super::*;

#[test]
fn the_dashboard_is_a_grafana_model_with_unique_ids_and_a_datasource_variable() {
    let d = dashboard();
    assert!(d["title"].is_string() && d["uid"].is_string());
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 30));

    let variables = d["templating"]["list"].as_array().expect("templating.list");
    let var = |name: &str| variables.iter().find(|v| v["name"] == name);
    let ds = var("datasource").expect("a `datasource` variable");
    assert_eq!(
        (ds["type"].as_str(), ds["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
    assert!(
        var("journey_ref").is_some(),
        "a `journey_ref` variable for trace links"
    );

    let all = panels(&d);
    let ids: Vec<u64> = all
        .iter()
        .map(|p| p["id"].as_u64().expect("every panel has a numeric id"))
        .collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        ids.len(),
        "panel ids repeat: {ids:?}"
    );

    let rows: Vec<&str> = all
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        rows,
        [
            "Journeys",
            "RPCs",
            "Vendor channels",
            "Webhook",
            "Saturation",
            "Rollout",
            "Callers",
        ]
    );

    for p in all.iter().filter(|p| p["type"] != "row") {
        let title = p["title"].as_str().expect("title");
        assert!(
            p["gridPos"]["w"].is_u64() && p["gridPos"]["h"].is_u64(),
            "{title}: gridPos"
        );
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "{title}: datasource variable"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no targets");
        for t in targets {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "{title}: target datasource"
            );
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "{title}: expr"
            );
            assert!(t["refId"].is_string(), "{title}: refId");
        }
    }
    // Trace search links by journey reference on the journey and channel
    // panels (Tempo through Explore, Jaeger's UI).
    let linked = all
        .iter()
        .filter(|p| {
            p["links"].as_array().is_some_and(|links| {
                links.iter().any(|l| {
                    let url = l["url"].as_str().unwrap_or_default();
                    url.contains("idgate.journey_ref") && url.contains("${journey_ref}")
                })
            })
        })
        .count();
    assert!(linked >= 8, "{linked} panels link to a trace search");
}

#[test]
fn grafana_variables_are_substituted_in_queries() {
    assert_eq!(
        substitute(r#"sum(rate(x{channel=~"$channel"}[$__rate_interval]))"#),
        r#"sum(rate(x{channel=~".*"}[1m]))"#
    );
}
