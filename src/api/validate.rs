//! Validation at the edge: protobuf requests -> validated domain values,
//! before any upstream call. Every violation is collected (a caller fixes
//! all fields in one round trip) and names its field, never its value.

use bytes::Bytes;

use super::LimitsConfig;
use crate::{
    domain::{
        Appkey, BirthDate, Cpf, CustomerReference, EndUser, ImageKind, ImagePayload, JourneyRef,
        PersonName, RequestId, SessionToken, Snapshot, parse_key,
    },
    error::{Error, FieldViolation},
    events::WatchTarget,
    proto::v1,
};

/// A validated `CreateJourney`.
#[derive(Debug)]
pub struct NewJourneyRequest {
    /// The end user the appkey is created for.
    pub user: EndUser,
    /// The operator profile to use; `None`: the first configured one.
    pub operator_profile: Option<String>,
    /// The caller's idempotency key; `None`: no idempotency.
    pub request_id: Option<RequestId>,
}

/// A validated `SubmitChallengeResponse`.
#[derive(Debug)]
pub struct ChallengeResponse {
    /// The journey's appkey.
    pub appkey: Appkey,
    /// The challenge key from `CreateChallenges`.
    pub challenge_key: String,
    /// Each snapshot with the face type code of its challenge.
    pub snapshots: Vec<Snapshot>,
}

/// A validated `StartSession3D`.
#[derive(Debug)]
pub struct SessionStart {
    /// The journey's appkey.
    pub appkey: Appkey,
    /// The end user's SDK user agent, possibly empty.
    pub user_agent: String,
}

/// A validated `VerifyLiveness3D`.
#[derive(Debug)]
pub struct LivenessCheck {
    /// The journey's appkey.
    pub appkey: Appkey,
    /// The session token `StartSession3D` returned.
    pub session_token: SessionToken,
    /// The channel `StartSession3D` returned, if the caller passes it.
    pub channel: Option<String>,
}

/// A validated `SubmitDocumentImages`.
#[derive(Debug)]
pub struct DocumentSubmission {
    /// The journey's appkey.
    pub appkey: Appkey,
    /// The images (JPEG, PNG or PDF), in request order.
    pub images: Vec<ImagePayload>,
}

/// A validated `SubmitDigitalLicence`.
#[derive(Debug)]
pub struct LicenceSubmission {
    /// The journey's appkey.
    pub appkey: Appkey,
    /// The licence in its declared form.
    pub licence: ImagePayload,
}

const IMAGES: &[ImageKind] = &[ImageKind::Jpeg, ImageKind::Png];
const IMAGES_AND_PDF: &[ImageKind] = &[ImageKind::Jpeg, ImageKind::Png, ImageKind::Pdf];

/// Collects violations while parsing one request.
#[derive(Default)]
pub struct Violations(Vec<FieldViolation>);

impl Violations {
    /// Records `result`'s error against `field`, passing its value through.
    pub fn check<T, E: Into<String>>(&mut self, field: &str, result: Result<T, E>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.push(FieldViolation::new(field, e));
                None
            }
        }
    }

    /// Records a violation.
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }

    /// `Ok(value)` when nothing was recorded.
    pub fn finish<T>(self, value: impl FnOnce() -> Option<T>) -> Result<T, Error> {
        if self.0.is_empty() {
            value().ok_or_else(|| Error::Internal("validation produced no value".into()))
        } else {
            Err(Error::InvalidArgument(self.0))
        }
    }
}

/// Checks an opaque bearer key (session token, challenge key).
fn key(input: &str) -> Result<String, &'static str> {
    parse_key(input).map(str::to_owned)
}

/// Parses an appkey field.
pub fn appkey(v: &mut Violations, field: &str, input: &str) -> Option<Appkey> {
    v.check(field, Appkey::parse(input))
}

/// `CreateJourney` -> the end user and the operator profile name.
pub fn create_journey(req: &v1::CreateJourneyRequest) -> Result<NewJourneyRequest, Error> {
    let mut v = Violations::default();
    let cpf = v.check("cpf", Cpf::parse(&req.cpf));
    let name = v.check("name", PersonName::parse(&req.name));
    let birth_date = v.check("birth_date", BirthDate::parse_now(&req.birth_date));
    let customer_reference = v.check(
        "customer_reference",
        CustomerReference::parse(&req.customer_reference),
    );
    let profile = v.check("operator_profile", operator_profile(&req.operator_profile));
    let request_id = v.check("request_id", RequestId::parse(&req.request_id));
    v.finish(|| {
        Some(NewJourneyRequest {
            user: EndUser {
                cpf: cpf?,
                name: name?,
                birth_date: birth_date?,
                customer_reference: customer_reference?,
            },
            operator_profile: profile?,
            request_id: request_id?,
        })
    })
}

/// The longest `operator_profile` a caller may name: an unknown one is
/// named back in the error, so the caller's text is capped first.
pub const MAX_OPERATOR_PROFILE_CHARS: usize = 64;

/// The profile a request names, trimmed (`None`: the default); capped,
/// without control characters.
fn operator_profile(input: &str) -> Result<Option<String>, String> {
    let profile = input.trim();
    if profile.chars().count() > MAX_OPERATOR_PROFILE_CHARS {
        return Err(format!("at most {MAX_OPERATOR_PROFILE_CHARS} characters"));
    }
    if profile.chars().any(char::is_control) {
        return Err("no control characters".into());
    }
    Ok((!profile.is_empty()).then(|| profile.to_owned()))
}

/// A request that names only the journey's appkey.
pub fn appkey_only(input: &str) -> Result<Appkey, Error> {
    let mut v = Violations::default();
    let key = appkey(&mut v, "appkey", input);
    v.finish(|| key)
}

/// `WatchJourney` -> the journey to watch, by appkey or by the reference
/// `CreateJourney` returned (resolved by the watches).
pub fn watch_journey(req: &v1::WatchJourneyRequest) -> Result<WatchTarget, Error> {
    use v1::watch_journey_request::Journey;
    let mut v = Violations::default();
    let target = match &req.journey {
        Some(Journey::Appkey(key)) => appkey(&mut v, "appkey", key).map(WatchTarget::Appkey),
        Some(Journey::JourneyRef(text)) => v
            .check(
                "journey_ref",
                JourneyRef::parse(text.trim()).ok_or(
                    "must be a journey reference returned by CreateJourney (`j-` and 16 hex digits)",
                ),
            )
            .map(WatchTarget::Journey),
        None => {
            v.add("journey", "set either appkey or journey_ref");
            None
        }
    };
    v.finish(|| target)
}

/// `SubmitChallengeResponse` -> appkey, challenge key and the snapshots.
pub fn challenge_response(
    req: v1::SubmitChallengeResponseRequest,
    limits: &LimitsConfig,
) -> Result<ChallengeResponse, Error> {
    let mut v = Violations::default();
    let key_ = appkey(&mut v, "appkey", &req.appkey);
    let chkey = v.check("challenge_key", key(&req.challenge_key));
    if req.snapshots.is_empty() {
        v.add("snapshots", "at least one snapshot is required");
    }
    if req.snapshots.len() > limits.max_images {
        v.add(
            "snapshots",
            format!("at most {} snapshots are accepted", limits.max_images),
        );
    }
    let mut snapshots = Vec::with_capacity(req.snapshots.len());
    for (i, s) in req.snapshots.into_iter().enumerate() {
        let code = v.check(
            &format!("snapshots[{i}].face_type_code"),
            face_type_code(&s.face_type_code),
        );
        let img = v.check(
            &format!("snapshots[{i}].image"),
            ImagePayload::parse(s.image, IMAGES, limits.max_image_bytes),
        );
        if let (Some(img), Some(code)) = (img, code) {
            snapshots.push(Snapshot {
                image: img,
                face_type_code: code,
            });
        }
    }
    v.finish(|| {
        Some(ChallengeResponse {
            appkey: key_?,
            challenge_key: chkey?,
            snapshots,
        })
    })
}

/// A face type code travels inside the snapshot's data URL
/// (`type:<code>,`), so it must be short and free of separators.
fn face_type_code(code: &str) -> Result<String, &'static str> {
    let code = code.trim();
    if code.is_empty() {
        return Err("is required: the code of the challenge's face type");
    }
    if code.len() > 64
        || !code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err("must be a face type code returned by CreateChallenges");
    }
    Ok(code.to_owned())
}

/// `StartSession3D` -> appkey and user agent.
pub fn start_session(req: &v1::StartSession3DRequest) -> Result<SessionStart, Error> {
    let mut v = Violations::default();
    let key_ = appkey(&mut v, "appkey", &req.appkey);
    if req.user_agent.len() > 1024 || req.user_agent.chars().any(char::is_control) {
        v.add(
            "user_agent",
            "must be at most 1024 bytes without control characters",
        );
    }
    v.finish(|| {
        Some(SessionStart {
            appkey: key_?,
            user_agent: req.user_agent.clone(),
        })
    })
}

/// `VerifyLiveness3D` -> appkey, session token, optional channel.
pub fn verify_liveness(req: &v1::VerifyLiveness3DRequest) -> Result<LivenessCheck, Error> {
    let mut v = Violations::default();
    let key_ = appkey(&mut v, "appkey", &req.appkey);
    let token = v.check("session_token", key(&req.session_token));
    let channel = req.channel.trim();
    if channel.len() > 128 || channel.chars().any(char::is_control) {
        v.add(
            "channel",
            "must be a channel name returned by StartSession3D",
        );
    }
    let channel = (!channel.is_empty()).then(|| channel.to_owned());
    v.finish(|| {
        Some(LivenessCheck {
            appkey: key_?,
            session_token: SessionToken::new(token?),
            channel,
        })
    })
}

/// `SubmitDocumentImages` -> appkey and the images.
pub fn document_images(
    req: v1::SubmitDocumentImagesRequest,
    limits: &LimitsConfig,
) -> Result<DocumentSubmission, Error> {
    let mut v = Violations::default();
    let key_ = appkey(&mut v, "appkey", &req.appkey);
    if req.images.is_empty() {
        v.add("images", "at least one image is required");
    }
    if req.images.len() > limits.max_images {
        v.add(
            "images",
            format!("at most {} images are accepted", limits.max_images),
        );
    }
    let images: Vec<ImagePayload> = req
        .images
        .into_iter()
        .enumerate()
        .filter_map(|(i, img)| {
            v.check(
                &format!("images[{i}].content"),
                ImagePayload::parse(img.content, IMAGES_AND_PDF, limits.max_image_bytes),
            )
        })
        .collect();
    v.finish(|| {
        Some(DocumentSubmission {
            appkey: key_?,
            images,
        })
    })
}

/// `SubmitDigitalLicence` -> appkey and the licence in its declared form.
pub fn digital_licence(
    req: v1::SubmitDigitalLicenceRequest,
    limits: &LimitsConfig,
) -> Result<LicenceSubmission, Error> {
    use v1::submit_digital_licence_request::Licence;
    let mut v = Violations::default();
    let key_ = appkey(&mut v, "appkey", &req.appkey);
    let max = limits.max_image_bytes;
    let licence = match req.licence {
        None => {
            v.add("licence", "one of qr_image, pdf or qr_binary is required");
            None
        }
        Some(Licence::QrImage(b)) => v.check("qr_image", ImagePayload::parse(b, IMAGES, max)),
        Some(Licence::Pdf(b)) => v.check("pdf", ImagePayload::parse(b, &[ImageKind::Pdf], max)),
        Some(Licence::QrBinary(b)) => v.check("qr_binary", qr_binary(b, max)),
    };
    v.finish(|| {
        Some(LicenceSubmission {
            appkey: key_?,
            licence: licence?,
        })
    })
}

/// The QR binary is opaque, but an image or a PDF in that slot is a
/// caller's mix-up worth naming.
fn qr_binary(bytes: Bytes, max: usize) -> Result<ImagePayload, String> {
    let p = ImagePayload::parse_opaque(bytes, max)?;
    match p.kind() {
        Some(_) => Err("is an image or PDF: send it as qr_image or pdf".to_owned()),
        None => Ok(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(e: Error) -> Vec<String> {
        match e {
            Error::InvalidArgument(v) => v.into_iter().map(|f| f.field).collect(),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn create_journey_names_every_bad_field_and_echoes_no_value() {
        let req = v1::CreateJourneyRequest {
            cpf: "123.456.789-00".into(),
            name: "".into(),
            birth_date: "2999-01-01".into(),
            customer_reference: "has space".into(),
            operator_profile: "".into(),
            request_id: "not-a-uuid-canary".into(),
        };
        let err = create_journey(&req).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("123.456"), "{text}");
        assert!(!text.contains("canary"), "{text}");
        assert_eq!(
            fields(err),
            [
                "cpf",
                "name",
                "birth_date",
                "customer_reference",
                "request_id"
            ]
        );
    }

    #[test]
    fn snapshots_are_checked_one_by_one() {
        let req = v1::SubmitChallengeResponseRequest {
            appkey: "k".into(),
            challenge_key: "".into(),
            snapshots: vec![
                v1::Snapshot {
                    image: Bytes::from_static(b"\x89PNG\r\n\x1a\nxx"),
                    face_type_code: "cod01".into(),
                },
                v1::Snapshot {
                    image: Bytes::from_static(b"GIF89a"),
                    face_type_code: "a,b".into(),
                },
            ],
        };
        let f = fields(challenge_response(req, &LimitsConfig::default()).unwrap_err());
        assert_eq!(
            f,
            [
                "challenge_key",
                "snapshots[1].face_type_code",
                "snapshots[1].image"
            ]
        );
    }

    #[test]
    fn digital_licence_requires_one_form_and_checks_it() {
        let limits = LimitsConfig::default();
        let none = v1::SubmitDigitalLicenceRequest {
            appkey: "k".into(),
            licence: None,
        };
        assert_eq!(
            fields(digital_licence(none, &limits).unwrap_err()),
            ["licence"]
        );
        let pdf_as_image = v1::SubmitDigitalLicenceRequest {
            appkey: "k".into(),
            licence: Some(v1::submit_digital_licence_request::Licence::QrImage(
                Bytes::from_static(b"%PDF-1.4"),
            )),
        };
        assert_eq!(
            fields(digital_licence(pdf_as_image, &limits).unwrap_err()),
            ["qr_image"]
        );
    }

    #[test]
    fn watch_journey_takes_one_of_appkey_or_reference_and_checks_it() {
        use v1::watch_journey_request::Journey;
        let by = |journey| v1::WatchJourneyRequest { journey };
        assert!(matches!(
            watch_journey(&by(Some(Journey::Appkey(" k ".into())))),
            Ok(WatchTarget::Appkey(_))
        ));
        assert!(matches!(
            watch_journey(&by(Some(Journey::JourneyRef("j-0123456789abcdef".into())))),
            Ok(WatchTarget::Journey(_))
        ));
        assert_eq!(fields(watch_journey(&by(None)).unwrap_err()), ["journey"]);
        assert_eq!(
            fields(watch_journey(&by(Some(Journey::JourneyRef("j-x".into())))).unwrap_err()),
            ["journey_ref"]
        );
        // The same rule as every other appkey: 512 characters, not bytes.
        let long = "é".repeat(300);
        assert!(watch_journey(&by(Some(Journey::Appkey(long)))).is_ok());
        let too_long = "a".repeat(513);
        assert_eq!(
            fields(watch_journey(&by(Some(Journey::Appkey(too_long)))).unwrap_err()),
            ["appkey"]
        );
    }

    #[test]
    fn keys_must_be_present_and_free_of_white_space() {
        assert!(appkey_only("").is_err());
        assert!(appkey_only("a b").is_err());
        assert!(appkey_only(" abc ").is_ok());
    }
}
