//! Parsing of every answer shape, with realistic samples.

use super::*;

#[test]
fn credential_keeps_the_whole_body_and_reads_expires() {
    let body = br#"{"token":"eyJhbGciOi.abc","expires":"21/11/2026 15:04:05"}"#;
    let a = parse_credential(body).unwrap();
    assert_eq!(a.body, String::from_utf8_lossy(body));
    assert_eq!(a.expires.as_deref(), Some("21/11/2026 15:04:05"));
    assert!(!format!("{a:?}").contains("eyJ"));
}

#[test]
fn credential_without_token_or_empty_is_malformed_and_plain_text_is_opaque() {
    assert_eq!(
        parse_credential(br#"{"expires":"x"}"#).unwrap_err().0,
        "missing field `token`"
    );
    assert!(parse_credential(b"").is_err());
    assert!(parse_credential(b"{\"token\":").is_err());
    let a = parse_credential(b"opaque-token\n").unwrap();
    assert_eq!((a.body.as_str(), a.expires), ("opaque-token", None));
}

#[test]
fn appkey_comes_as_object_bare_string_or_plain_text() {
    assert_eq!(parse_appkey(br#"{"appkey":"k-1"}"#).unwrap(), "k-1");
    assert_eq!(parse_appkey(br#""k-2""#).unwrap(), "k-2");
    assert_eq!(parse_appkey(b"k-3\r\n").unwrap(), "k-3");
    assert!(parse_appkey(br#"{"other":1}"#).is_err());
    assert!(parse_appkey(b"").is_err());
    assert!(parse_appkey(b"<html> error </html>").is_err());
}

#[test]
fn session_token_is_read_under_either_name() {
    let mut s: Session3DWire =
        parse_json(br#"{"isContingency":"true","sessionToken":"st","vendor":"v","url":"u"}"#)
            .unwrap();
    assert_eq!(s.take_token().as_deref(), Some("st"));
    assert_eq!(s.is_contingency.0, Some(true));
    let mut s: Session3DWire = parse_json(br#"{"token":"t","sessionToken":"st"}"#).unwrap();
    assert_eq!(s.take_token().as_deref(), Some("t"));
    let mut s: Session3DWire = parse_json(br#"{"token":""}"#).unwrap();
    assert_eq!(s.take_token(), None);
}

#[test]
fn parse_errors_give_category_and_position_never_values() {
    let err = parse_json::<VerdictWire>(br#"{"valid":"MARIA-DA-SILVA-52998224725"}"#).unwrap_err();
    assert!(
        err.0
            .starts_with("unexpected type or value at line 1 column"),
        "{}",
        err.0
    );
    assert!(!err.0.contains("MARIA") && !err.0.contains("529"));
    let err = parse_json::<VerdictWire>(b"{\"valid\": tru").unwrap_err();
    assert!(err.0.contains("line 1"), "{}", err.0);
    let err = parse_json::<VerdictWire>(b"").unwrap_err();
    assert!(err.0.starts_with("unexpected end of input"), "{}", err.0);
}

#[test]
fn verdict_accepts_codid_as_number_or_string() {
    let v: VerdictWire =
        parse_json(br#"{"valid":true,"codID":200.0,"cause":"","protocol":"123"}"#).unwrap();
    assert_eq!(v.cod_id.as_deref(), Some("200.0"));
    let v: VerdictWire =
        parse_json(br#"{"valid":"false","codID":"300.1","protocol":456}"#).unwrap();
    assert_eq!(v.cod_id.as_deref(), Some("300.1"));
    assert_eq!(v.protocol.as_deref(), Some("456"));
    assert_eq!(v.valid.0, Some(false));
}

#[test]
fn document_accepted_reads_the_code_as_number_or_string() {
    let d: DocumentAcceptedWire = parse_json(br#"{"appkey":"k","codigoDocumento":"987"}"#).unwrap();
    assert_eq!(d.codigo_documento.0, Some(987));
    let d: DocumentAcceptedWire = parse_json(br#"{"codigoDocumento":12345678901}"#).unwrap();
    assert_eq!(d.codigo_documento.0, Some(12_345_678_901));
}

#[test]
fn image_strings_are_borrowed_from_the_body_when_unescaped() {
    let body = br#"{"fotos":{"livenessResult":{"frontal":"aGVsbG8="},"documento":[]}}"#;
    let r: JourneyResultWire<'_> = parse_json(body).unwrap();
    let frontal = r.fotos.unwrap().liveness_result.unwrap().frontal;
    assert!(matches!(frontal.0, Some(std::borrow::Cow::Borrowed(_))));
}

#[test]
fn debug_of_wire_structs_is_redacted() {
    let r: JourneyResultWire<'_> =
        parse_json(br#"{"status":"Completo","idExternoCliente":"PROP1"}"#).unwrap();
    assert_eq!(format!("{r:?}"), "JourneyResultWire { <redacted> }");
}
