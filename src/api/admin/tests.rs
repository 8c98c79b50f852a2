use tonic::{Code, service::Interceptor as _};
use tonic_types::StatusExt;

use super::*;
use crate::{channels::RoutingMode, config_source::ConfigError, domain::AdminToken};

fn call(auth: &mut AdminAuth, header: Option<&str>) -> Result<(), Status> {
    let mut req = Request::new(());
    if let Some(h) = header {
        req.metadata_mut()
            .insert("authorization", h.parse().unwrap());
    }
    auth.call(req).map(|_| ())
}

#[test]
fn only_the_exact_bearer_token_is_admitted() {
    let mut auth = admin_auth_interceptor(&AdminToken::new("s3cret").unwrap());
    assert!(call(&mut auth, Some("Bearer s3cret")).is_ok());
    assert!(call(&mut auth, Some("bearer s3cret")).is_ok());
    for bad in [
        None,
        Some("Bearer s3cre"),
        Some("Bearer s3cret2"),
        Some("Basic s3cret"),
        Some("s3cret"),
        Some("Bearer "),
    ] {
        let err = call(&mut auth, bad).unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{bad:?}");
        assert!(!err.message().contains("s3cret"));
    }
}

#[test]
fn blank_tokens_are_refused_and_debug_is_redacted() {
    assert!(AdminToken::new("  ").is_none());
    let t = AdminToken::new("s3cret").unwrap();
    assert!(!format!("{t:?}").contains("s3cret"));
}

#[test]
fn an_admin_token_with_surrounding_whitespace_is_stored_trimmed() {
    let token = "t".repeat(MIN_ADMIN_TOKEN_CHARS);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ws");
    std::fs::write(&path, format!("  {token}\t \r\n")).unwrap();
    let resolved = AdminConfig {
        token_file: Some(path),
        ..AdminConfig::default()
    }
    .resolve_token()
    .unwrap();
    assert_eq!(resolved.expose(), token);
    let mut auth = admin_auth_interceptor(&resolved);
    assert!(call(&mut auth, Some(&format!("Bearer {token}"))).is_ok());
    // Padding does not count toward the minimum length.
    let padded = format!("  {}  ", "t".repeat(MIN_ADMIN_TOKEN_CHARS - 2));
    assert!(
        AdminConfig {
            token_file: Some({
                let p = dir.path().join("pad");
                std::fs::write(&p, padded).unwrap();
                p
            }),
            ..AdminConfig::default()
        }
        .resolve_token()
        .is_err()
    );
    assert_eq!(AdminToken::new(" s3cret ").unwrap().expose(), "s3cret");
}

#[test]
fn a_short_admin_token_is_refused_and_a_missing_one_only_disables_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, token: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, token).unwrap();
        AdminConfig {
            token_file: Some(path),
            ..AdminConfig::default()
        }
    };
    let short = file("short", "x").resolve_token().unwrap_err();
    assert!(matches!(short, ConfigError::Invalid(_)), "{short}");
    assert!(short.to_string().contains("32 characters"), "{short}");
    let thirty_one = "a".repeat(MIN_ADMIN_TOKEN_CHARS - 1);
    assert!(file("31", &thirty_one).resolve_token().is_err());
    let ok = "a".repeat(MIN_ADMIN_TOKEN_CHARS);
    assert!(file("32", &ok).resolve_token().is_ok());
    let empty = file("empty", "\n").resolve_token().unwrap_err();
    assert!(
        matches!(empty, ConfigError::MissingSecret { .. }),
        "{empty}"
    );
    let unset = AdminConfig {
        token_env: "IDGATE_TEST_SURELY_UNSET_ADMIN_TOKEN".into(),
        token_file: None,
    }
    .resolve_token()
    .unwrap_err();
    assert!(
        matches!(unset, ConfigError::MissingSecret { .. }),
        "{unset}"
    );
}

#[test]
fn unspecified_and_stray_channel_modes_are_invalid() {
    assert_eq!(
        Status::from(mode_from_proto(0, "", &[]).unwrap_err()).code(),
        Code::InvalidArgument
    );
    assert_eq!(
        Status::from(mode_from_proto(99, "", &[]).unwrap_err()).code(),
        Code::InvalidArgument
    );
    assert_eq!(
        Status::from(mode_from_proto(4, "", &[]).unwrap_err()).code(),
        Code::InvalidArgument
    );
    assert_eq!(
        Status::from(mode_from_proto(1, "x", &[]).unwrap_err()).code(),
        Code::InvalidArgument
    );
    assert_eq!(
        mode_from_proto(4, "x", &[]).unwrap(),
        RoutingMode::Channel("x".into())
    );
}

fn weight(channel: &str, weight: u32) -> pb::ChannelWeight {
    pb::ChannelWeight {
        channel: channel.into(),
        weight,
    }
}

fn violation(status: &Status) -> String {
    let details = status.get_error_details();
    let bad = details.bad_request().expect("BadRequest");
    bad.field_violations[0].field.clone()
}

#[test]
fn bad_weighted_modes_are_invalid_and_name_the_field() {
    let w = pb::RoutingMode::Weighted as i32;
    let ok = mode_from_proto(w, "", &[weight("primary", 90), weight("alternative", 10)]);
    assert_eq!(
        ok.unwrap().to_string(),
        "weighted:primary=90,alternative=10"
    );
    let cases: [(Vec<pb::ChannelWeight>, &str); 6] = [
        (vec![], "weights"),
        (vec![weight("a", 0), weight("b", 0)], "weights"),
        (vec![weight("a", 1), weight("a b", 1)], "weights[1].channel"),
        (
            vec![weight("a", 1), weight("b", 1), weight("a", 2)],
            "weights[2].channel",
        ),
        (
            vec![weight("a", 1), weight("b", u32::MAX)],
            "weights[1].weight",
        ),
        (vec![weight("", 1)], "weights[0].channel"),
    ];
    for (weights, field) in cases {
        let err = Status::from(mode_from_proto(w, "", &weights).unwrap_err());
        assert_eq!(err.code(), Code::InvalidArgument, "{weights:?}");
        assert_eq!(violation(&err), field, "{weights:?}");
    }
    let stray = Status::from(mode_from_proto(1, "", &[weight("a", 1)]).unwrap_err());
    assert_eq!(violation(&stray), "weights");
}
