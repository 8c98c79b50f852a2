//! Upstream answers: whatever the REST service sends (arbitrary bytes, or
//! JSON of the spec's shapes with lenient scalars, wrong types, cuts and
//! flipped bytes), every wire parser and wire -> proto conversion answers
//! a value or a documented `WireError`, and no error quotes the answer.

use std::time::SystemTime;

use base64::Engine as _;
use idgate::upstream::{convert, wire};
use proptest::prelude::*;
use prost::Message as _;
use serde_json::{Map, Value, json};

use super::{PLACEHOLDER, any_bytes, any_text, cases, marker};

/// The error shapes `WireError` documents: serde's category and position,
/// a missing field, an undecodable image's path, or a fixed sentence.
fn documented_wire_error(e: &wire::WireError) -> bool {
    let m = e.0.as_str();
    let position = |rest: &str| {
        rest.strip_prefix(" at line ")
            .and_then(|r| r.split_once(" column "))
            .is_some_and(|(l, c)| {
                !l.is_empty()
                    && !c.is_empty()
                    && l.bytes().all(|b| b.is_ascii_digit())
                    && c.bytes().all(|b| b.is_ascii_digit())
            })
    };
    let categorised = [
        "io error",
        "syntax error",
        "unexpected type or value",
        "unexpected end of input",
    ]
    .iter()
    .any(|c| m.strip_prefix(c).is_some_and(position));
    categorised
        || m.strip_prefix("missing field `")
            .is_some_and(|f| f.ends_with('`') && f.len() < 40)
        || m.starts_with("undecodable Base64 image at ")
        || [
            "body is not UTF-8",
            "empty body",
            "plain-text token holds control characters",
            "appkey holds white space or control characters",
        ]
        .contains(&m)
}

/// Every parser and conversion of an upstream answer, on one body. Panics
/// (fails the property) on an undocumented error or one quoting `secret`.
fn parse_every_answer(body: &[u8], secret: Option<&str>) {
    let check = |e: wire::WireError| {
        assert!(documented_wire_error(&e), "undocumented error: {}", e.0);
        if let Some(s) = secret {
            assert!(!e.0.contains(s), "error quotes a value: {}", e.0);
        }
    };
    match wire::parse_credential(body) {
        Ok(a) => assert!(!a.body.is_empty() && a.body.trim() == a.body),
        Err(e) => check(e),
    }
    match wire::parse_appkey(body) {
        Ok(k) => assert!(!k.is_empty() && !k.chars().any(char::is_whitespace)),
        Err(e) => check(e),
    }
    let _ = wire::parse_json::<wire::CredentialWire>(body).map_err(check);
    let _ = wire::parse_json::<wire::DocumentAcceptedWire>(body).map_err(check);
    match wire::parse_json::<wire::VerdictWire>(body) {
        Ok(w) => {
            convert::verdict(w).encode_to_vec();
        }
        Err(e) => check(e),
    }
    match wire::parse_json::<wire::Session3DWire>(body) {
        Ok(w) => match convert::session_3d(w) {
            Ok(_) => {}
            Err(e) => check(e),
        },
        Err(e) => check(e),
    }
    match wire::parse_json::<wire::ChallengesWire<'_>>(body) {
        Ok(w) => match convert::challenges(w, SystemTime::UNIX_EPOCH) {
            Ok(c) => {
                c.encode_to_vec();
            }
            Err(e) => check(e),
        },
        Err(e) => check(e),
    }
    match wire::parse_json::<wire::JourneyResultWire<'_>>(body) {
        Ok(w) => match convert::journey_result(w, convert::WireTimes::default()) {
            Ok(r) => {
                r.encode_to_vec();
            }
            Err(e) => check(e),
        },
        Err(e) => check(e),
    }
}

/// A scalar as upstream encoders write them: numbers as numbers or text,
/// booleans as booleans, text or 0/1, and the wrong type now and then.
fn lenient_scalar(secret: String) -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        (0i64..1000).prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "0",
            "1",
            "true",
            "FALSE",
            "200.0",
            "300.1",
            "300.10",
            "000",
            "0,93",
            "  12 ",
            "12.0",
            "1.5",
            "1e3",
            "NaN",
            "inf",
            "-0",
            "+7",
            "Completo",
            "Em processamento",
            "Não processado",
            "Erro",
            "maybe",
        ])
        .prop_map(Value::from),
        "[0-9]{1,25}(\\.[0-9]{0,4})?".prop_map(Value::from),
        any_text(24).prop_map(Value::from),
        Just(Value::from(secret.clone())),
        Just(json!([secret.clone(), 1])),
        Just(json!({ "v": secret })),
    ]
    .boxed()
}

/// A Base64 image field: valid in each encoding upstream uses, or not.
fn image_field() -> BoxedStrategy<Value> {
    let std = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    (any_bytes(48), 0u8..8, any_text(12))
        .prop_map(move |(bytes, form, junk)| match form {
            0 => Value::from(std.encode(&bytes)),
            1 => Value::from(url.encode(&bytes)),
            2 => Value::from(format!("data:image/jpeg;base64,{}", std.encode(&bytes))),
            3 => {
                let text = std.encode(&bytes);
                let (a, b) = text.split_at(text.len() / 2);
                Value::from(format!("{a}\r\n{b}"))
            }
            4 => Value::from(junk),
            5 => Value::from(format!("data:{junk}")),
            6 => Value::Null,
            _ => Value::from(bytes.len()),
        })
        .boxed()
}

/// An object with each of `fields` present or not, or (now and then) a
/// value of the wrong shape in its place.
fn object(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    let (names, values): (Vec<_>, Vec<_>) = fields
        .into_iter()
        .map(|(n, s)| (n, prop::option::weighted(0.7, s)))
        .unzip();
    let shaped = values.prop_map(move |vals| {
        let map: Map<String, Value> = names
            .iter()
            .zip(vals)
            .filter_map(|(n, v)| v.map(|v| ((*n).to_owned(), v)))
            .collect();
        Value::Object(map)
    });
    prop_oneof![
        9 => shaped,
        1 => prop_oneof![
            Just(Value::Null),
            Just(json!([])),
            Just(json!("x")),
            Just(json!(1))
        ],
    ]
    .boxed()
}

/// An object, or a list of them (`arquivosProcessado`, `documento`).
fn one_or_many(item: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![
        item.clone(),
        prop::collection::vec(item, 0..3).prop_map(Value::from)
    ]
    .boxed()
}

/// Any JSON value, a few levels deep (the CRNM and passport objects).
fn any_json(secret: String) -> BoxedStrategy<Value> {
    lenient_scalar(secret)
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(any_text(6), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

fn texts(secret: &str, names: &[&'static str]) -> Vec<(&'static str, BoxedStrategy<Value>)> {
    names
        .iter()
        .map(|n| (*n, lenient_scalar(secret.to_owned())))
        .collect()
}

/// `/document/result` (`docs/upstream.md#the-journey-result`), every
/// object and scalar optional.
fn journey_result_json(s: String) -> BoxedStrategy<Value> {
    let sc = || lenient_scalar(s.clone());
    let check = || object(texts(&s, &["codigo", "causa", "score"]));
    let ocr = object(vec![
        (
            "responseClientRGOcrDTO",
            object(texts(
                &s,
                &["nome", "cpf", "nrRg", "dtNascimento", "flAnalfabeto"],
            )),
        ),
        (
            "responseClientCNHOcrDTO",
            object(texts(
                &s,
                &[
                    "nome",
                    "cpf",
                    "validade",
                    "formato",
                    "extensao",
                    "observacao",
                ],
            )),
        ),
        (
            "ResponseClientDNIOcrDTO",
            object(texts(
                &s,
                &["nome", "dni", "outroRG", "serieCTPS", "flAnalfabeto"],
            )),
        ),
        (
            "responseClientCINOcrDTO",
            object(texts(&s, &["nome", "cpf", "sexo", "analfabeto"])),
        ),
        ("responseClientCRNMOcrDTO", any_json(s.clone())),
        ("ResponseClientPassaporteOcrDTO", any_json(s.clone())),
    ]);
    let processed = object(texts(&s, &["tipo", "statusArquivoProcessado"]));
    let documento = object(vec![
        ("arquivo", sc()),
        ("statusArquivo", sc()),
        ("arquivosProcessado", one_or_many(processed)),
    ]);
    let analysis = object(vec![
        ("id", sc()),
        ("ticket", sc()),
        ("statusProcessamento", sc()),
        ("score", sc()),
        ("responseClientDadosOcrDTO", ocr),
        (
            "biometriaCertiface",
            object(vec![
                ("protocolo", sc()),
                ("facematch", check()),
                ("registry", check()),
            ]),
        ),
        ("documentos", one_or_many(documento)),
    ]);
    let photo = object(vec![("descricao", sc()), ("imagem", image_field())]);
    object(vec![
        ("status", sc()),
        ("Status", sc()),
        ("idExternoCliente", sc()),
        ("dataCriacaoAppkey", sc()),
        ("analiseDocumento", analysis),
        (
            "serviceID",
            object(texts(
                &s,
                &[
                    "codigo",
                    "protocolo",
                    "score",
                    "aprovado",
                    "conhecido",
                    "scoreBiometrico",
                ],
            )),
        ),
        (
            "livenessResult",
            object(texts(
                &s,
                &["causa", "codID", "protocolo", "valid", "validado"],
            )),
        ),
        (
            "fotos",
            object(vec![
                ("livenessResult", object(vec![("frontal", image_field())])),
                ("documento", one_or_many(photo)),
            ]),
        ),
    ])
}

/// The other answers: credential, appkey, challenges, verdict, 3D session,
/// document accepted.
fn other_answer_json(s: String) -> BoxedStrategy<Value> {
    let challenge = object(vec![
        ("mensagem", lenient_scalar(s.clone())),
        ("tempoEmSegundos", lenient_scalar(s.clone())),
        (
            "tipoFace",
            object(vec![
                ("codigo", lenient_scalar(s.clone())),
                ("imagem", image_field()),
            ]),
        ),
    ]);
    let mut challenges = texts(
        &s,
        &[
            "chkey",
            "totalTime",
            "numberOfChallenges",
            "snapFrequenceInMillis",
            "snapNumber",
        ],
    );
    challenges.push(("challenges", one_or_many(challenge)));
    prop_oneof![
        object(texts(&s, &["token", "expires"])),
        object(texts(&s, &["appkey"])),
        object(challenges),
        object(texts(&s, &["valid", "codID", "cause", "protocol"])),
        object(texts(
            &s,
            &["isContingency", "token", "sessionToken", "vendor", "url"]
        )),
        object(texts(&s, &["appkey", "codigoDocumento"])),
    ]
    .boxed()
}

/// The body as sent with `secret` in place of [`PLACEHOLDER`], or cut
/// short, or with one byte changed.
fn mangle(json: &Value, secret: &str, cut: usize, flip: Option<(usize, u8)>) -> Vec<u8> {
    let text = serde_json::to_string(json).expect("a JSON value serializes");
    let mut body = text.replace(PLACEHOLDER, secret).into_bytes();
    match flip {
        Some((at, byte)) if !body.is_empty() => {
            let at = at % body.len();
            body[at] = byte;
        }
        _ => body.truncate(body.len().saturating_sub(cut)),
    }
    body
}

proptest! {
    #![proptest_config(cases(4000))]

    /// Arbitrary bytes, and bytes that look like a start of JSON or text.
    #[test]
    fn upstream_answers_of_arbitrary_bytes_parse_or_give_a_value_free_error(
        prefix in prop::sample::select(vec![&b""[..], b"{", b"\"", b"[", b" \r\n{\"token\":", b"{\"appkey\":"]),
        bytes in any_bytes(256),
    ) {
        let mut body = prefix.to_vec();
        body.extend_from_slice(&bytes);
        parse_every_answer(&body, None);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            parse_every_answer(text.as_bytes(), None);
        }
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    /// JSON built from the spec's shapes, lenient scalars, Base64 images
    /// in every encoding, wrong types, truncations and flipped bytes.
    #[test]
    fn upstream_answers_shaped_like_the_spec_parse_or_give_a_value_free_error(
        secret in marker(),
        json in prop_oneof![
            journey_result_json(PLACEHOLDER.to_owned()),
            other_answer_json(PLACEHOLDER.to_owned()),
        ],
        cut in prop_oneof![4 => Just(0usize), 1 => 1usize..40],
        flip in prop::option::weighted(0.1, (any::<usize>(), any::<u8>())),
    ) {
        let body = mangle(&json, &secret, cut, flip);
        parse_every_answer(&body, Some(&secret));
    }
}
