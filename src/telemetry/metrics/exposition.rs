//! The one exact reader of the Prometheus text exposition in tests: a
//! series is matched by name and whole label set and its value parsed as
//! a number, never found by substring (`contains("…} 1")` also passes on
//! `} 10` or `} 12.5`); a missing series read as 0 would let a renamed
//! metric pass `== 0`, so a metric the exposition does not declare
//! panics.
//!
//! Compiled for the library's unit tests only, and shared by path with
//! the integration tests (tests/it/support/metrics.rs), so both read
//! metrics the same way. Depends on nothing but `std` for that reason.

/// The value of the series `name{labels}` in `text` (the exposition
/// format); the labels must match the series' whole label set, in any
/// order. Panics, showing the exposition, when no such series exists.
pub fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut wanted: Labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    wanted.sort();
    samples(text)
        .find(|(n, l, _)| *n == name && *l == wanted)
        .map(|(_, _, v)| v)
        .unwrap_or_else(|| panic!("no series {name}{labels:?} in\n{text}"))
}

/// [`value`] of a series written as exposed (`name{a="x",b="y"}` or
/// `name`), its labels in any order. Panics when no such series exists.
pub fn series(text: &str, written: &str) -> f64 {
    let (name, wanted) = parse_series(written);
    samples(text)
        .find(|(n, l, _)| *n == name && *l == wanted)
        .map(|(_, _, v)| v)
        .unwrap_or_else(|| panic!("no series {written} in\n{text}"))
}

/// The value of a counter's series written as exposed (`name{a="x"}` or
/// `name`), 0 when that label set was never counted (a labelled counter
/// is exposed from its first count) but only while the metric `name`
/// itself is declared (its `# TYPE` line, which the encoder writes once
/// the family has any sample): a renamed metric panics instead of
/// reading 0.
pub fn counted(text: &str, written: &str) -> f64 {
    let (name, wanted) = parse_series(written);
    assert_declared(text, &name);
    samples(text)
        .find(|(n, l, _)| *n == name && *l == wanted)
        .map_or(0.0, |(_, _, v)| v)
}

/// Whether the series written as exposed has reached `at_least`; false
/// while it is not exposed (the encoder leaves out a labelled family
/// until its first count). For waits only: a renamed metric never
/// reaches, so the wait fails at its deadline instead of passing.
pub fn reached(text: &str, written: &str, at_least: f64) -> bool {
    let (name, wanted) = parse_series(written);
    samples(text).any(|(n, l, v)| n == name && l == wanted && v >= at_least)
}

/// The sum of the samples of `name` whose labels include every one of
/// `labels` (0 when none does), panicking when the exposition does not
/// declare `name` at all.
pub fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    assert_declared(text, name);
    samples(text)
        .filter(|(n, l, _)| {
            *n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

/// The label sets of every sample of `name` (none when it has no sample
/// yet), panicking when the exposition does not declare `name`.
pub fn label_sets(text: &str, name: &str) -> Vec<Labels> {
    assert_declared(text, name);
    samples(text)
        .filter(|(n, _, _)| n == name)
        .map(|(_, l, _)| l)
        .collect()
}

/// Panics unless `text` declares the metric whose samples are named
/// `name`: a `# TYPE` line of its family (`x` for `x_total`, `x_bucket`,
/// `x_count`, …) or a sample of that name.
pub fn assert_declared(text: &str, name: &str) {
    let declared = text.lines().any(|l| {
        l.strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|family| {
                name.strip_prefix(family).is_some_and(|suffix| {
                    [
                        "", "_total", "_bucket", "_count", "_sum", "_created", "_info",
                    ]
                    .contains(&suffix)
                })
            })
    }) || samples(text).any(|(n, _, _)| n == name);
    assert!(declared, "no metric {name} at all in\n{text}");
}

/// Every sample of the exposition `text`, comments skipped.
pub fn samples(text: &str) -> impl Iterator<Item = (String, Labels, f64)> + '_ {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
}

/// `name{labels}` as written, split into its name and sorted labels.
pub fn parse_series(written: &str) -> (String, Labels) {
    let (name, labels, _) =
        parse_line(&format!("{written} 0")).unwrap_or_else(|| panic!("not a series: {written}"));
    (name, labels)
}

/// A series' labels, sorted.
pub type Labels = Vec<(String, String)>;

/// One sample line: its name, its sorted labels and its value.
fn parse_line(line: &str) -> Option<(String, Labels, f64)> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let (labels, rest) = if let Some(inner) = rest.strip_prefix('{') {
        parse_labels(inner)?
    } else {
        (Vec::new(), rest)
    };
    let raw = rest.split_whitespace().next()?;
    let value = match raw {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().ok()?,
    };
    Some((name.to_owned(), labels, value))
}

/// `key="value",…}` (escapes `\\`, `\"`, `\n`), then what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches(',');
        if let Some(rest) = s.strip_prefix('}') {
            labels.sort();
            return Some((labels, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        let mut chars = s[eq + 1..].strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key, value));
        s = &s[eq + 1..][1 + end + 1..];
    }
}

/// Asserts that `text` has the sample `line` (`name{a="x"} 3`, labels in
/// any order) with exactly that value.
pub fn assert_sample(text: &str, line: &str) {
    let (name, labels, expected) =
        parse_line(line).unwrap_or_else(|| panic!("not a sample: {line}"));
    let found = samples(text)
        .find(|(n, l, _)| *n == name && *l == labels)
        .map(|(_, _, v)| v)
        .unwrap_or_else(|| panic!("no series for `{line}` in\n{text}"));
    assert_eq!(found, expected, "`{line}` in\n{text}");
}

/// Whether any sample of `text` carries the label `key="value"`.
pub fn has_label(text: &str, key: &str, value: &str) -> bool {
    samples(text).any(|(_, labels, _)| labels.iter().any(|(k, v)| k == key && v == value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_read_by_its_whole_label_set_and_exact_value() {
        let text = "# HELP x_total a counter\n# TYPE x_total counter\n\
                    x_total{a=\"1\",b=\"q\\\"z\"} 10\nx_total{a=\"1\"} 1\nplain 2.5\n";
        assert_eq!(value(text, "x_total", &[("a", "1")]), 1.0);
        assert_eq!(value(text, "x_total", &[("b", "q\"z"), ("a", "1")]), 10.0);
        assert_eq!(value(text, "plain", &[]), 2.5);
    }

    #[test]
    fn a_label_set_never_counted_reads_0_only_while_its_metric_is_exposed() {
        let text = "x_total{a=\"1\"} 3\n";
        assert_eq!(counted(text, "x_total{a=\"1\"}"), 3.0);
        let declared = "# TYPE y counter\n";
        assert_eq!(counted(declared, "y_total{a=\"1\"}"), 0.0);
        assert_eq!(counted(text, "x_total{a=\"2\"}"), 0.0);
        let renamed = std::panic::catch_unwind(|| counted(text, "y_total{a=\"1\"}"));
        assert!(renamed.is_err(), "a metric not exposed at all panics");
    }

    #[test]
    #[should_panic(expected = "no series")]
    fn a_missing_series_panics() {
        value("x_total{a=\"1\"} 1\n", "x_total", &[("a", "2")]);
    }

    #[test]
    fn a_sum_over_a_label_subset_adds_every_matching_series_and_needs_the_metric() {
        let text = "# TYPE r counter\nr_total{m=\"a\",c=\"OK\"} 2\n\
                    r_total{m=\"b\",c=\"OK\"} 3\nr_total{m=\"a\",c=\"NO\"} 10\n";
        assert_eq!(sum(text, "r_total", &[("c", "OK")]), 5.0);
        assert_eq!(sum(text, "r_total", &[]), 15.0);
        assert_eq!(sum(text, "r_total", &[("c", "X")]), 0.0);
        assert_eq!(series(text, "r_total{c=\"NO\",m=\"a\"}"), 10.0);
        let renamed = std::panic::catch_unwind(|| sum(text, "s_total", &[]));
        assert!(renamed.is_err(), "a metric not declared at all panics");
    }

    #[test]
    fn a_series_reaches_a_count_only_once_exposed_with_it() {
        let text = "x_total{a=\"1\"} 3\n";
        assert!(reached(text, "x_total{a=\"1\"}", 3.0));
        assert!(!reached(text, "x_total{a=\"1\"}", 4.0));
        assert!(!reached(text, "x_total{a=\"2\"}", 0.0));
    }

    #[test]
    fn a_sample_is_asserted_by_its_exact_value_not_a_prefix() {
        let text = "x_total{a=\"1\"} 10\n";
        assert_sample(text, "x_total{a=\"1\"} 10");
        let prefix = std::panic::catch_unwind(|| assert_sample(text, "x_total{a=\"1\"} 1"));
        assert!(prefix.is_err(), "a value 1 must not match 10");
        assert!(has_label(text, "a", "1") && !has_label(text, "a", "10"));
    }
}
