//! `idgate check --config FILE`, the binary run as a deploy step would:
//! a good configuration exits 0 with one line, each bad one exits 1 with
//! an error naming its key; and it opens no socket: the good
//! configuration's listen ports are held by the test (a bind would fail),
//! and its JWKS URL and upstream point at listeners of the test that
//! never see a connection.

use std::{
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::Output,
};

use crate::support::{
    jwt::{TestKey, jwks_of},
    process::STATE_IN_MEMORY,
    temp,
    tls::TestCa,
    wait::EVENT_WAIT,
};

fn check(config: &Path) -> Output {
    crate::child_env::command(env!("CARGO_BIN_EXE_idgate"))
        .args(["check", "--config"])
        .arg(config)
        .env(STATE_IN_MEMORY.0, STATE_IN_MEMORY.1)
        .output()
        .expect("run idgate check")
}

/// Ports a bind would need, held for the test's length.
fn held() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("address");
    (listener, addr)
}

/// Whether anyone connected to `listener` (a connection the process made
/// before it exited waits in the accept queue).
fn connected(listener: &TcpListener) -> bool {
    listener.accept().is_ok()
}

/// Everything a real deployment names: TLS with client certificates and
/// a CRL, a JWKS file and a JWKS CA, an upstream and its operator.
struct Files {
    ca: TestCa,
    server: (PathBuf, PathBuf),
    crl: PathBuf,
    jwks: PathBuf,
    password: PathBuf,
}

impl Files {
    fn new() -> Files {
        let ca = TestCa::new();
        let server = ca.write("server", &ca.leaf(&["localhost"]));
        let crl = ca.write_crl("clients", &[7]);
        let jwks = temp::file("jwks", jwks_of(&[&TestKey::es256("k")]).as_bytes());
        let password = temp::file("operator", b"operator-password");
        Files {
            ca,
            server,
            crl,
            jwks,
            password,
        }
    }

    /// A configuration listening on `listen` (grpc, http, admin), with
    /// `jwt` as its `[auth.jwt]` key source lines and `upstream` as its
    /// base URL; `extra` appended.
    fn config(&self, listen: [SocketAddr; 3], jwt: &str, upstream: &str, extra: &str) -> PathBuf {
        let [grpc, http, admin] = listen;
        let text = format!(
            r#"
[listen]
grpc = "{grpc}"
http = "{http}"
admin = "{admin}"

[tls.grpc]
cert_file = {cert:?}
key_file = {key:?}
client_ca_file = {ca:?}
crl_files = [{crl:?}]

[upstream]
base_url = "{upstream}"
result_base_url = "{upstream}"

[[operators]]
name = "default"
login = "operator"
password_file = {password:?}

[auth]
mode = "jwt_or_mtls"
[auth.jwt]
{jwt}
issuer = "https://issuer.test"
audience = "idgate"

[[callers]]
name = "onboarding"
jwt_subject = "svc-onboarding"
operator_profiles = ["default"]
operations = ["create_journey"]
{extra}
"#,
            cert = self.server.0,
            key = self.server.1,
            ca = self.ca.ca_file(),
            crl = self.crl,
            password = self.password,
        );
        temp::file("check.toml", text.as_bytes())
    }
}

#[test]
fn a_good_configuration_passes_with_one_line_and_opens_no_socket() {
    let files = Files::new();
    let ports = [held(), held(), held()];
    let (upstream, upstream_addr) = held();
    let (issuer, issuer_addr) = held();
    let listen = [ports[0].1, ports[1].1, ports[2].1];

    let with_file = files.config(
        listen,
        &format!("jwks_file = {:?}", files.jwks),
        &format!("https://{upstream_addr}/facecaptcha"),
        "",
    );
    let out = check(&with_file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains("configuration valid"), "{stdout}");
    assert!(stdout.contains("1 JWKS key(s)"), "{stdout}");

    // A JWKS URL is not fetched (its CA file is read).
    let with_url = files.config(
        listen,
        &format!(
            "jwks_url = \"https://{issuer_addr}/jwks.json\"\nca_file = {:?}",
            files.ca.ca_file()
        ),
        &format!("https://{upstream_addr}/facecaptcha"),
        "",
    );
    let out = check(&with_url);
    assert!(out.status.success(), "{out:?}");
    assert!(!connected(&issuer), "the JWKS URL was fetched");
    assert!(!connected(&upstream), "the upstream was called");
}

#[test]
fn each_bad_configuration_fails_naming_what_is_wrong() {
    let files = Files::new();
    let listen = [held().1, held().1, held().1];
    let jwks = format!("jwks_file = {:?}", files.jwks);
    let upstream = "https://127.0.0.1:1/facecaptcha";
    let not_a_crl = temp::file("not-a-crl", b"-----BEGIN CERTIFICATE-----\n");
    let empty_jwks = temp::file("jwks", br#"{"keys":[]}"#);
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            files.config(listen, "jwks_url = \"http://issuer.test/jwks.json\"", upstream, ""),
            "auth.jwt.jwks_url",
        ),
        (
            files.config(listen, &format!("jwks_file = {empty_jwks:?}"), upstream, ""),
            "JWKS",
        ),
        (
            files.config(
                listen,
                &jwks,
                upstream,
                &format!("[tls.admin]\ncert_file = {:?}\nkey_file = {:?}\ncrl_files = [{:?}]", files.server.0, files.server.1, files.crl),
            ),
            "tls.admin",
        ),
        (
            files.config(
                listen,
                &jwks,
                upstream,
                &format!("[tls.http]\ncert_file = {:?}\nkey_file = \"/nonexistent/idgate.key\"", files.server.0),
            ),
            "/nonexistent/idgate.key",
        ),
        (
            files.config(
                listen,
                &jwks,
                upstream,
                &format!("[tls.http]\ncert_file = {:?}\nkey_file = {:?}\nclient_ca_file = {:?}\ncrl_files = [{not_a_crl:?}]", files.server.0, files.server.1, files.ca.ca_file()),
            ),
            "CRL",
        ),
    ];
    for (config, named) in cases {
        let out = check(&config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{named}: {out:?}");
        assert!(stderr.contains(named), "{named}: {stderr}");
        assert!(out.stdout.is_empty(), "{named}: {out:?}");
    }
}

#[test]
fn tokens_without_tls_and_callers_of_an_open_gateway_fail_the_check() {
    let dir = temp::dir("check");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("config");
        path
    };
    let jwks = temp::file("jwks", jwks_of(&[&TestKey::es256("k")]).as_bytes());
    let plaintext = write(
        "plaintext.toml",
        &format!(
            "[listen]\ngrpc = \"0.0.0.0:50051\"\n[auth]\nmode = \"jwt\"\n[auth.jwt]\njwks_file = {jwks:?}\nissuer = \"i\"\naudience = \"a\"\n[[callers]]\nname = \"c\"\njwt_subject = \"s\"\noperations = [\"create_journey\"]\noperator_profiles = [\"sandbox\"]\n"
        ),
    );
    let open = write(
        "open.toml",
        "[auth]\nmode = \"none\"\n[[callers]]\nname = \"c\"\njwt_subject = \"s\"\noperations = [\"create_journey\"]\n",
    );
    for (config, named) in [(plaintext, "allow_plaintext_tokens"), (open, "[[callers]]")] {
        let out = check(&config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{named}: {out:?}");
        assert!(stderr.contains(named), "{named}: {stderr}");
    }
}

/// What `idgate serve` made of `config`: `Ok` once it listened (it is
/// then killed), `Err` with its stderr when it exited first. Waits at most
/// [`EVENT_WAIT`] for either.
fn serve(config: &Path) -> Result<Vec<String>, String> {
    use std::io::{BufRead as _, Read as _};
    let mut child = crate::child_env::command(env!("CARGO_BIN_EXE_idgate"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .env(STATE_IN_MEMORY.0, STATE_IN_MEMORY.1)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn idgate serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + EVENT_WAIT;
    let mut seen = Vec::new();
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut stderr)
                .expect("read stderr");
            assert!(!status.success(), "serve exited 0 at start: {stderr}");
            return Err(stderr);
        }
        if let Ok(line) = lines.recv_timeout(std::time::Duration::from_millis(50)) {
            let listening = line.contains("idgate listening");
            seen.push(line);
            if listening {
                child.kill().expect("kill serve");
                child.wait().expect("reap serve");
                return Ok(seen);
            }
        }
    }
    child.kill().expect("kill serve");
    child.wait().expect("reap serve");
    panic!("serve neither listened nor exited within {EVENT_WAIT:?}: {seen:#?}");
}

/// The admin token's rule, judged by `check` and `serve` alike: on an
/// address other machines reach, without `[tls.admin]`, an admin token is
/// refused by both unless `[listen] allow_plaintext_admin` says so, which
/// both accept (and `serve` warns about); on loopback both accept it.
/// Bearer tokens in clear on the public listener agree too.
#[test]
fn check_and_serve_refuse_the_same_configurations_an_admin_token_in_clear_off_loopback_among_them()
{
    let dir = temp::dir("check-serve");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, crate::support::gateway::ADMIN_TOKEN).expect("token");
    let jwks = temp::file("jwks", jwks_of(&[&TestKey::es256("k")]).as_bytes());
    // `[listen]` with the public and admin hosts and `listen` appended,
    // then `extra` sections.
    let write = |name: &str, grpc: &str, admin: &str, listen: &str, extra: &str| {
        let path = dir.path().join(name);
        let text = format!(
            "[listen]\ngrpc = \"{grpc}:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"{admin}:0\"\n{listen}\n\
             [serving]\ndrain_delay_secs = 0\nshutdown_grace_secs = 1\n\
             [admin]\ntoken_file = {token:?}\n{extra}"
        );
        std::fs::write(&path, text).expect("config");
        path
    };
    let jwt = format!(
        "[auth]\nmode = \"jwt\"\n[auth.jwt]\njwks_file = {jwks:?}\nissuer = \"i\"\naudience = \"a\"\n\
         [[callers]]\nname = \"c\"\njwt_subject = \"s\"\noperations = [\"create_journey\"]\n\
         operator_profiles = [\"sandbox\"]\n"
    );
    let (local, any) = ("127.0.0.1", "0.0.0.0");
    let cases: Vec<(PathBuf, Option<&str>)> = vec![
        (
            write("admin-in-clear.toml", local, any, "", ""),
            Some("allow_plaintext_admin"),
        ),
        (
            write(
                "admin-allowed.toml",
                local,
                any,
                "allow_plaintext_admin = true",
                "",
            ),
            None,
        ),
        (write("admin-on-loopback.toml", local, local, "", ""), None),
        (
            write("jwt-in-clear.toml", any, local, "", &jwt),
            Some("allow_plaintext_tokens"),
        ),
    ];
    for (config, refused) in cases {
        let name = config.file_name().map(|n| n.to_string_lossy().into_owned());
        let checked = check(&config);
        let served = serve(&config);
        match refused {
            Some(named) => {
                let check_err = String::from_utf8_lossy(&checked.stderr);
                assert_eq!(checked.status.code(), Some(1), "{name:?}: {checked:?}");
                assert!(check_err.contains(named), "{name:?}: {check_err}");
                let serve_err = served.expect_err("serve refused what check refused");
                assert!(serve_err.contains(named), "{name:?}: {serve_err}");
            }
            None => {
                assert!(checked.status.success(), "{name:?}: {checked:?}");
                let stdout = String::from_utf8_lossy(&checked.stdout);
                assert!(stdout.contains(", admin "), "{name:?}: {stdout}");
                let lines = served.unwrap_or_else(|e| panic!("{name:?}: serve refused: {e}"));
                let warned = lines
                    .iter()
                    .any(|l| l.contains("WARN") && l.contains("listen.allow_plaintext_admin"));
                assert_eq!(
                    warned,
                    name.as_deref() == Some("admin-allowed.toml"),
                    "{name:?}: {lines:#?}"
                );
            }
        }
    }
}
