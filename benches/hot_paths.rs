//! Benchmarks of the gateway's hot paths that touch image payloads: the
//! journey result with 1.5 MB and 4 MB of photos (parse + convert, photos
//! decoded from Base64 once; throughput is of the whole JSON body), the
//! document upload body (images Base64-encoded straight into the body),
//! and edge validation.
//!
//! `cargo bench --bench hot_paths`

use std::hint::black_box;

use base64::Engine as _;
use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use idgate::{
    api::LimitsConfig,
    domain::{ImageKind, ImagePayload},
    proto::v1,
    upstream::{body, convert, wire},
};

/// A JPEG-looking payload of `n` bytes (header + noise).
fn jpeg(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n);
    v.extend_from_slice(&[0xFF, 0xD8, 0xFF, 0xE0]);
    let mut x: u32 = 0x9E37_79B9;
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(x as u8);
    }
    v
}

/// A complete journey result with a `selfie`-byte liveness photo and two
/// `document`-byte document photos, as the upstream sends it.
fn result_json(selfie: usize, document: usize) -> Vec<u8> {
    let b64 = |n| base64::engine::general_purpose::STANDARD.encode(jpeg(n));
    serde_json::to_vec(&serde_json::json!({
        "status": "Completo",
        "idExternoCliente": "PROP123",
        "dataCriacaoAppkey": "2026-11-21 14:11:16",
        "analiseDocumento": {
            "id": 77, "idExterno": "x", "ticket": "T-1", "dtCriacao": "2026-11-21 14:11:20",
            "idCliente": 1001, "idSubcliente": 1, "idUsuario": 5, "statusProcessamento": 4,
            "dtStatusProcessamento": "2026-11-21 14:11:25", "idTipoProcessamento": 2, "score": 97,
            "urlRetornoTicket": "", "dtRetornoTicket": "2026-11-21 14:11:25",
            "responseClientDadosOcrDTO": {"responseClientRGOcrDTO": {
                "estado": "SP", "documento": "RG", "dtExpedicao": "01/02/2010", "nrRg": "123456789",
                "nome": "Ana Positiva Souza", "filiacao": "A e B", "nomePai": "A", "nomeMae": "B",
                "dtNascimento": "14/03/1985", "cpf": "52110000139", "naturalidade": "SAO PAULO",
                "flAnalfabeto": false}},
            "biometriaCertiface": {"protocolo": "99",
                "facematch": {"codigo": 200, "causa": "ok", "score": 0.93},
                "registry": {"codigo": 200, "causa": "ok", "score": 0.91}},
            "documentos": [
                {"arquivo": 1, "statusArquivo": 22, "arquivosProcessado": {"tipo": 1, "statusArquivoProcessado": 19}},
                {"arquivo": 2, "statusArquivo": 22, "arquivosProcessado": {"tipo": 2, "statusArquivoProcessado": 19}}]
        },
        "serviceID": {"codigo": 200, "protocolo": "55", "score": "300"},
        "livenessResult": {"causa": "", "codID": 200.0, "protocolo": "1", "valid": true},
        "fotos": {
            "livenessResult": {"frontal": b64(selfie)},
            "documento": [{"descricao": "RG frente", "imagem": b64(document)},
                          {"descricao": "RG verso", "imagem": b64(document)}]
        }
    }))
    .expect("json")
}

fn journey_result(c: &mut Criterion) {
    let mut g = c.benchmark_group("journey_result");
    // (name, selfie bytes, bytes of each of the two document photos)
    for (name, selfie, document) in [
        ("parse_and_convert_1.5MB_of_photos", 300_000, 600_000),
        ("parse_and_convert_4MB_of_photos", 1_000_000, 1_500_000),
    ] {
        let body = result_json(selfie, document);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let w: wire::JourneyResultWire<'_> =
                    wire::parse_json(black_box(&body)).expect("parse");
                black_box(
                    convert::journey_result(w, convert::WireTimes::default()).expect("convert"),
                )
            })
        });
    }
    g.finish();
}

fn document_body(c: &mut Criterion) {
    let images: Vec<ImagePayload> = (0..2)
        .map(|_| {
            ImagePayload::parse(Bytes::from(jpeg(1_000_000)), &[ImageKind::Jpeg], 8 << 20)
                .expect("image")
        })
        .collect();
    let mut g = c.benchmark_group("document_upload_body");
    g.throughput(Throughput::Bytes(2_000_000));
    g.bench_function("json_with_two_1MB_images", |b| {
        b.iter(|| {
            let mut json = body::JsonBody::with_capacity(body::json_base64_capacity(&images) + 32);
            json.string("appkey", black_box("appkey"))
                .base64_list("images", &images);
            black_box(json.finish())
        })
    });
    g.finish();
}

fn captcha_body(c: &mut Criterion) {
    let snapshot = jpeg(300_000);
    let mut g = c.benchmark_group("captcha_form_body");
    g.throughput(Throughput::Bytes(2 * snapshot.len() as u64));
    g.bench_function("two_300KB_snapshots_form_escaped", |b| {
        b.iter(|| {
            let mut form =
                body::FormBody::with_capacity(2 * body::form_base64_capacity(snapshot.len()));
            form.pair("appkey", "k").pair("chkey", "c").start("images");
            for code in ["cod01", "cod02"] {
                form.text("data:image/jpeg;base64,type:")
                    .text(code)
                    .text(",")
                    .base64(black_box(&snapshot));
            }
            black_box(form.finish())
        })
    });
    g.finish();
}

fn validation(c: &mut Criterion) {
    let req = v1::CreateJourneyRequest {
        cpf: "521.100.001-39".into(),
        name: "Ana Positiva Souza".into(),
        birth_date: "1985-03-14".into(),
        customer_reference: "PROP123".into(),
        operator_profile: String::new(),
        request_id: String::new(),
    };
    c.bench_function("validate_create_journey", |b| {
        b.iter(|| black_box(idgate::api::validate::create_journey(black_box(&req)).expect("valid")))
    });
    let limits = LimitsConfig::default();
    let docs = v1::SubmitDocumentImagesRequest {
        appkey: "k".into(),
        images: (0..2)
            .map(|_| v1::DocumentImage {
                content: Bytes::from(jpeg(1_000_000)),
            })
            .collect(),
    };
    c.bench_function("validate_two_1MB_document_images_zero_copy", |b| {
        b.iter(|| {
            black_box(
                idgate::api::validate::document_images(black_box(docs.clone()), &limits)
                    .expect("valid"),
            )
        })
    });
}

criterion_group!(
    benches,
    journey_result,
    document_body,
    captcha_body,
    validation
);
criterion_main!(benches);
