//! Reading the Prometheus exposition of `/metrics` exactly: one series by
//! name and full label set, its value as a number. A substring match such
//! as `contains("…} 1")` also passes on `} 10` or `} 12.5`, and a missing
//! series read as 0 lets a renamed metric pass `== 0`; [`value`] does
//! neither: it compares the whole label set and panics when the series is
//! absent.

/// The value of the series `name{labels}` in `text` (the exposition
/// format); the labels must match the series' whole label set, in any
/// order. Panics, showing the exposition, when no such series exists.
pub fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut wanted: Labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    wanted.sort();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
        .find(|(n, l, _)| n == name && *l == wanted)
        .map(|(_, _, v)| v)
        .unwrap_or_else(|| panic!("no series {name}{labels:?} in\n{text}"))
}

/// The value of a counter's series written as exposed (`name{a="x"}` or
/// `name`), 0 when that label set was never counted (a labelled counter
/// is exposed from its first count) but only while the metric `name`
/// itself is exposed: a renamed metric panics instead of reading 0.
pub fn counted(text: &str, series: &str) -> f64 {
    let (name, wanted, _) =
        parse_line(&format!("{series} 0")).unwrap_or_else(|| panic!("not a series: {series}"));
    let samples: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(parse_line)
        .filter(|(n, _, _)| *n == name)
        .collect();
    assert!(!samples.is_empty(), "no metric {name} at all in\n{text}");
    samples
        .into_iter()
        .find(|(_, l, _)| *l == wanted)
        .map_or(0.0, |(_, _, v)| v)
}

/// A series' labels, sorted.
type Labels = Vec<(String, String)>;

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
    assert_eq!(counted(text, "x_total{a=\"2\"}"), 0.0);
    let renamed = std::panic::catch_unwind(|| counted(text, "y_total{a=\"1\"}"));
    assert!(renamed.is_err(), "a metric not exposed at all panics");
}

#[test]
#[should_panic(expected = "no series")]
fn a_missing_series_panics() {
    value("x_total{a=\"1\"} 1\n", "x_total", &[("a", "2")]);
}
