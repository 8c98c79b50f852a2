use super::*;

#[test]
fn notices_parse_completo_and_erro_and_ignore_other_fields() {
    let n = parse_notice(br#"{"Status":"Completo","Appkey":"k1","Extra":1}"#).unwrap();
    assert_eq!(n.status, NoticeStatus::Complete);
    assert_eq!(n.appkey.expose(), "k1");
    let n = parse_notice(br#"{"Status":"Erro","Appkey":"k1"}"#).unwrap();
    assert_eq!(n.status, NoticeStatus::Error);
    let n = parse_notice(br#"{"status":"Error","appkey":"k1"}"#).unwrap();
    assert_eq!(n.status, NoticeStatus::Error);
}

#[test]
fn unknown_statuses_and_malformed_bodies_are_told_apart() {
    assert_eq!(
        parse_notice(br#"{"Status":"Em processamento","Appkey":"k"}"#).unwrap_err(),
        RejectReason::UnknownStatus
    );
    for body in [
        &br#"{"Status":"Completo"}"#[..],
        br#"{"Status":"Completo","Appkey":""}"#,
        br#"{"Status":1,"Appkey":"k"}"#,
        br#"["Completo","k"]"#,
        b"Status=Completo&Appkey=k",
        b"",
    ] {
        assert_eq!(parse_notice(body).unwrap_err(), RejectReason::MalformedBody);
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// `cases` cases, unless `PROPTEST_CASES` asks for another number.
    fn cases(cases: u32) -> ProptestConfig {
        let mut config = ProptestConfig::default();
        if std::env::var_os("PROPTEST_CASES").is_none() {
            config.cases = cases;
        }
        config
    }

    /// A field value: the documented ones, near misses, other types.
    fn field() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::{Value, json};
        prop_oneof![
            prop::sample::select(vec![
                "Completo",
                " erro ",
                "Error",
                "COMPLETO",
                "Em processamento",
                "",
                " ",
                "k1",
                "k 1",
                "k\u{0}",
                "\u{a0}k\u{a0}",
            ])
            .prop_map(Value::from),
            prop::collection::vec(any::<char>(), 0..20)
                .prop_map(|c| Value::from(String::from_iter(c))),
            "[a-z0-9]{500,520}".prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            Just(Value::Null),
            Just(json!(["Completo"])),
            Just(json!({ "Status": "Completo" })),
        ]
    }

    fn body() -> impl Strategy<Value = Vec<u8>> {
        let names = ["Status", "status", "Appkey", "appkey", "STATUS", "Extra"];
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..128),
            prop::collection::vec((prop::sample::select(names.to_vec()), field()), 0..4).prop_map(
                |fields| {
                    let map: serde_json::Map<_, _> =
                        fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                    serde_json::to_vec(&map).expect("a JSON object serializes")
                }
            ),
            (prop::collection::vec(field(), 0..3), 0usize..8).prop_map(|(items, cut)| {
                let mut b = serde_json::to_vec(&items).expect("a JSON list serializes");
                b.truncate(b.len().saturating_sub(cut));
                b
            }),
        ]
    }

    proptest! {
        #![proptest_config(cases(4000))]

        /// Any body is a notice or one of the two documented refusals.
        #[test]
        fn any_body_is_a_notice_or_a_malformed_or_unknown_status_refusal(body in body()) {
            match parse_notice(&body) {
                Ok(n) => {
                    let key = n.appkey.expose();
                    prop_assert!(!key.is_empty() && !key.chars().any(char::is_whitespace));
                }
                Err(r) => prop_assert!(matches!(
                    r,
                    RejectReason::MalformedBody | RejectReason::UnknownStatus
                )),
            }
        }
    }
}

#[test]
fn every_reason_has_a_distinct_label_and_a_client_error_status() {
    let labels: std::collections::HashSet<_> =
        RejectReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(labels.len(), RejectReason::ALL.len());
    for (i, r) in RejectReason::ALL.iter().enumerate() {
        assert_eq!(r.index(), i);
        assert!(r.http_status().is_client_error());
    }
}
