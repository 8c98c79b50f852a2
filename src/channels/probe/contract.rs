//! The REST contract of the two 3D operations (`docs/upstream.md`), as a
//! probe checks an answer against it: the status, each field's presence
//! and type, and the time taken. A report names fields and types only,
//! never a value of the answer (a token is a secret).

use std::time::Duration;

use serde_json::Value;

/// One field the contract asks for.
struct Field {
    /// Its JSON names (the first is the contract's; others are accepted
    /// aliases, as `sessionToken` for `token`).
    names: &'static [&'static str],
    /// `string`, `boolean` or `number`.
    expected: &'static str,
    /// A string field that must not be empty.
    non_empty: bool,
}

const SESSION_TOKEN: [Field; 4] = [
    Field {
        names: &["isContingency"],
        expected: "boolean",
        non_empty: false,
    },
    Field {
        names: &["token", "sessionToken"],
        expected: "string",
        non_empty: true,
    },
    Field {
        names: &["vendor"],
        expected: "string",
        non_empty: false,
    },
    Field {
        names: &["url"],
        expected: "string",
        non_empty: false,
    },
];

const LIVENESS: [Field; 4] = [
    Field {
        names: &["valid"],
        expected: "boolean",
        non_empty: false,
    },
    Field {
        names: &["codID"],
        expected: "number",
        non_empty: false,
    },
    Field {
        names: &["cause"],
        expected: "string",
        non_empty: false,
    },
    Field {
        names: &["protocol"],
        expected: "string",
        non_empty: false,
    },
];

/// Which operation an answer is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation3D {
    /// `/3d/session-token`.
    SessionToken,
    /// `/3d/liveness`.
    Liveness,
}

impl Operation3D {
    /// The check's name: `session_token`, `liveness`.
    pub fn check_name(self) -> &'static str {
        match self {
            Operation3D::SessionToken => "session_token",
            Operation3D::Liveness => "liveness",
        }
    }

    fn fields(self) -> &'static [Field] {
        match self {
            Operation3D::SessionToken => &SESSION_TOKEN,
            Operation3D::Liveness => &LIVENESS,
        }
    }
}

/// One field checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCheck {
    /// The contract's name of the field.
    pub field: &'static str,
    /// The type asked.
    pub expected: &'static str,
    /// The type found (`missing`, `null`, `string`, `empty string`, ...).
    pub found: &'static str,
    /// Whether found meets expected.
    pub passed: bool,
}

/// One check of a probe: an answer against the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCheck {
    /// `session_token` or `liveness`.
    pub name: &'static str,
    /// The HTTP status; `None` when no answer came.
    pub http_status: Option<u16>,
    /// Time to the whole answer.
    pub elapsed: Duration,
    /// Each field of the contract.
    pub fields: Vec<FieldCheck>,
    /// What was wrong; `None` when the answer met the contract.
    pub problem: Option<String>,
}

impl ProbeCheck {
    /// True when the answer met the contract.
    pub fn passed(&self) -> bool {
        self.problem.is_none()
    }

    /// A call that got no answer (`why`: connect failed, timed out, ...).
    pub fn no_answer(op: Operation3D, elapsed: Duration, why: &str) -> Self {
        Self {
            name: op.check_name(),
            http_status: None,
            elapsed,
            fields: Vec::new(),
            problem: Some(format!("no answer: {why}")),
        }
    }
}

fn type_of(v: Option<&Value>) -> &'static str {
    match v {
        None => "missing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(s)) if s.is_empty() => "empty string",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
    }
}

/// Checks an answer of `op`: status 200, a JSON object with every field
/// of the contract of the right type, within `timeout`.
pub fn check(
    op: Operation3D,
    status: u16,
    body: &[u8],
    elapsed: Duration,
    timeout: Duration,
) -> ProbeCheck {
    let mut problems: Vec<String> = Vec::new();
    if status != 200 {
        problems.push(format!("HTTP {status}, the contract answers 200"));
    }
    let object = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.as_object().cloned());
    let mut fields = Vec::new();
    match &object {
        None if status == 200 => problems.push("the body is not a JSON object".to_owned()),
        None => {}
        Some(object) => {
            for f in op.fields() {
                let value = f.names.iter().find_map(|n| object.get(*n));
                let found = type_of(value);
                let passed = found == f.expected
                    || (found == "empty string" && !f.non_empty && f.expected == "string");
                if !passed {
                    problems.push(format!(
                        "`{}` is {found}, the contract asks {}",
                        f.names[0], f.expected
                    ));
                }
                fields.push(FieldCheck {
                    field: f.names[0],
                    expected: f.expected,
                    found,
                    passed,
                });
            }
        }
    }
    if elapsed > timeout {
        problems.push(format!(
            "answered in {} ms, over the channel's timeout of {} ms",
            elapsed.as_millis(),
            timeout.as_millis()
        ));
    }
    ProbeCheck {
        name: op.check_name(),
        http_status: Some(status),
        elapsed,
        fields,
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_millis(5);
    const TIMEOUT: Duration = Duration::from_secs(1);

    #[test]
    fn a_session_answer_of_the_contract_passes() {
        let body = br#"{"isContingency":false,"token":"t","vendor":"v","url":"u"}"#;
        let c = check(Operation3D::SessionToken, 200, body, FAST, TIMEOUT);
        assert!(c.passed(), "{:?}", c.problem);
        assert_eq!(c.fields.len(), 4);
    }

    #[test]
    fn a_wrong_shape_names_each_field_and_type_but_no_value() {
        let body = br#"{"isContingency":"no","token":42,"vendor":"v"}"#;
        let c = check(Operation3D::SessionToken, 200, body, FAST, TIMEOUT);
        let problem = c.problem.expect("non-conforming");
        assert!(problem.contains("`isContingency` is string"), "{problem}");
        assert!(problem.contains("`token` is number"), "{problem}");
        assert!(problem.contains("`url` is missing"), "{problem}");
        assert!(
            !problem.contains("42") && !problem.contains("\"no\""),
            "{problem}"
        );
    }

    #[test]
    fn a_slow_answer_an_error_status_and_no_json_fail() {
        let ok = br#"{"valid":true,"codID":200.0,"cause":"","protocol":"1"}"#;
        assert!(check(Operation3D::Liveness, 200, ok, FAST, TIMEOUT).passed());
        assert!(!check(Operation3D::Liveness, 200, ok, TIMEOUT * 2, TIMEOUT).passed());
        assert!(!check(Operation3D::Liveness, 503, b"{}", FAST, TIMEOUT).passed());
        assert!(!check(Operation3D::Liveness, 200, b"nope", FAST, TIMEOUT).passed());
    }
}
