//! Which rows a run measures, in which order: `--rows` (a list), the
//! switches that add one row each, and `--repeat`.

/// What an idgate row turns on beyond the bare hop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// Span export to the in-process sink.
    pub otlp: bool,
    /// One log line per RPC, to stdout.
    pub access_log: bool,
    /// Caller authentication, a cached JWT per call.
    pub jwt: bool,
    /// `[cluster]` on a local Redis.
    pub cluster: bool,
}

/// All four: the configuration as deployed.
pub const DEPLOYED: Features = Features {
    otlp: true,
    access_log: true,
    jwt: true,
    cluster: true,
};

/// One row of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowSpec {
    /// The upstream called straight.
    Direct,
    /// idgate in front of it.
    Idgate(Features),
}

impl RowSpec {
    /// `direct`, `deployed`, or `idgate` with any of `otlp`, `access-log`,
    /// `jwt`, `cluster` joined by `+` (`idgate` itself may be left out:
    /// `otlp+jwt` is `idgate+otlp+jwt`).
    pub fn parse(text: &str) -> Result<RowSpec, String> {
        match text.trim() {
            "direct" => return Ok(RowSpec::Direct),
            "deployed" => return Ok(RowSpec::Idgate(DEPLOYED)),
            _ => {}
        }
        let mut features = Features::default();
        for part in text.trim().split('+') {
            let flag = match part {
                "idgate" => continue,
                "otlp" => &mut features.otlp,
                "access-log" => &mut features.access_log,
                "jwt" => &mut features.jwt,
                "cluster" => &mut features.cluster,
                other => {
                    return Err(format!(
                        "{other:?} in row {text:?}: direct, deployed, or idgate with otlp, access-log, jwt, cluster joined by +"
                    ));
                }
            };
            *flag = true;
        }
        Ok(RowSpec::Idgate(features))
    }

    /// The row's name in the report; parses back to the same row.
    pub fn name(&self) -> String {
        let features = match self {
            RowSpec::Direct => return "direct".to_owned(),
            RowSpec::Idgate(f) if *f == DEPLOYED => return "deployed".to_owned(),
            RowSpec::Idgate(f) => f,
        };
        let mut name = "idgate".to_owned();
        for (on, part) in [
            (features.otlp, "otlp"),
            (features.access_log, "access-log"),
            (features.jwt, "jwt"),
            (features.cluster, "cluster"),
        ] {
            if on {
                name.push('+');
                name.push_str(part);
            }
        }
        name
    }
}

/// The rows of `list` (comma-separated), then each of `extra` not yet
/// among them; the whole sequence `repeat` times, so repeated rows
/// alternate (`a b c a b c`) and share the machine's drift.
pub fn plan(list: &str, extra: &[RowSpec], repeat: usize) -> Result<Vec<RowSpec>, String> {
    let mut once = list
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .map(RowSpec::parse)
        .collect::<Result<Vec<_>, _>>()?;
    for row in extra {
        if !once.contains(row) {
            once.push(*row);
        }
    }
    if once.is_empty() {
        return Err("no rows to measure".to_owned());
    }
    Ok(std::iter::repeat_n(once, repeat.max(1)).flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_parses_back_from_its_name() {
        for text in [
            "direct",
            "idgate",
            "idgate+otlp",
            "idgate+access-log",
            "idgate+jwt",
            "idgate+cluster",
            "idgate+otlp+access-log",
            "deployed",
        ] {
            let row = RowSpec::parse(text).expect(text);
            assert_eq!(row.name(), text);
        }
    }

    #[test]
    fn features_can_be_named_without_idgate_and_in_any_order() {
        assert_eq!(
            RowSpec::parse("jwt+otlp"),
            RowSpec::parse("idgate+otlp+jwt")
        );
        assert_eq!(
            RowSpec::parse("otlp+access-log+jwt+cluster"),
            Ok(RowSpec::Idgate(DEPLOYED))
        );
        assert!(RowSpec::parse("idgate+tls").is_err());
    }

    #[test]
    fn switches_add_rows_once_and_repeats_alternate() {
        let otlp = RowSpec::parse("otlp").unwrap();
        let deployed = RowSpec::Idgate(DEPLOYED);
        let rows = plan("idgate,otlp", &[otlp, deployed], 2).unwrap();
        let names: Vec<_> = rows.iter().map(RowSpec::name).collect();
        assert_eq!(
            names,
            [
                "idgate",
                "idgate+otlp",
                "deployed",
                "idgate",
                "idgate+otlp",
                "deployed"
            ]
        );
        assert!(plan("", &[], 1).is_err());
    }
}
