//! Request validation: any request is taken, or refused
//! `INVALID_ARGUMENT` with violations that name only the request's own
//! fields and quote none of its values (in the error, its status or its
//! details).

use bytes::Bytes;
use idgate::{
    Error,
    api::{LimitsConfig, validate},
    proto::v1,
};
use proptest::prelude::*;

use super::{any_bytes, any_text, cases, quotes};

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
