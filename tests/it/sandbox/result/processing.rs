//! Document processing over time: not processed before any document, the
//! statuses it moves through on the clock, a configurable delay, and an
//! unreadable document ending the journey in `Erro`.

use idgate::sandbox::{
    SandboxConfig,
    samples::{self, DocumentType, HAPPY_PERSON, LivenessOutcome, NORMAL_FORENSICS_SCORE, Side},
};
use serde_json::Value;

use super::{kind, processed_journey};
use crate::support::sandbox::{config, start, start_with};

#[tokio::test]
async fn result_is_not_processed_before_any_document() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["status"], "Não processado");
    assert!(r.body.get("analiseDocumento").is_none());
    assert_eq!(r.body["livenessResult"]["valid"], true);
    assert_eq!(r.body["fotos"]["documento"], serde_json::json!([]));
}

#[tokio::test]
async fn document_processing_moves_through_its_statuses_on_the_clock() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    let front = samples::document_image(kind(DocumentType::Cnh, Side::Front));
    let back = samples::document_image(kind(DocumentType::Cnh, Side::Back));
    env.upload(&appkey, &[front, back]).await;

    let expect = |body: &Value, status: &str, processing: u64, file: u64, processed: u64| {
        assert_eq!(body["status"], status);
        let a = &body["analiseDocumento"];
        assert_eq!(a["statusProcessamento"].as_u64(), Some(processing));
        let docs = a["documentos"].as_array().expect("documentos");
        assert_eq!(docs.len(), 2);
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(d["arquivo"].as_u64(), Some(i as u64 + 1));
            assert_eq!(d["statusArquivo"].as_u64(), Some(file));
            assert!(d["arquivosProcessado"].is_object());
            assert_eq!(
                d["arquivosProcessado"]["statusArquivoProcessado"].as_u64(),
                Some(processed)
            );
        }
        assert_eq!(docs[0]["arquivosProcessado"]["tipo"].as_u64(), Some(4));
        assert_eq!(docs[1]["arquivosProcessado"]["tipo"].as_u64(), Some(5));
    };
    let r = env.result(&appkey).await;
    expect(&r.body, "Em processamento", 2, 7, 10);
    assert!(
        r.body["analiseDocumento"]
            .get("responseClientDadosOcrDTO")
            .is_none()
    );
    assert!(r.body["analiseDocumento"]["score"].is_null());
    env.advance(3);
    expect(
        &env.result(&appkey).await.body,
        "Em processamento",
        3,
        9,
        12,
    );
    env.advance(2);
    let done = env.result(&appkey).await.body;
    expect(&done, "Completo", 4, 22, 19);
    assert_eq!(
        done["analiseDocumento"]["score"].as_u64(),
        Some(u64::from(NORMAL_FORENSICS_SCORE))
    );
    assert!(done["analiseDocumento"]["dtStatusProcessamento"].is_string());
}

#[tokio::test]
async fn processing_delay_is_configurable() {
    let cfg = SandboxConfig {
        processing_delay_ms: 0,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    env.upload(
        &appkey,
        &[samples::document_image(kind(DocumentType::Rg, Side::Front))],
    )
    .await;
    assert_eq!(env.result(&appkey).await.body["status"], "Completo");
}

#[tokio::test]
async fn unreadable_document_ends_the_journey_in_erro() {
    let env = start().await;
    let image = samples::unreadable_document_image(kind(DocumentType::Rg, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, &[image]).await;
    assert_eq!(body["status"], "Erro");
    let a = &body["analiseDocumento"];
    assert_eq!(a["statusProcessamento"].as_u64(), Some(6));
    assert_eq!(a["documentos"][0]["statusArquivo"].as_u64(), Some(8));
    assert_eq!(
        a["documentos"][0]["arquivosProcessado"]["statusArquivoProcessado"].as_u64(),
        Some(11)
    );
    assert!(a.get("responseClientDadosOcrDTO").is_none());
}
