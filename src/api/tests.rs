//! The door stays the only door: handlers hold no admission step of their
//! own (no authorization, slot, audit, journey naming, ownership check,
//! bill or upstream mark), and each public method is the same shim.

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
            "journey_of(",
            "access()",
            ".appkey(admitted",
            ".reference(",
            ".bill(",
            "BilledOperation",
            "sending(",
            "upstream_marker(",
            "Operation::",
            "check_profile(",
            "may_touch(",
            "may_use_profile(",
        ] {
            assert!(!text.contains(step), "{file} calls {step}");
        }
    }
}

#[test]
fn each_public_method_is_enter_inner_finish() {
    let mut methods = 0;
    for (file, text) in HANDLERS {
        let Some((_, service)) = text.split_once("#[tonic::async_trait]") else {
            panic!("{file} has no service impl");
        };
        for method in service.split("    async fn ").skip(1) {
            methods += 1;
            let body = method.split_whitespace().collect::<Vec<_>>().join(" ");
            let body = body.replace(" .", ".");
            let enter = body.find("= self.api.enter(request).await?;");
            let inner = body.find("inner_");
            let finish = body.find("admitted.finish");
            assert!(
                matches!((enter, inner, finish), (Some(a), Some(i), Some(f)) if a < i && i < f),
                "{file}: a method is not the shim: {body}"
            );
            assert!(body.matches(".await").count() <= 2, "{file}: {body}");
        }
    }
    assert_eq!(methods, super::rpc::RPCS.len());
}
