//! Conversion of realistic answers, both variants, lenient types, unknown
//! codes and omitted objects. This module holds what the submodules share:
//! a journey result converted from JSON and the full journey answer.

mod codes;
mod liveness;
mod objects;
mod times;

use super::*;
use crate::upstream::wire::{JourneyResultWire, parse_json};

fn result(json: &str) -> Result<pb::JourneyResult, WireError> {
    let wire: JourneyResultWire<'_> = parse_json(json.as_bytes())?;
    journey_result(wire, WireTimes::new(-180))
}

/// Full journey, RG read, face match and registry both run, numbers as
/// numbers, `arquivosProcessado` as an object.
const FULL_JOURNEY: &str = r#"{
  "status": "Completo",
  "idExternoCliente": "PROP2026X1",
  "dataCriacaoAppkey": "2026-11-21 10:15:00",
  "analiseDocumento": {
    "id": 1234, "idExterno": "ext-9", "ticket": "TCK-77", "dtCriacao": "2026-11-21 10:16:00",
    "idCliente": 55, "idSubcliente": "7", "idUsuario": 99, "statusProcessamento": 4,
    "dtStatusProcessamento": "2026-11-21 10:17:00", "idTipoProcessamento": 2, "score": 97.5,
    "urlRetornoTicket": "https://cb.example/t", "dtRetornoTicket": "2026-11-21 10:17:05",
    "responseClientDadosOcrDTO": {
      "responseClientRGOcrDTO": {
        "estado": "SP", "documento": "RG", "dtExpedicao": "01/02/2015",
        "dtExpedicaoFormatada": "2015-02-01", "dtNascimentoFormatada": "1990-02-28",
        "nrRg": "12.345.678-9", "nome": "MARIA DA SILVA", "filiacao": "JOSE / ANA",
        "nomePai": "JOSE DA SILVA", "nomeMae": "ANA DA SILVA", "docOrigem": "CERT NASC",
        "dtNascimento": "28/02/1990", "cpf": "52998224725", "naturalidade": "SAO PAULO",
        "nomenclatura": "SSP", "dtCriacao": "2026-11-21 10:16:30", "flAnalfabeto": false,
        "campoNovo": {"x": 1}
      }
    },
    "biometriaCertiface": {
      "protocolo": "PB-1",
      "facematch": {"codigo": 200, "causa": "Positiva", "score": 0.93},
      "registry": {"codigo": 300, "causa": "Negativa", "score": 0.21}
    },
    "documentos": [
      {"arquivo": 1, "statusArquivo": 22,
       "arquivosProcessado": {"tipo": 1, "statusArquivoProcessado": 19}},
      {"arquivo": "2", "statusArquivo": "9",
       "arquivosProcessado": [{"tipo": 2, "statusArquivoProcessado": 12},
                              {"tipo": 99, "statusArquivoProcessado": 77}]}
    ]
  },
  "serviceID": {"codigo": 200, "protocolo": "SID-1", "score": "300"},
  "livenessResult": {"causa": "", "codID": 200.0, "protocolo": "LV-1", "valid": true},
  "fotos": {
    "livenessResult": {"frontal": "data:image/jpeg;base64,/9j/4AAQ"},
    "documento": [{"descricao": "RG frente", "imagem": "aGVsbG8"}]
  }
}"#;
