//! The door stays the only door: handlers hold no admission step of their
//! own, and each public method is the same shim.

/// The handler files of the public API.
const HANDLERS: [(&str, &str); 3] = [
    ("journey.rs", include_str!("journey.rs")),
    ("liveness.rs", include_str!("liveness.rs")),
    ("document.rs", include_str!("document.rs")),
];

#[test]
fn no_handler_authorizes_takes_a_slot_or_audits_itself() {
    for (file, text) in HANDLERS {
        for step in [
            "authorize(",
            "call_slot(",
            "stream_slot(",
            "Audit::start(",
            "AuditRecord",
            "Status::",
        ] {
            assert!(!text.contains(step), "{file} calls {step}");
        }
    }
}

#[test]
fn each_public_method_is_admit_inner_finish() {
    let mut methods = 0;
    for (file, text) in HANDLERS {
        let Some((_, service)) = text.split_once("#[tonic::async_trait]") else {
            panic!("{file} has no service impl");
        };
        for method in service.split("    async fn ").skip(1) {
            methods += 1;
            let body = method.split_whitespace().collect::<Vec<_>>().join(" ");
            let body = body.replace(" .", ".");
            let admit = body.find("let (mut admitted, message) = admit(request)?;");
            let inner = body.find("self.inner_");
            let finish = body.find("admitted.finish");
            assert!(
                matches!((admit, inner, finish), (Some(a), Some(i), Some(f)) if a < i && i < f),
                "{file}: a method is not the shim: {body}"
            );
            assert_eq!(body.matches(".await").count(), 1, "{file}: {body}");
        }
    }
    assert_eq!(methods, super::rpc::RPCS.len());
}
