//! The liveness answers besides the result: the verdict with raw and typed
//! code, challenges with icons and a sixty-second deadline, and the 3D
//! session requiring a token.

use std::time::{Duration, SystemTime};

use super::*;
use crate::upstream::wire::ChallengesWire;

#[test]
fn verdict_converts_with_raw_and_typed_code() {
    let v = verdict(
        parse_json(br#"{"valid":false,"codID":300.2,"cause":"bloqueado","protocol":7}"#).unwrap(),
    );
    assert_eq!(
        (v.valid, v.code(), v.raw_code.as_str()),
        (false, pb::LivenessCode::UserBlocked, "300.2")
    );
    assert_eq!((v.cause.as_str(), v.protocol.as_str()), ("bloqueado", "7"));
}

#[test]
fn challenges_convert_with_icons_and_a_sixty_second_deadline() {
    let json = br#"{"chkey":"CH-1","totalTime":"12","numberOfChallenges":2,
        "snapFrequenceInMillis":1000,"snapNumber":4,
        "challenges":[{"mensagem":"Sorria","tempoEmSegundos":3,"tipoFace":{"codigo":2,"imagem":"aGk="}},
                      {"mensagem":"Olhe","tempoEmSegundos":"3","tipoFace":{"codigo":"1","imagem":null}}]}"#;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let wire: ChallengesWire<'_> = parse_json(json).unwrap();
    let c = challenges(wire, at).unwrap();
    assert_eq!(c.challenge_key, "CH-1");
    assert_eq!((c.challenge_count, c.snapshot_count), (2, 4));
    assert_eq!(
        c.total_duration,
        Some(prost_types::Duration {
            seconds: 12,
            nanos: 0
        })
    );
    assert_eq!(
        c.snapshot_interval,
        Some(prost_types::Duration {
            seconds: 1,
            nanos: 0
        })
    );
    assert_eq!(c.challenges[1].duration.unwrap().seconds, 3);
    assert_eq!(
        c.challenges[0].face_type.as_ref().unwrap().icon.as_ref(),
        b"hi"
    );
    assert_eq!(c.challenges[1].face_type.as_ref().unwrap().code, "1");
    assert_eq!(c.challenges[0].face_type.as_ref().unwrap().code, "2");
    assert_eq!(c.expire_time.unwrap().seconds, 1_800_000_060);

    let wire: ChallengesWire<'_> = parse_json(br#"{"challenges":[]}"#).unwrap();
    assert_eq!(challenges(wire, at).unwrap_err().0, "missing field `chkey`");
    let wire: ChallengesWire<'_> =
        parse_json(br#"{"chkey":"k","challenges":[{"tipoFace":{"codigo":1,"imagem":"!!"}}]}"#)
            .unwrap();
    assert_eq!(
        challenges(wire, at).unwrap_err().0,
        "undecodable Base64 image at challenges[0].tipoFace.imagem"
    );
}

#[test]
fn session_3d_requires_a_token_and_reports_contingency() {
    let s = session_3d(
        parse_json(
            br#"{"isContingency":true,"token":"canary-st-1","vendor":"alt","url":"https://v"}"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert!(s.contingency);
    assert!(!format!("{s:?}").contains("canary"));
    assert_eq!(
        (s.token.expose(), s.vendor.as_str(), s.vendor_url.as_str()),
        ("canary-st-1", "alt", "https://v")
    );
    assert!(session_3d(parse_json(br#"{"vendor":"v"}"#).unwrap()).is_err());
}
