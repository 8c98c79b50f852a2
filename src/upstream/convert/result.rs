//! The journey result (`docs/upstream.md#the-journey-result`) ->
//! [`pb::JourneyResult`].

use crate::proto::v1 as pb;
use crate::upstream::wire::{
    AnaliseDocumento, BiometriaDocumento, BiometricCheckWire, CinOcrWire, CnhOcrWire, DadosOcr,
    DniOcrWire, Documento, Fotos, JourneyResultWire, LivenessResultWire, RgOcrWire, ServiceId,
    WireError, parse_int_text,
};

use super::{WireTimes, code_enum, journey_status, json_struct, liveness_code, risk_class};

/// Converts the whole result, decoding every photo once. Fails only on an
/// undecodable image, naming its field path.
/// Times on the wire are read in `times`' offset; each keeps its raw text.
pub fn journey_result(
    wire: JourneyResultWire<'_>,
    times: WireTimes,
) -> Result<pb::JourneyResult, WireError> {
    let raw_status = wire.status.into_string();
    let raw_appkey_create_time = wire.data_criacao_appkey.into_string();
    Ok(pb::JourneyResult {
        status: journey_status(&raw_status).into(),
        raw_status,
        customer_reference: wire.id_externo_cliente.into_string(),
        appkey_create_time: times.parse(&raw_appkey_create_time),
        raw_appkey_create_time,
        document_analysis: wire.analise_documento.map(|a| document_analysis(a, times)),
        face_bureau: wire.service_id.map(face_bureau),
        liveness: wire.liveness_result.map(liveness),
        photos: wire.fotos.map(photos).transpose()?,
    })
}

fn document_analysis(a: AnaliseDocumento, times: WireTimes) -> pb::DocumentAnalysis {
    let raw_processing_status = a.status_processamento.to_i32();
    let raw_ticket_create_time = a.dt_criacao.into_string();
    let raw_processing_status_time = a.dt_status_processamento.into_string();
    let raw_ticket_return_time = a.dt_retorno_ticket.into_string();
    pb::DocumentAnalysis {
        id: a.id.into_string(),
        external_id: a.id_externo.into_string(),
        ticket: a.ticket.into_string(),
        ticket_create_time: times.parse(&raw_ticket_create_time),
        raw_ticket_create_time,
        client_id: a.id_cliente.into_string(),
        subclient_id: a.id_subcliente.into_string(),
        user_id: a.id_usuario.into_string(),
        processing_status: code_enum::<pb::ProcessingStatus>(raw_processing_status),
        raw_processing_status,
        processing_status_time: times.parse(&raw_processing_status_time),
        raw_processing_status_time,
        processing_type_id: a.id_tipo_processamento.into_string(),
        score: a.score.0,
        ticket_callback_url: a.url_retorno_ticket.into_string(),
        ticket_return_time: times.parse(&raw_ticket_return_time),
        raw_ticket_return_time,
        ocr: a.ocr.map(|o| ocr(o, times)),
        biometrics: a.biometria.map(biometrics),
        files: a.documentos.0.into_iter().map(processed_file).collect(),
    }
}

fn ocr(o: DadosOcr, times: WireTimes) -> pb::OcrData {
    let (cnh, digital_cnh) = match o.cnh {
        Some(c) if c.is_digital() => (None, Some(digital_cnh(c))),
        Some(c) => (Some(cnh(c, times)), None),
        None => (None, None),
    };
    pb::OcrData {
        rg: o.rg.map(|w| rg(w, times)),
        cnh,
        dni: o.dni.map(|w| dni(w, times)),
        cin: o.cin.map(|w| cin(w, times)),
        digital_cnh,
        crnm: o.crnm.map(json_struct),
        passport: o.passaporte.map(json_struct),
    }
}

fn rg(w: RgOcrWire, times: WireTimes) -> pb::RgOcr {
    pb::RgOcr {
        state: w.estado.into_string(),
        document: w.documento.into_string(),
        issue_date: w.dt_expedicao.into_string(),
        issue_date_iso: w.dt_expedicao_formatada.into_string(),
        birth_date_iso: w.dt_nascimento_formatada.into_string(),
        rg_number: w.nr_rg.into_string(),
        name: w.nome.into_string(),
        parents: w.filiacao.into_string(),
        father_name: w.nome_pai.into_string(),
        mother_name: w.nome_mae.into_string(),
        origin_document: w.doc_origem.into_string(),
        birth_date: w.dt_nascimento.into_string(),
        cpf: w.cpf.into_string(),
        birthplace: w.naturalidade.into_string(),
        issuing_body: w.nomenclatura.into_string(),
        create_time: times.parse(w.dt_criacao.0.as_deref().unwrap_or_default()),
        raw_create_time: w.dt_criacao.into_string(),
        unsigned: w.fl_analfabeto.0,
    }
}

fn cnh(w: CnhOcrWire, times: WireTimes) -> pb::CnhOcr {
    pb::CnhOcr {
        state: w.estado.into_string(),
        state_name: w.estado_nome.into_string(),
        document: w.documento.into_string(),
        name: w.nome.into_string(),
        origin_document: w.doc_origem.into_string(),
        origin_document_number: w.documento_origem.into_string(),
        origin_issuer: w.emissor_origem.into_string(),
        origin_state: w.uf_origem.into_string(),
        cpf: w.cpf.into_string(),
        birth_date: w.dt_nascimento.into_string(),
        birth_date_iso: w.dt_nascimento_formatada.into_string(),
        parents: w.filiacao.into_string(),
        father_name: w.nome_pai.into_string(),
        mother_name: w.nome_mae.into_string(),
        permission: w.permissao.into_string(),
        acc: w.acc.into_string(),
        category: w.categoria.into_string(),
        registration_number: w.numero_registro.into_string(),
        expiry_date: w.validade.into_string(),
        first_licence_date: w.primeira_habilitacao.into_string(),
        place: w.local.into_string(),
        issue_date: w.dt_expedicao.into_string(),
        issue_date_iso: w.dt_expedicao_formatada.into_string(),
        security_code: w.cod_seguranca.into_string(),
        mirror_number: w.espelho.into_string(),
        renach: w.renach.into_string(),
        create_time: times.parse(w.dt_criacao.0.as_deref().unwrap_or_default()),
        raw_create_time: w.dt_criacao.into_string(),
    }
}

fn digital_cnh(w: CnhOcrWire) -> pb::DigitalCnhOcr {
    pb::DigitalCnhOcr {
        document: w.documento.into_string(),
        format: w.formato.into_string(),
        extension: w.extensao.into_string(),
        name: w.nome.into_string(),
        origin_document: w.doc_origem.into_string(),
        cpf: w.cpf.into_string(),
        birth_date: w.dt_nascimento.into_string(),
        birth_date_iso: w.dt_nascimento_formatada.into_string(),
        parents: w.filiacao.into_string(),
        category: w.categoria.into_string(),
        registration_number: w.numero_registro.into_string(),
        expiry_date: w.validade.into_string(),
        first_licence_date: w.primeira_habilitacao.into_string(),
        place: w.local.into_string(),
        renach: w.renach.into_string(),
        father_name: w.nome_pai.into_string(),
        mother_name: w.nome_mae.into_string(),
        remarks: w.observacao.into_string(),
    }
}

fn dni(w: DniOcrWire, times: WireTimes) -> pb::DniOcr {
    pb::DniOcr {
        state: w.estado.into_string(),
        issuing_body: w.nomenclatura.into_string(),
        birthplace: w.naturalidade.into_string(),
        parents: w.filiacao.into_string(),
        father_name: w.nome_pai.into_string(),
        mother_name: w.nome_mae.into_string(),
        birth_date: w.dt_nascimento.into_string(),
        birth_date_iso: w.dt_nascimento_formatada.into_string(),
        name: w.nome.into_string(),
        front_remarks: w.observacao_front.into_string(),
        other_rg: w.outro_rg.into_string(),
        issuer: w.orgao.into_string(),
        blood_type: w.fator.into_string(),
        civil_registry: w.registro_civil.into_string(),
        cnh: w.cnh.into_string(),
        cns: w.cns.into_string(),
        cpf: w.cpf.into_string(),
        ctps: w.ctps.into_string(),
        ctps_series: w.serie_ctps.into_string(),
        ctps_state: w.ufctps.into_string(),
        dni: w.dni.into_string(),
        voter_id: w.titulo_eleitor.into_string(),
        issue_date: w.dt_expedicao.into_string(),
        issue_date_iso: w.dt_expedicao_formatada.into_string(),
        place: w.local.into_string(),
        military_certificate: w.cert_militar.into_string(),
        social_name: w.nome_social.into_string(),
        pis: w.pis.into_string(),
        professional: w.profissional.into_string(),
        rg: w.rg.into_string(),
        create_time: times.parse(w.dt_criacao.0.as_deref().unwrap_or_default()),
        raw_create_time: w.dt_criacao.into_string(),
        unsigned: w.fl_analfabeto.0,
    }
}

fn cin(w: CinOcrWire, times: WireTimes) -> pb::CinOcr {
    pb::CinOcr {
        document: w.documento.into_string(),
        state: w.estado.into_string(),
        issuing_body: w.nomenclatura.into_string(),
        name: w.nome.into_string(),
        cpf: w.cpf.into_string(),
        sex: w.sexo.into_string(),
        birth_date: w.dt_nascimento.into_string(),
        nationality: w.nacionalidade.into_string(),
        birthplace: w.naturalidade.into_string(),
        expiry_date: w.dt_validade.into_string(),
        issuing_post: w.posto.into_string(),
        parents: w.filiacao.into_string(),
        father_name: w.nome_pai.into_string(),
        mother_name: w.nome_mae.into_string(),
        issuer: w.orgao_emissor.into_string(),
        place: w.local.into_string(),
        issue_date: w.dt_expedicao.into_string(),
        unsigned: w.analfabeto.0,
        issue_date_iso: w.dt_expedicao_formatada.into_string(),
        birth_date_iso: w.dt_nascimento_formatada.into_string(),
        create_time: times.parse(w.dt_criacao.0.as_deref().unwrap_or_default()),
        raw_create_time: w.dt_criacao.into_string(),
    }
}

fn biometrics(b: BiometriaDocumento) -> pb::DocumentBiometrics {
    pb::DocumentBiometrics {
        protocol: b.protocolo.into_string(),
        face_match: b.facematch.map(biometric_check),
        registry: b.registry.map(biometric_check),
    }
}

fn biometric_check(c: BiometricCheckWire) -> pb::BiometricCheck {
    let raw_code = c.codigo.into_string();
    let code = parse_int_text(&raw_code)
        .and_then(|v| i32::try_from(v).ok())
        .map(code_enum::<pb::BiometricCode>)
        .unwrap_or(0);
    pb::BiometricCheck {
        code,
        raw_code,
        cause: c.causa.into_string(),
        score: c.score.0,
    }
}

fn processed_file(d: Documento) -> pb::ProcessedFile {
    let raw_status = d.status_arquivo.to_i32();
    pb::ProcessedFile {
        sequence: d.arquivo.to_i32(),
        status: code_enum::<pb::FileStatus>(raw_status),
        raw_status,
        documents: d
            .arquivos_processado
            .0
            .into_iter()
            .map(|p| {
                let raw_kind = p.tipo.to_i32();
                let raw_status = p.status_arquivo_processado.to_i32();
                pb::ProcessedDocument {
                    kind: code_enum::<pb::DocumentKind>(raw_kind),
                    raw_kind,
                    status: code_enum::<pb::ProcessedDocumentStatus>(raw_status),
                    raw_status,
                }
            })
            .collect(),
    }
}

fn face_bureau(s: ServiceId) -> pb::FaceBureauResult {
    use pb::face_bureau_result::Variant;
    let variant = if s.is_digital_licence() {
        Variant::DigitalLicence(pb::FaceBureauDigitalLicence {
            approved: s.aprovado.or_false(),
            code: s.codigo.0.unwrap_or(0),
            known: s.conhecido.or_false(),
            protocol: s.protocolo.into_string(),
            biometric_score: s.score_biometrico.0,
        })
    } else {
        let raw_code = s.codigo.to_i32();
        let raw_score = s.score.into_string();
        Variant::Journey(pb::FaceBureauJourney {
            code: code_enum::<pb::FaceBureauCode>(raw_code),
            raw_code,
            protocol: s.protocolo.into_string(),
            risk_class: risk_class(&raw_score).into(),
            raw_score,
        })
    };
    pb::FaceBureauResult {
        variant: Some(variant),
    }
}

fn liveness(l: LivenessResultWire) -> pb::LivenessResult {
    use pb::liveness_result::Variant;
    let variant = if l.is_digital_licence() {
        Variant::DigitalLicence(pb::LivenessResultDigitalLicence {
            cause: l.causa.into_string(),
            raw_code: l.cod_id.into_string(),
            protocol: l.protocolo.into_string(),
            validated: l.validado.or_false(),
        })
    } else {
        let raw_code = l.cod_id.into_string();
        Variant::Journey(pb::LivenessVerdict {
            cause: l.causa.into_string(),
            code: liveness_code(&raw_code).into(),
            raw_code,
            protocol: l.protocolo.into_string(),
            valid: l.valid.or_false(),
        })
    };
    pb::LivenessResult {
        variant: Some(variant),
    }
}

fn photos(f: Fotos<'_>) -> Result<pb::Photos, WireError> {
    let liveness_frontal = match f.liveness_result {
        Some(l) => l.frontal.decode("fotos.livenessResult.frontal")?,
        None => bytes::Bytes::new(),
    };
    let mut documents = Vec::with_capacity(f.documento.0.len());
    for (i, d) in f.documento.0.into_iter().enumerate() {
        documents.push(pb::DocumentPhoto {
            image: d.imagem.decode(&format!("fotos.documento[{i}].imagem"))?,
            description: d.descricao.into_string(),
        });
    }
    Ok(pb::Photos {
        liveness_frontal,
        documents,
    })
}
