//! The checks a result reports: the registry and face match following the
//! test CPF sets, the pinned risk class, a low forensics score, and checks
//! the customer disabled left out.

use idgate::sandbox::{
    CustomerConfig, SandboxConfig,
    samples::{
        self, DocumentType, FACE_MATCH_NEGATIVE, HAPPY_PERSON, LOW_FORENSICS_SCORE,
        REGISTRY_NEGATIVE, REGISTRY_NOT_FOUND, REGISTRY_POSITIVE, RISK_CLASS_PINNED, Side,
    },
};

use super::{kind, processed_journey};
use crate::support::sandbox::{config, start, start_with};

#[tokio::test]
async fn registry_check_follows_the_test_environment_cpf_sets() {
    let env = start().await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    let cases = [
        (REGISTRY_POSITIVE.to_vec(), 200),
        (REGISTRY_NEGATIVE.to_vec(), 300),
        (vec![REGISTRY_NOT_FOUND, FACE_MATCH_NEGATIVE[0]], 4),
    ];
    for (people, code) in cases {
        for person in people {
            let (_, body) = processed_journey(&env, person, std::slice::from_ref(&image)).await;
            let registry = &body["analiseDocumento"]["biometriaCertiface"]["registry"];
            assert_eq!(registry["codigo"].as_u64(), Some(code), "{}", person.cpf);
            assert!(registry["causa"].is_string());
            assert_eq!(registry.get("score").is_some(), code != 4);
        }
    }
}

#[tokio::test]
async fn face_match_follows_the_cpf_sets_and_the_no_face_marker() {
    let env = start().await;
    let rg = kind(DocumentType::Rg, Side::Front);
    for person in FACE_MATCH_NEGATIVE {
        let (_, body) = processed_journey(&env, person, &[samples::document_image(rg)]).await;
        assert_eq!(
            body["analiseDocumento"]["biometriaCertiface"]["facematch"]["codigo"].as_u64(),
            Some(300)
        );
    }
    let (_, body) =
        processed_journey(&env, HAPPY_PERSON, &[samples::face_not_found_image(rg)]).await;
    let fm = &body["analiseDocumento"]["biometriaCertiface"]["facematch"];
    assert_eq!(fm["codigo"].as_u64(), Some(400));
    assert!(fm.get("score").is_none());
}

#[tokio::test]
async fn risk_class_is_pinned_per_cpf_and_stable() {
    let env = start().await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    for (class, person) in RISK_CLASS_PINNED {
        let (_, body) = processed_journey(&env, person, std::slice::from_ref(&image)).await;
        assert_eq!(body["serviceID"]["score"], class);
    }
    let (_, a) = processed_journey(&env, REGISTRY_NOT_FOUND, std::slice::from_ref(&image)).await;
    let (_, b) = processed_journey(&env, REGISTRY_NOT_FOUND, std::slice::from_ref(&image)).await;
    assert_eq!(a["serviceID"]["score"], b["serviceID"]["score"]);
}

#[tokio::test]
async fn low_forensics_document_gets_a_low_score() {
    let env = start().await;
    let image = samples::low_forensics_image(kind(DocumentType::Cnh, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, &[image]).await;
    assert_eq!(body["status"], "Completo");
    assert_eq!(
        body["analiseDocumento"]["score"].as_u64(),
        Some(u64::from(LOW_FORENSICS_SCORE))
    );
}

#[tokio::test]
async fn disabled_checks_are_omitted_from_the_result() {
    let cfg = SandboxConfig {
        customer: CustomerConfig {
            face_match: false,
            ..CustomerConfig::default()
        },
        ..config()
    };
    let env = start_with(cfg).await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, std::slice::from_ref(&image)).await;
    let bio = &body["analiseDocumento"]["biometriaCertiface"];
    assert!(bio.get("facematch").is_none());
    assert!(bio.get("registry").is_some());

    let cfg = SandboxConfig {
        customer: CustomerConfig {
            face_match: false,
            registry: false,
            ..CustomerConfig::default()
        },
        ..config()
    };
    let env = start_with(cfg).await;
    let (_, body) = processed_journey(&env, HAPPY_PERSON, &[image]).await;
    assert!(body["analiseDocumento"].get("biometriaCertiface").is_none());
}
