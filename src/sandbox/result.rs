//! The journey result (`docs/upstream.md#the-journey-result`), built from
//! an appkey's record at `now`.
//!
//! Two variants: the full journey (document images) and the digital
//! licence, which has its own shapes of `serviceID`, `livenessResult` and
//! the registry object.

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::config::CustomerConfig;
use super::documents::{LOW_FORENSICS_SCORE, NORMAL_FORENSICS_SCORE};
use super::journey::{self, Stage};
use super::ocr;
use super::outcomes::{self, CheckResult};
use super::store::{AppkeyRecord, LivenessMode, LivenessProof, Submission, SubmissionContent};
use super::wire_time::WireTime;

/// What the result depends on besides the record.
pub(crate) struct ResultSettings<'a> {
    pub(crate) customer: &'a CustomerConfig,
    pub(crate) time: WireTime,
    pub(crate) processing_delay: time::Duration,
    pub(crate) webhook_url: Option<&'a str>,
}

/// The result body. `rec` holds a liveness proof (the caller answered 404
/// otherwise).
pub(crate) fn build(
    rec: &AppkeyRecord,
    liveness: &LivenessProof,
    now: OffsetDateTime,
    s: &ResultSettings<'_>,
) -> Value {
    let digital = matches!(
        rec.submission.as_ref().map(|sub| &sub.content),
        Some(SubmissionContent::Licence { .. })
    );
    let mut out = Map::new();
    out.insert(
        "status".into(),
        journey::status(rec, now, s.processing_delay)
            .as_wire()
            .into(),
    );
    out.insert("idExternoCliente".into(), rec.external_id.clone().into());
    out.insert(
        "dataCriacaoAppkey".into(),
        s.time.datetime(rec.created_at).into(),
    );
    if let Some(sub) = &rec.submission {
        out.insert("analiseDocumento".into(), analysis(rec, sub, now, s));
    }
    let cpf = rec.user.cpf.as_str();
    if digital {
        let registry = s.customer.registry.then(|| outcomes::registry(cpf));
        out.insert("serviceID".into(), digital_bureau(liveness, registry));
        out.insert("livenessResult".into(), digital_liveness(liveness));
    } else {
        out.insert(
            "serviceID".into(),
            json!({
                "codigo": 200,
                "protocolo": liveness.bureau_protocol.to_string(),
                "score": outcomes::risk_class(cpf),
            }),
        );
        out.insert(
            "livenessResult".into(),
            json!({
                "causa": liveness.outcome.cause(),
                "codID": liveness.outcome.cod_id(),
                "protocolo": liveness.protocol.to_string(),
                "valid": liveness.outcome.is_valid(),
            }),
        );
    }
    out.insert("fotos".into(), photos(rec, liveness));
    Value::Object(out)
}

fn analysis(
    rec: &AppkeyRecord,
    sub: &Submission,
    now: OffsetDateTime,
    s: &ResultSettings<'_>,
) -> Value {
    let stage = journey::stage(sub, now, s.processing_delay);
    let finished_at = stage.is_final().then(|| {
        s.time
            .datetime(journey::finishes_at(sub, s.processing_delay))
    });
    let created = s.time.datetime(sub.at);
    let mut a = Map::new();
    a.insert("id".into(), sub.analysis_id.into());
    a.insert("idExterno".into(), rec.external_id.clone().into());
    a.insert("ticket".into(), sub.ticket.clone().into());
    a.insert("dtCriacao".into(), created.clone().into());
    a.insert("idCliente".into(), s.customer.client_id.into());
    a.insert("idSubcliente".into(), s.customer.subclient_id.into());
    a.insert("idUsuario".into(), 1.into());
    a.insert(
        "statusProcessamento".into(),
        stage.status_processamento().into(),
    );
    a.insert("dtStatusProcessamento".into(), finished_at.clone().into());
    a.insert("idTipoProcessamento".into(), 1.into());
    let processed = stage == Stage::Processed;
    let score = processed.then(|| match &sub.content {
        SubmissionContent::Images(images)
            if images.iter().any(|i| i.recognised.flags.low_forensics) =>
        {
            LOW_FORENSICS_SCORE
        }
        _ => NORMAL_FORENSICS_SCORE,
    });
    a.insert("score".into(), score.into());
    a.insert("urlRetornoTicket".into(), s.webhook_url.into());
    a.insert("dtRetornoTicket".into(), finished_at.into());
    if processed {
        a.insert(
            "responseClientDadosOcrDTO".into(),
            ocr_data(rec, sub, &created),
        );
        if let Some(bio) = biometry(rec, sub, s.customer) {
            a.insert("biometriaCertiface".into(), bio);
        }
    }
    a.insert("documentos".into(), documents(sub, stage));
    Value::Object(a)
}

fn ocr_data(rec: &AppkeyRecord, sub: &Submission, created: &str) -> Value {
    let (key, object) = match &sub.content {
        SubmissionContent::Licence { format, .. } => (
            "responseClientCNHOcrDTO",
            ocr::digital_licence(*format, &rec.user, created),
        ),
        SubmissionContent::Images(images) => match images.first() {
            // Only the type read (the first document) has an object.
            Some(first) => {
                let t = first.recognised.kind.doc_type;
                (t.ocr_key(), ocr::document(t, &rec.user, created))
            }
            None => return Value::Object(Map::new()),
        },
    };
    let mut m = Map::new();
    m.insert(key.into(), object);
    Value::Object(m)
}

fn check(c: CheckResult) -> Value {
    let mut m = Map::new();
    m.insert("codigo".into(), c.codigo.into());
    m.insert("causa".into(), c.causa.into());
    if let Some(score) = c.score {
        m.insert("score".into(), score.into());
    }
    Value::Object(m)
}

fn check_as_strings(c: CheckResult) -> Value {
    let mut m = Map::new();
    m.insert("codigo".into(), c.codigo.to_string().into());
    m.insert("causa".into(), c.causa.into());
    if let Some(score) = c.score {
        m.insert("score".into(), format!("{score:.2}").into());
    }
    Value::Object(m)
}

/// `biometriaCertiface`; `None` when the customer has both checks off.
fn biometry(rec: &AppkeyRecord, sub: &Submission, customer: &CustomerConfig) -> Option<Value> {
    let cpf = rec.user.cpf.as_str();
    let mut m = Map::new();
    match &sub.content {
        SubmissionContent::Licence { .. } => {
            if !customer.registry {
                return None;
            }
            m.insert("registry".into(), check_as_strings(outcomes::registry(cpf)));
        }
        SubmissionContent::Images(images) => {
            if !customer.face_match && !customer.registry {
                return None;
            }
            if customer.face_match {
                let no_face = images.iter().any(|i| i.recognised.flags.no_face);
                m.insert(
                    "facematch".into(),
                    check(outcomes::face_match(cpf, no_face)),
                );
            }
            if customer.registry {
                m.insert("registry".into(), check(outcomes::registry(cpf)));
            }
        }
    }
    m.insert("protocolo".into(), sub.biometry_protocol.to_string().into());
    Some(Value::Object(m))
}

fn documents(sub: &Submission, stage: Stage) -> Value {
    let tipos: Vec<u32> = match &sub.content {
        SubmissionContent::Images(images) => {
            images.iter().map(|i| i.recognised.kind.tipo()).collect()
        }
        // A digital licence is read as a CNH front.
        SubmissionContent::Licence { .. } => vec![4],
    };
    tipos
        .into_iter()
        .enumerate()
        .map(|(i, tipo)| {
            json!({
                "arquivo": i + 1,
                "statusArquivo": stage.status_arquivo(),
                "arquivosProcessado": {
                    "tipo": tipo,
                    "statusArquivoProcessado": stage.status_arquivo_processado(),
                },
            })
        })
        .collect()
}

fn digital_bureau(liveness: &LivenessProof, registry: Option<CheckResult>) -> Value {
    let registry_ok = registry.is_none_or(|r| r.codigo == 200);
    let known = registry.is_some_and(|r| matches!(r.codigo, 200 | 300));
    let similarity = registry
        .and_then(|r| r.score)
        .map_or(0.0, |s| (s * 1000.0).round() / 10.0);
    json!({
        "aprovado": liveness.outcome.is_valid() && registry_ok,
        "codigo": 200,
        "conhecido": known,
        "protocolo": liveness.bureau_protocol,
        "scoreBiometrico": similarity,
    })
}

fn digital_liveness(liveness: &LivenessProof) -> Value {
    let origin = match liveness.mode {
        LivenessMode::TwoD => "Prova de vida 2D",
        LivenessMode::ThreeD => "Prova de vida 3D",
    };
    json!({
        "causa": origin,
        "codID": liveness.outcome.cod_id(),
        "protocolo": liveness.protocol,
        "validado": liveness.outcome.is_valid(),
    })
}

fn photos(rec: &AppkeyRecord, liveness: &LivenessProof) -> Value {
    let documents: Vec<Value> = match rec.submission.as_ref().map(|s| &s.content) {
        None => Vec::new(),
        Some(SubmissionContent::Images(images)) => images
            .iter()
            .map(|i| json!({ "descricao": i.recognised.kind.description(), "imagem": i.image.as_str() }))
            .collect(),
        Some(SubmissionContent::Licence { format, image }) => vec![json!({
            "descricao": format!("CNH Digital ({})", format.extensao()),
            "imagem": image.as_str(),
        })],
    };
    json!({
        "livenessResult": { "frontal": liveness.frontal.as_str() },
        "documento": documents,
    })
}
