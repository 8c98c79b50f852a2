use super::*;

fn caller(toml_text: &str) -> CallerConfig {
    toml::from_str(toml_text).unwrap()
}

fn err(callers: &[CallerConfig], mode: AuthMode) -> String {
    validate_callers(callers, mode, &["default"])
        .unwrap_err()
        .to_string()
}

#[test]
fn the_issue_s_example_parses_and_validates() {
    let text = r#"
        mode = "jwt"
        [jwt]
        jwks_file = "/etc/idgate/jwks.json"
        issuer    = "https://issuer.example"
        audience  = "idgate"
    "#;
    let auth: AuthConfig = toml::from_str(text).unwrap();
    auth.validate().unwrap();
    let jwt = auth.jwt.unwrap();
    assert_eq!(jwt.subject_claim, "sub");
    assert_eq!(jwt.leeway(), Duration::from_secs(30));
    let c = caller(
        r#"
        name              = "onboarding"
        jwt_subject       = "system:serviceaccount:onboarding:api"
        operator_profiles = ["default"]
        operations        = ["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]
        journeys          = "own"
        result_view       = "full"
    "#,
    );
    validate_callers(&[c], AuthMode::Jwt, &["default"]).unwrap();
}

#[test]
fn errors_name_the_key_and_not_the_value() {
    let bad_op = caller(
        r#"name = "a"
        jwt_subject = "s"
        operations = ["eyJhbGciOi.secret"]"#,
    );
    let e = err(&[bad_op], AuthMode::Jwt);
    assert!(e.contains("callers[0].operations[0]"), "{e}");
    assert!(!e.contains("secret"), "{e}");

    let two_ids = caller(
        r#"name = "a"
        jwt_subject = "s"
        spiffe_id = "spiffe://x""#,
    );
    assert!(err(&[two_ids], AuthMode::JwtOrMtls).contains("exactly one"));

    let unreachable = caller(
        r#"name = "a"
        spiffe_id = "spiffe://corp/a""#,
    );
    assert!(err(&[unreachable], AuthMode::Jwt).contains("callers[0].spiffe_id"));

    let profile = caller(
        r#"name = "a"
        jwt_subject = "s"
        operator_profiles = ["premium"]"#,
    );
    assert!(err(&[profile], AuthMode::Jwt).contains("callers[0].operator_profiles[0]"));

    let view = caller(
        r#"name = "a"
        jwt_subject = "s"
        result_view = "some""#,
    );
    assert!(err(&[view], AuthMode::Jwt).contains("callers[0].result_view"));

    let a = caller(
        r#"name = "a"
        jwt_subject = "s""#,
    );
    let b = caller(
        r#"name = "b"
        jwt_subject = "s""#,
    );
    assert!(err(&[a.clone(), b], AuthMode::Jwt).contains("callers[1].jwt_subject"));
    assert!(err(&[a.clone(), a], AuthMode::Jwt).contains("callers[1].name"));
}

#[test]
fn jwt_modes_need_their_section_and_one_key_source() {
    let auth: AuthConfig = toml::from_str(r#"mode = "jwt_or_mtls""#).unwrap();
    assert!(
        auth.validate()
            .unwrap_err()
            .to_string()
            .contains("[auth.jwt]")
    );
    let none: AuthConfig = toml::from_str(r#"mode = "none""#).unwrap();
    none.validate().unwrap();
    let both: AuthConfig = toml::from_str(
        r#"mode = "jwt"
        [jwt]
        jwks_file = "a"
        jwks_url = "https://x/jwks"
        issuer = "i"
        audience = "a""#,
    )
    .unwrap();
    assert!(
        both.validate()
            .unwrap_err()
            .to_string()
            .contains("not both")
    );
    let url: AuthConfig = toml::from_str(
        r#"mode = "jwt"
        [jwt]
        jwks_url = "ftp://x/jwks"
        issuer = "i"
        audience = "a""#,
    )
    .unwrap();
    assert!(
        url.validate()
            .unwrap_err()
            .to_string()
            .contains("auth.jwt.jwks_url")
    );
}

#[test]
fn a_jwks_url_is_https_or_plain_http_to_this_machine_only() {
    let location = |url: &str| {
        let text = format!("jwks_url = {url:?}\nissuer = \"i\"\naudience = \"a\"\n");
        toml::from_str::<JwtConfig>(&text).unwrap().location()
    };
    for url in [
        "https://issuer.example/jwks.json",
        "http://127.0.0.1:8080/jwks.json",
        "http://127.3.4.5/jwks.json",
        "http://[::1]:8080/jwks.json",
        "http://localhost/jwks.json",
    ] {
        assert!(location(url).is_ok(), "{url}");
    }
    for url in [
        "http://issuer.example/jwks.json",
        "http://10.0.0.7/jwks.json",
        "http://localhost.evil.example/jwks.json",
        "ftp://issuer.example/jwks.json",
    ] {
        let err = location(url).unwrap_err().to_string();
        assert!(err.contains("auth.jwt.jwks_url"), "{url}: {err}");
        assert!(err.contains("https://"), "{url}: {err}");
    }
}

#[test]
fn a_ca_file_without_a_certificate_is_refused_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.pem");
    std::fs::write(&path, "not a certificate\n").unwrap();
    let text = format!(
        "jwks_url = \"https://issuer.example/jwks.json\"\nissuer = \"i\"\naudience = \"a\"\nca_file = {:?}\n",
        path.display().to_string()
    );
    let err = toml::from_str::<JwtConfig>(&text)
        .unwrap()
        .location()
        .unwrap_err()
        .to_string();
    assert!(err.contains("auth.jwt.ca_file"), "{err}");
}
