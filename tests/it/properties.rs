//! Property tests: every parser of outside input takes arbitrary input
//! without panicking and answers a documented error that quotes no value.
//!
//! Covered here through the public API: the upstream wire parsers and the
//! wire -> proto conversion (arbitrary bytes, and JSON built from the
//! spec's shapes), the webhook verifier (Basic and Standard Webhooks), the
//! `grpc-timeout` parser, the configuration loader with `IDGATE_*`
//! overrides (and every duration key: loads, or fails naming the key and
//! quoting no value), and request validation. The webhook body parser is
//! crate-private: its property is in `src/events/webhook.rs`.
//!
//! Each test sets its own case count for CI's budget (about 15 s of CPU
//! for the whole suite in a debug build); `PROPTEST_CASES=N` runs N cases
//! of every test instead (see `docs/development.md`). The seed of a failure
//! is saved in `tests/proptest-regressions/properties.txt` and replayed
//! first.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use idgate::{
    Error,
    api::{LimitsConfig, validate},
    config::Config,
    context::{CallContext, parse_grpc_timeout},
    events::{
        auth::{self, AuthFailure},
        config::{BasicCredentials, HmacSecret},
    },
    proto::v1,
    upstream::{convert, wire},
};
use proptest::prelude::*;
use prost::Message as _;
use serde_json::{Map, Value, json};

/// `cases` cases, unless `PROPTEST_CASES` asks for another number.
fn cases(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

/// Text of any Unicode scalar values, control characters included.
fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..=max).prop_map(String::from_iter)
}

fn any_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

/// A value distinctive enough that finding it in an error means the error
/// quotes the input. Not a valid channel name: errors may name a channel
/// (an identifier), never quote other text.
fn marker() -> impl Strategy<Value = String> {
    "MARK\\+[A-Za-z0-9]{10}"
}

/// Where strategies put the marker: replaced by a fresh [`marker`] in each
/// case (strategies are built once, not once per marker).
const PLACEHOLDER: &str = "@MARKER@";

/// True when `input` is long enough to be told apart and `text` holds it.
fn quotes(text: &str, input: &str) -> bool {
    [input, input.trim()]
        .iter()
        .any(|s| s.chars().count() >= 8 && text.contains(*s))
}

// ---------------------------------------------------------------------
// Upstream answers
// ---------------------------------------------------------------------

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

/// The Base64 image decoder as it was before its SIMD fast path, with the
/// `base64` crate alone: the reference the fast path must agree with.
fn reference_image_decode(text: &str) -> Option<Vec<u8>> {
    use base64::alphabet;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let mut s = text.trim();
    if let Some(rest) = s.strip_prefix("data:") {
        s = rest.split_once(',')?.1.trim();
    }
    let cleaned: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let alphabet = if cleaned.bytes().any(|b| b == b'-' || b == b'_') {
        &alphabet::URL_SAFE
    } else {
        &alphabet::STANDARD
    };
    GeneralPurpose::new(alphabet, LENIENT)
        .decode(cleaned.as_bytes())
        .ok()
}

/// Base64 text in the forms upstream encoders use, long enough for the
/// SIMD loops, then now and then one character replaced (padding, the
/// other alphabet, white space, non-ASCII, or a flipped trailing bit).
fn image_text() -> impl Strategy<Value = String> {
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    (
        any_bytes(300),
        0usize..4,
        0u8..4,
        prop::option::weighted(
            0.5,
            (
                any::<usize>(),
                prop::sample::select(vec![
                    '=', '-', '_', '+', '/', ' ', '\n', 'A', 'B', 'Q', 'g', 'é', '\0', '.',
                ]),
            ),
        ),
    )
        .prop_map(move |(bytes, engine, form, replace)| {
            let mut text = engines[engine].encode(&bytes);
            if let Some((at, c)) = replace.filter(|_| !text.is_empty()) {
                let at = at % text.len();
                text.replace_range(at..=at, &c.to_string());
            }
            match form {
                0 => text,
                1 => format!("data:image/jpeg;base64,{text}"),
                2 => {
                    let mut mid = text.len() / 2;
                    while !text.is_char_boundary(mid) {
                        mid -= 1;
                    }
                    let (a, b) = text.split_at(mid);
                    format!("{a}\r\n{b}")
                }
                _ => format!(" {text}\n"),
            }
        })
}

proptest! {
    #![proptest_config(cases(2000))]

    /// The image decoder (SIMD fast path, lenient fallback) accepts and
    /// refuses exactly what the lenient `base64` decoder does, with the
    /// same bytes, and its error names the field only.
    #[test]
    fn image_decoding_agrees_with_the_lenient_reference(text in image_text()) {
        let image = wire::Base64Image(Some(std::borrow::Cow::Borrowed(&text)));
        match (image.decode("fotos.documento[0].imagem"), reference_image_decode(&text)) {
            (Ok(got), Some(want)) => prop_assert_eq!(&got[..], &want[..]),
            (Err(e), None) => {
                prop_assert_eq!(e.to_string(), "undecodable Base64 image at fotos.documento[0].imagem")
            }
            (got, want) => prop_assert!(false, "decoder {:?}, reference {:?}", got.map(|b| b.len()), want.map(|b| b.len())),
        }
    }
}

// ---------------------------------------------------------------------
// Webhook authentication
// ---------------------------------------------------------------------

/// Header text: what `HeaderValue` takes (visible ASCII, space, tab and
/// obs-text bytes), near-valid forms included.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\t'), 0x80u8..=0xff], 0..80),
        "v1,[A-Za-z0-9+/=]{0,60}( v1,[A-Za-z0-9+/=]{0,60}){0,3}".prop_map(String::into_bytes),
        "[+-]?[0-9]{1,20}".prop_map(String::into_bytes),
        "(Basic|basic|Bearer|BASIC) *[A-Za-z0-9+/=:]{0,40}".prop_map(String::into_bytes),
    ]
}

fn secret() -> HmacSecret {
    HmacSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a valid secret")
}

fn headers(pairs: &[(&'static str, Option<Vec<u8>>)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        if let Some(v) = value.as_ref().and_then(|v| HeaderValue::from_bytes(v).ok()) {
            h.insert(*name, v);
        }
    }
    h
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Any headers and body: one of the documented failures, never a
    /// panic; Basic answers `None` or a verdict.
    #[test]
    fn webhook_verifier_refuses_arbitrary_deliveries_with_a_documented_failure(
        id in prop::option::of(header_bytes()),
        timestamp in prop::option::of(header_bytes()),
        signature in prop::option::of(header_bytes()),
        authorization in prop::option::of(header_bytes()),
        body in any_bytes(128),
        now in any::<i64>(),
        window in any::<u64>(),
    ) {
        let h = headers(&[
            (auth::HEADER_ID, id),
            (auth::HEADER_TIMESTAMP, timestamp),
            (auth::HEADER_SIGNATURE, signature),
            ("authorization", authorization),
        ]);
        match auth::check_signature(&h, &body, &secret(), now, window) {
            Ok(()) => prop_assert!(false, "an unsigned delivery was accepted"),
            Err(f) => prop_assert!(matches!(
                f,
                AuthFailure::InvalidSignature | AuthFailure::StaleTimestamp
            )),
        }
        let _ = auth::has_signature_headers(&h);
        if let Some(id) = auth::delivery_id(&h) {
            prop_assert!(!id.is_empty() && id.len() <= 256);
        }
        let creds = BasicCredentials {
            user: "vendor".into(),
            password: idgate::domain::Password::new("pa:ss"),
        };
        prop_assert_ne!(auth::check_basic(&h, &creds), Some(true));
    }

    /// A delivery signed by `sign` verifies inside the window and in no
    /// other case: not stale, not with another body, not with another id.
    #[test]
    fn webhook_signatures_verify_exactly_the_signed_delivery(
        id in "[!-~]{1,256}",
        ts in any::<i64>(),
        skew in any::<i64>(),
        window in 0u64..1_000_000,
        body in any_bytes(128),
        other_body in any_bytes(128),
    ) {
        let signature = auth::sign(&secret(), &id, ts, &body);
        let h = headers(&[
            (auth::HEADER_ID, Some(id.clone().into_bytes())),
            (auth::HEADER_TIMESTAMP, Some(ts.to_string().into_bytes())),
            (auth::HEADER_SIGNATURE, Some(signature.into_bytes())),
        ]);
        let now = ts.wrapping_add(skew % 2_000_000);
        let expected = if now.abs_diff(ts) <= window {
            Ok(())
        } else {
            Err(AuthFailure::StaleTimestamp)
        };
        prop_assert_eq!(auth::check_signature(&h, &body, &secret(), now, window), expected);
        if other_body != body {
            prop_assert_eq!(
                auth::check_signature(&h, &other_body, &secret(), now, window),
                Err(AuthFailure::InvalidSignature)
            );
        }
    }

    /// Only the first `MAX_SIGNATURE_CANDIDATES` `v1,` signatures are
    /// tried: the right one among them verifies, after them it does not,
    /// however many candidates (and other versions) the header packs.
    #[test]
    fn webhook_signatures_past_the_candidate_cap_are_not_tried(
        decoys in prop::collection::vec(prop_oneof![
            any_bytes(32).prop_map(|b| format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(b))),
            "v2,[A-Za-z0-9+/]{4,44}",
            "v1,[!-~]{0,20}",
        ], 0..24),
        at in 0usize..24,
    ) {
        let body = b"{}";
        let ts = 1_700_000_000;
        let mut candidates = decoys.clone();
        let at = at.min(candidates.len());
        candidates.insert(at, auth::sign(&secret(), "msg_1", ts, body));
        let h = headers(&[
            (auth::HEADER_ID, Some(b"msg_1".to_vec())),
            (auth::HEADER_TIMESTAMP, Some(ts.to_string().into_bytes())),
            (auth::HEADER_SIGNATURE, Some(candidates.join(" ").into_bytes())),
        ]);
        let v1_before = candidates[..at].iter().filter(|c| c.starts_with("v1,")).count();
        let expected = if v1_before < auth::MAX_SIGNATURE_CANDIDATES {
            Ok(())
        } else {
            Err(AuthFailure::InvalidSignature)
        };
        prop_assert_eq!(auth::check_signature(&h, body, &secret(), ts, 300), expected);
    }

    /// A signing secret from the configuration: accepted, or refused with
    /// an error that does not quote it.
    #[test]
    fn webhook_secret_parses_or_gives_a_value_free_error(
        text in prop_oneof![
            any_text(64),
            "(whsec_)?[A-Za-z0-9+/]{0,60}={0,2}",
            marker().prop_map(|m| format!("whsec_{m}")),
        ],
    ) {
        if let Err(e) = HmacSecret::parse(&text) {
            let e = e.to_string();
            prop_assert!(e.starts_with("invalid configuration: webhook HMAC secret must"), "{}", e);
            prop_assert!(!quotes(&e, &text), "{}", e);
        }
    }
}

// ---------------------------------------------------------------------
// grpc-timeout
// ---------------------------------------------------------------------

/// What the gRPC spec defines: 1 to 8 digits and a unit.
fn spec_timeout(raw: &str) -> Option<Duration> {
    let (last, _) = raw.char_indices().last()?;
    let (digits, unit) = raw.split_at(last);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

proptest! {
    #![proptest_config(cases(5000))]

    /// Any header text: the spec's value or no timeout, never a panic; a
    /// deadline from any header value that parses.
    #[test]
    fn grpc_timeout_is_the_spec_value_or_none(
        raw in prop_oneof![
            any_text(12),
            "[+-]?[0-9]{0,10}[HMSmunx]?",
            "[0-9]{1,8}[HMSmun]",
        ],
    ) {
        prop_assert_eq!(parse_grpc_timeout(&raw), spec_timeout(&raw));
        if let Ok(v) = HeaderValue::from_str(&raw) {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", v);
            let ctx = CallContext::from_headers(&h);
            prop_assert_eq!(ctx.deadline().is_some(), spec_timeout(&raw).is_some());
        }
    }
}

// ---------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------

/// Key segments: real keys, array indices (in range or not) and junk.
fn key_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "listen", "grpc", "http", "admin", "serving", "max_in_flight",
            "max_concurrent_streams", "drain_delay_secs", "upstream", "base_url", "timeout_ms",
            "paths", "credential", "fields", "operators", "name", "login", "password_env",
            "limits", "max_image_bytes", "telemetry", "channels", "priority", "breaker",
            "routing", "mode", "max_bindings", "embedded_channels", "webhook", "basic_user",
            "hmac_secret_env", "path", "max_body_bytes", "watch", "poll_max_ms", "sandbox",
            "token_env", "0", "1", "2", "3",
        ]).prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "", "-1", "01", "1000", "1024", "4294967296", "18446744073709551615",
            "99999999999999999999", "LISTEN", "Upstream",
        ]).prop_map(str::to_owned),
        1 => any_text(8),
    ]
}

/// Override values that are names an error may list (the variants of a
/// mode), or too short to tell apart.
const NAMED_VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "true",
    "false",
    "nan",
    "inf",
    "1e400",
    "1.5",
    "\"\"",
    "\"",
    "force_primary",
    "force_alternative",
    "auto",
    "127.0.0.1:0",
    "[::1]:0",
    "/x",
];

/// A TOML value: text, a number, a boolean or a float, quoted or not.
fn override_value(marker: String) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(marker.clone()),
        Just(format!("\"{marker}\"")),
        Just(format!("http://{marker}")),
        Just(format!(" {marker} ")),
        Just(format!("channel:{marker}")),
        (0u8..10).prop_map(|d| format!("{d}8{}", "7".repeat(9))),
        prop::sample::select(NAMED_VALUES).prop_map(str::to_owned),
        any_text(16),
    ]
}

/// TOML texts: empty, a full valid file, one with a string set to the
/// marker at some key, or arbitrary text.
fn toml_text(marker: String) -> impl Strategy<Value = String> {
    const VALID: &str = "[upstream]\nbase_url = \"http://a\"\n\
        [[operators]]\nname = \"default\"\nlogin = \"op\"\npassword_env = \"P\"\n\
        [[channels]]\nname = \"primary\"\nbase_url = \"http://a\"\n\
        [[channels]]\nname = \"alternative\"\nbase_url = \"http://b\"\npriority = 1\n";
    prop_oneof![
        Just(String::new()),
        Just(VALID.to_owned()),
        (
            prop::sample::select(vec![
                "[listen]\ngrpc",
                "[upstream]\nbase_url",
                "[routing]\nmode",
                "[webhook]\npath",
                "[serving]\nmax_in_flight",
                "[sandbox]\nwebhook_url",
                "[[channels]]\nname",
                "[limits]\nmax_images",
                "[telemetry]\nlog_format",
            ]),
            prop::sample::select(vec!["\"M\"", "\"M", "M", "[\"M\"]", "{ a = \"M\" }", "'M'"]),
        )
            .prop_map(move |(key, value)| { format!("{key} = {}\n", value.replace('M', &marker)) }),
        any_text(120),
        "(\\[[a-z_.]{0,12}\\]\n)?([a-z_]{1,12} = (\"[ -~]{0,12}\"|[0-9]{1,12}|true|\\[\\])\n){0,4}",
    ]
}

/// Whole keys where a wrong value is refused by a check of its own.
const CHECKED_KEYS: &[&str] = &[
    "CHANNELS__0__NAME",
    "CHANNELS__1__NAME",
    "CHANNELS__0__BASE_URL",
    "CHANNELS__1__LIVENESS_PATH",
    "CHANNELS__2__NAME",
    "CHANNELS__1023__NAME",
    "CHANNELS__1024__NAME",
    "CHANNELS__18446744073709551615__NAME",
    "ROUTING__MODE",
    "UPSTREAM__BASE_URL",
    "LISTEN__GRPC",
    "WEBHOOK__PATH",
    "OPERATORS__0__NAME",
    "SERVING__MAX_IN_FLIGHT",
];

fn env_override(marker: String) -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![
            3 => prop::collection::vec(key_segment(), 1..5),
            1 => prop::sample::select(CHECKED_KEYS).prop_map(|k| vec![k.to_owned()]),
        ],
        prop_oneof![Just("IDGATE_"), Just("IDGATE"), Just("idgate_"), Just("")],
        override_value(marker),
    )
        .prop_map(|(segments, prefix, value)| {
            let key = segments
                .iter()
                .map(|s| s.to_ascii_uppercase())
                .collect::<Vec<_>>()
                .join("__");
            (format!("{prefix}{key}"), value)
        })
}

proptest! {
    #![proptest_config(cases(2500))]

    /// Any TOML text and `IDGATE_*` overrides: a configuration or a
    /// `ConfigError`, never a panic, and the error never quotes a value.
    #[test]
    fn configuration_loads_or_gives_an_error_that_quotes_no_value(
        marker in marker(),
        text in toml_text(PLACEHOLDER.to_owned()),
        env in prop::collection::vec(env_override(PLACEHOLDER.to_owned()), 0..5),
    ) {
        let text = text.replace(PLACEHOLDER, &marker);
        let env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k, v.replace(PLACEHOLDER, &marker)))
            .collect();
        if let Err(e) = Config::from_toml_and_env(&text, env.clone()) {
            let e = e.to_string();
            prop_assert!(e.starts_with("invalid configuration: "), "{}", e);
            prop_assert!(!e.contains(&marker), "the error quotes a value: {}", e);
            for (_, value) in env.iter().filter(|(_, v)| !NAMED_VALUES.contains(&v.as_str())) {
                prop_assert!(!quotes(&e, value), "the error quotes a value: {}", e);
            }
        }
    }
}

/// Duration keys, as `IDGATE_*` variables and as errors name them; the
/// channel keys need `[[channels]]` (given by [`DURATION_BASE`]).
const DURATION_KEYS: [(&str, &str); 10] = [
    ("IDGATE_IDEMPOTENCY__TTL_SECS", "idempotency.ttl_secs"),
    (
        "IDGATE_IDEMPOTENCY__PENDING_TTL_SECS",
        "idempotency.pending_ttl_secs",
    ),
    (
        "IDGATE_WATCH__DIRECTORY_TTL_SECS",
        "watch.directory_ttl_secs",
    ),
    ("IDGATE_WATCH__POLL_MAX_MS", "watch.poll_max_ms"),
    (
        "IDGATE_ROUTING__BINDING_TTL_SECS",
        "routing.binding_ttl_secs",
    ),
    (
        "IDGATE_WEBHOOK__REPLAY_WINDOW_SECS",
        "webhook.replay_window_secs",
    ),
    (
        "IDGATE_SERVING__IDLE_TIMEOUT_SECS",
        "serving.idle_timeout_secs",
    ),
    ("IDGATE_CLUSTER__MAX_BACKOFF_MS", "cluster.max_backoff_ms"),
    ("IDGATE_CHANNELS__0__TIMEOUT_MS", "channels[0].timeout_ms"),
    (
        "IDGATE_SANDBOX__RESULT_RETENTION_SECS",
        "sandbox.result_retention_secs",
    ),
];

const DURATION_BASE: &str = "[[channels]]\nname = \"p\"\nbase_url = \"http://127.0.0.1:1\"\n";

/// Values around the bound (30 days), and anything TOML takes or not.
fn duration_value() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => any::<u64>().prop_map(|v| v.to_string()),
        2 => (2_592_000u64 - 3..2_592_000 + 3).prop_map(|v| v.to_string()),
        2 => (2_592_000_000u64 - 3..2_592_000_000 + 3).prop_map(|v| v.to_string()),
        1 => (0u64..100_000).prop_map(|v| v.to_string()),
        1 => any::<i64>().prop_map(|v| v.to_string()),
        1 => "[0-9]{19,30}",
    ]
}

proptest! {
    #![proptest_config(cases(400))]

    /// Any value of a duration key loads, or fails with an error that
    /// names the key and quotes no value; past 30 days it always fails.
    #[test]
    fn any_duration_value_loads_or_fails_naming_the_key_without_the_value(
        key in prop::sample::select(DURATION_KEYS.to_vec()),
        value in duration_value(),
    ) {
        let (var, name) = key;
        let result = Config::from_toml_and_env(DURATION_BASE, [(var.to_owned(), value.clone())]);
        let max: u128 = if name.ends_with("_ms") { 2_592_000_000 } else { 2_592_000 };
        let over = value.parse::<u128>().is_ok_and(|v| v > max);
        match result {
            Ok(_) => prop_assert!(!over, "{} = {} loaded past the bound", name, value),
            Err(e) => {
                let e = e.to_string();
                // No run of digits in the error is the value.
                let quoted = e
                    .split(|c: char| !c.is_ascii_digit())
                    .any(|run| run == value.trim_start_matches('-'));
                prop_assert!(!quoted || value.len() < 2, "the error quotes the value: {}", e);
                if over && value.parse::<i64>().is_ok() {
                    prop_assert!(e.contains(name) && e.contains("30 days"), "{}", e);
                } else if over {
                    // Past TOML's integers: the variable is named.
                    prop_assert!(e.contains(var) && e.contains("out of range"), "{}", e);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------
// Request validation
// ---------------------------------------------------------------------

/// Text near what a field takes, and anything else.
fn field_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any_text(40),
        1 => any_text(600),
        1 => "[A-Za-z0-9]{0,300}",
        1 => "[ \t]{0,2}[A-Za-z0-9._/-]{1,20}[ \t\r\n]{0,2}",
        1 => "(j-)?[0-9a-fA-F]{14,18}",
        1 => "[0-9]{3}\\.?[0-9]{3}\\.?[0-9]{3}-?[0-9]{2}",
        1 => "[0-9]{1,5}-[0-9]{1,2}-[0-9]{1,2}|[0-9]{1,2}/[0-9]{1,2}/[0-9]{1,5}",
        1 => prop::sample::select(vec![
            "", " ", "\u{0}", "\u{202e}", "52998224725", "529.982.247-25", "Maria da Silva",
            "1990-02-28", "28/02/1990", "PROP1", "cod01", "primary",
        ]).prop_map(str::to_owned),
    ]
}

/// Bytes that start as a JPEG, PNG or PDF, or not, around the limit of
/// [`limits`].
fn image_bytes() -> impl Strategy<Value = Bytes> {
    (
        prop::sample::select(vec![
            &b""[..],
            b"\xff\xd8\xff",
            b"\x89PNG\r\n\x1a\n",
            b"%PDF-",
            b"GIF89a",
        ]),
        any_bytes(80),
    )
        .prop_map(|(magic, rest)| {
            let mut b = magic.to_vec();
            b.extend_from_slice(&rest);
            Bytes::from(b)
        })
}

/// Small limits, so that every bound is reached by some cases.
fn limits() -> LimitsConfig {
    LimitsConfig {
        max_image_bytes: 64,
        max_images: 3,
        ..LimitsConfig::default()
    }
}

/// `result` is a value, or `InvalidArgument` whose violations name only
/// `fields` (indices folded: `images[2].content` -> `images[].content`)
/// and quote none of `inputs`, in the error, its status or its details.
fn ok_or_named_violations<T>(
    result: Result<T, Error>,
    fields: &[&str],
    inputs: &[&str],
) -> Result<(), TestCaseError> {
    let Err(err) = result else { return Ok(()) };
    let text = err.to_string();
    let Error::InvalidArgument(violations) = &err else {
        return Err(TestCaseError::fail(format!("not InvalidArgument: {err:?}")));
    };
    prop_assert!(!violations.is_empty());
    for v in violations {
        let folded = fold_indices(&v.field);
        prop_assert!(fields.contains(&folded.as_str()), "field {}", v.field);
        prop_assert!(!v.description.is_empty());
        for input in inputs {
            prop_assert!(
                !quotes(&v.field, input) && !quotes(&v.description, input),
                "{v:?}"
            );
        }
    }
    for input in inputs {
        prop_assert!(!quotes(&text, input), "{}", text);
    }
    let status = tonic::Status::from(err);
    prop_assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let details = String::from_utf8_lossy(status.details()).into_owned();
    for input in inputs {
        prop_assert!(!quotes(status.message(), input), "{}", status.message());
        prop_assert!(!quotes(&details, input));
    }
    Ok(())
}

fn fold_indices(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push(c);
            }
            ']' => {
                in_index = false;
                out.push(c);
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn create_journey_validates_any_request(
        cpf in field_text(),
        name in field_text(),
        birth_date in field_text(),
        customer_reference in field_text(),
        operator_profile in field_text(),
        request_id in prop_oneof![
            3 => field_text(),
            1 => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        ],
    ) {
        let req = v1::CreateJourneyRequest {
            cpf, name, birth_date, customer_reference, operator_profile, request_id,
        };
        ok_or_named_violations(
            validate::create_journey(&req),
            &["cpf", "name", "birth_date", "customer_reference", "operator_profile", "request_id"],
            &[
                &req.cpf, &req.name, &req.birth_date, &req.customer_reference,
                &req.operator_profile, &req.request_id,
            ],
        )?;
    }

    /// `operator_profile` is taken (trimmed) exactly when it has at most
    /// 64 characters and no control character; else `INVALID_ARGUMENT`
    /// naming the field and quoting nothing of it.
    #[test]
    fn operator_profile_is_capped_and_never_echoed(
        profile in prop_oneof![
            2 => "[ ]{0,2}[a-z0-9_-]{55,75}[ ]{0,2}",
            1 => any_text(100),
            1 => "MARK[a-z]{10}[\\x00-\\x1f][a-z]{2}",
        ],
    ) {
        let req = v1::CreateJourneyRequest {
            cpf: "529.982.247-25".into(),
            name: "Maria Silva".into(),
            birth_date: "1990-01-01".into(),
            customer_reference: "ref1".into(),
            operator_profile: profile.clone(),
            request_id: String::new(),
        };
        let trimmed = profile.trim();
        let fits = trimmed.chars().count() <= validate::MAX_OPERATOR_PROFILE_CHARS
            && !trimmed.chars().any(char::is_control);
        match validate::create_journey(&req) {
            Ok(ok) => {
                prop_assert!(fits, "{:?} was taken", profile);
                prop_assert_eq!(ok.operator_profile.as_deref(), (!trimmed.is_empty()).then_some(trimmed));
            }
            Err(e) => {
                prop_assert!(!fits, "{:?} was refused: {:?}", profile, e);
                let status = tonic::Status::from(e);
                prop_assert_eq!(status.code(), tonic::Code::InvalidArgument);
                let text = format!("{status:?}");
                prop_assert!(text.contains("operator_profile"), "{}", text);
                prop_assert!(!quotes(&text, &profile), "the error quotes the profile: {}", text);
            }
        }
    }

    #[test]
    fn keyed_requests_validate_any_request(
        appkey in field_text(),
        second in field_text(),
        third in field_text(),
        by_ref in any::<bool>(),
        set in any::<bool>(),
    ) {
        let inputs = [appkey.as_str(), second.as_str(), third.as_str()];
        ok_or_named_violations(validate::appkey_only(&appkey), &["appkey"], &inputs)?;
        use v1::watch_journey_request::Journey;
        let journey = set.then(|| if by_ref {
            Journey::JourneyRef(second.clone())
        } else {
            Journey::Appkey(appkey.clone())
        });
        ok_or_named_violations(
            validate::watch_journey(&v1::WatchJourneyRequest { journey }),
            &["appkey", "journey_ref", "journey"],
            &inputs,
        )?;
        ok_or_named_violations(
            validate::start_session(&v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: second.clone(),
            }),
            &["appkey", "user_agent"],
            &inputs,
        )?;
        ok_or_named_violations(
            validate::verify_liveness(&v1::VerifyLiveness3DRequest {
                appkey: appkey.clone(),
                session_token: second.clone(),
                channel: third.clone(),
            }),
            &["appkey", "session_token", "channel"],
            &inputs,
        )?;
    }

    #[test]
    fn image_requests_validate_any_request(
        appkey in field_text(),
        challenge_key in field_text(),
        codes in prop::collection::vec(field_text(), 0..5),
        images in prop::collection::vec(image_bytes(), 0..5),
        licence_form in 0u8..4,
    ) {
        let mut inputs = vec![appkey.as_str(), challenge_key.as_str()];
        inputs.extend(codes.iter().map(String::as_str));
        let snapshots = codes
            .iter()
            .enumerate()
            .map(|(i, code)| v1::Snapshot {
                image: images.get(i).cloned().unwrap_or_default(),
                face_type_code: code.clone(),
            })
            .collect();
        ok_or_named_violations(
            validate::challenge_response(
                v1::SubmitChallengeResponseRequest {
                    appkey: appkey.clone(),
                    challenge_key: challenge_key.clone(),
                    snapshots,
                },
                &limits(),
            ),
            &["appkey", "challenge_key", "snapshots", "snapshots[].face_type_code", "snapshots[].image"],
            &inputs,
        )?;
        ok_or_named_violations(
            validate::document_images(
                v1::SubmitDocumentImagesRequest {
                    appkey: appkey.clone(),
                    images: images
                        .iter()
                        .map(|content| v1::DocumentImage { content: content.clone() })
                        .collect(),
                },
                &limits(),
            ),
            &["appkey", "images", "images[].content"],
            &inputs,
        )?;
        use v1::submit_digital_licence_request::Licence;
        let bytes = images.first().cloned().unwrap_or_default();
        let licence = match licence_form {
            0 => None,
            1 => Some(Licence::QrImage(bytes)),
            2 => Some(Licence::Pdf(bytes)),
            _ => Some(Licence::QrBinary(bytes)),
        };
        ok_or_named_violations(
            validate::digital_licence(
                v1::SubmitDigitalLicenceRequest { appkey: appkey.clone(), licence },
                &limits(),
            ),
            &["appkey", "licence", "qr_image", "pdf", "qr_binary"],
            &inputs,
        )?;
    }
}
