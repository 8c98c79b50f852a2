//! The journey result of `/document/result`, field for field
//! (`docs/upstream.md#the-journey-result`).
//!
//! Every object is optional (the upstream omits the face match when it is
//! disabled, and the OCR objects of the types it did not read), unknown
//! fields are ignored, and scalars are lenient (see the `scalar` module).
//! Field names are the spec's; the product-name fields appear under their
//! neutral names (`serviceID`, `livenessResult`, `registry`).

use serde::Deserialize;

use super::image::Base64Image;
use super::scalar::{Flag, Int, Num, OneOrMany, Text};

/// Implements a `Debug` that names the type only: these structs carry
/// personal data.
macro_rules! opaque_debug {
    ($($t:ident $(<$l:lifetime>)?),* $(,)?) => {$(
        impl $(<$l>)? std::fmt::Debug for $t $(<$l>)? {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(concat!(stringify!($t), " { <redacted> }"))
            }
        }
    )*};
}

/// The whole result.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct JourneyResultWire<'a> {
    /// `Completo`, `Em processamento`, `Não processado`, `Erro`.
    #[serde(alias = "Status")]
    pub status: Text,
    /// The customer reference given at appkey creation.
    #[serde(rename = "idExternoCliente")]
    pub id_externo_cliente: Text,
    /// When the appkey was created.
    #[serde(rename = "dataCriacaoAppkey")]
    pub data_criacao_appkey: Text,
    /// Document analysis.
    #[serde(rename = "analiseDocumento")]
    pub analise_documento: Option<AnaliseDocumento>,
    /// Face bureau result (either variant).
    #[serde(rename = "serviceID")]
    pub service_id: Option<ServiceId>,
    /// Liveness result (either variant).
    #[serde(rename = "livenessResult")]
    pub liveness_result: Option<LivenessResultWire>,
    /// Photos sent.
    #[serde(borrow)]
    pub fotos: Option<Fotos<'a>>,
}

/// `analiseDocumento`.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AnaliseDocumento {
    /// Internal identifier.
    pub id: Text,
    /// Customer-side identifier.
    pub id_externo: Text,
    /// Ticket.
    pub ticket: Text,
    /// Ticket creation date.
    pub dt_criacao: Text,
    /// Client id in the forensics system.
    pub id_cliente: Text,
    /// Sub-client id.
    pub id_subcliente: Text,
    /// User id.
    pub id_usuario: Text,
    /// Processing status code.
    pub status_processamento: Int,
    /// When the status was finalised.
    pub dt_status_processamento: Text,
    /// Processing type code.
    pub id_tipo_processamento: Text,
    /// 0..100 likelihood that the document is genuine.
    pub score: Num,
    /// Callback address of the ticket.
    pub url_retorno_ticket: Text,
    /// When the ticket returned.
    pub dt_retorno_ticket: Text,
    /// OCR objects.
    #[serde(
        rename = "responseClientDadosOcrDTO",
        alias = "ResponseClientDadosOcrDTO"
    )]
    pub ocr: Option<DadosOcr>,
    /// Document biometrics (`biometriaDocumento`).
    #[serde(rename = "biometriaCertiface", alias = "biometriaDocumento")]
    pub biometria: Option<BiometriaDocumento>,
    /// Files processed.
    pub documentos: OneOrMany<Documento>,
}

/// `responseClientDadosOcrDTO`: one object per OCR type, only the type
/// read present. Keys are accepted with either case of the first letter.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct DadosOcr {
    /// RG.
    #[serde(rename = "responseClientRGOcrDTO", alias = "ResponseClientRGOcrDTO")]
    pub rg: Option<RgOcrWire>,
    /// CNH, paper, CNH2022 or digital (recognised by `formato`/`extensao`).
    #[serde(rename = "responseClientCNHOcrDTO", alias = "ResponseClientCNHOcrDTO")]
    pub cnh: Option<CnhOcrWire>,
    /// DNI.
    #[serde(rename = "responseClientDNIOcrDTO", alias = "ResponseClientDNIOcrDTO")]
    pub dni: Option<DniOcrWire>,
    /// CIN.
    #[serde(rename = "responseClientCINOcrDTO", alias = "ResponseClientCINOcrDTO")]
    pub cin: Option<CinOcrWire>,
    /// CRNM: fields not specified, kept as sent.
    #[serde(
        rename = "responseClientCRNMOcrDTO",
        alias = "ResponseClientCRNMOcrDTO"
    )]
    pub crnm: Option<serde_json::Map<String, serde_json::Value>>,
    /// Passport: fields not specified, kept as sent.
    #[serde(
        rename = "responseClientPassaporteOcrDTO",
        alias = "ResponseClientPassaporteOcrDTO"
    )]
    pub passaporte: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `responseClientRGOcrDTO`.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct RgOcrWire {
    pub estado: Text,
    pub documento: Text,
    pub dt_expedicao: Text,
    pub dt_expedicao_formatada: Text,
    pub dt_nascimento_formatada: Text,
    pub nr_rg: Text,
    pub nome: Text,
    pub filiacao: Text,
    pub nome_pai: Text,
    pub nome_mae: Text,
    pub doc_origem: Text,
    pub dt_nascimento: Text,
    pub cpf: Text,
    pub naturalidade: Text,
    pub nomenclatura: Text,
    pub dt_criacao: Text,
    pub fl_analfabeto: Flag,
}

/// `responseClientCNHOcrDTO`, both the paper/CNH2022 fields and the
/// digital-licence fields (`formato`, `extensao`, `observacao`).
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct CnhOcrWire {
    pub estado: Text,
    pub estado_nome: Text,
    pub documento: Text,
    pub nome: Text,
    pub doc_origem: Text,
    pub documento_origem: Text,
    pub emissor_origem: Text,
    pub uf_origem: Text,
    pub cpf: Text,
    pub dt_nascimento: Text,
    pub dt_nascimento_formatada: Text,
    pub filiacao: Text,
    pub nome_pai: Text,
    pub nome_mae: Text,
    pub permissao: Text,
    pub acc: Text,
    pub categoria: Text,
    pub numero_registro: Text,
    pub validade: Text,
    pub primeira_habilitacao: Text,
    pub local: Text,
    pub dt_expedicao: Text,
    pub dt_expedicao_formatada: Text,
    pub cod_seguranca: Text,
    pub espelho: Text,
    pub renach: Text,
    pub dt_criacao: Text,
    pub formato: Text,
    pub extensao: Text,
    pub observacao: Text,
}

impl CnhOcrWire {
    /// True for the digital licence read from its QR code: only that
    /// variant carries `formato` / `extensao`.
    pub fn is_digital(&self) -> bool {
        !self.formato.is_absent() || !self.extensao.is_absent()
    }
}

/// `responseClientDNIOcrDTO`.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct DniOcrWire {
    pub estado: Text,
    pub nomenclatura: Text,
    pub naturalidade: Text,
    pub filiacao: Text,
    pub nome_pai: Text,
    pub nome_mae: Text,
    pub dt_nascimento: Text,
    pub dt_nascimento_formatada: Text,
    pub nome: Text,
    pub observacao_front: Text,
    #[serde(rename = "outroRG")]
    pub outro_rg: Text,
    pub orgao: Text,
    pub fator: Text,
    pub registro_civil: Text,
    pub cnh: Text,
    pub cns: Text,
    pub cpf: Text,
    pub ctps: Text,
    #[serde(rename = "serieCTPS")]
    pub serie_ctps: Text,
    pub ufctps: Text,
    pub dni: Text,
    pub titulo_eleitor: Text,
    pub dt_expedicao: Text,
    pub dt_expedicao_formatada: Text,
    pub local: Text,
    pub cert_militar: Text,
    pub nome_social: Text,
    pub pis: Text,
    pub profissional: Text,
    pub rg: Text,
    pub dt_criacao: Text,
    pub fl_analfabeto: Flag,
}

/// `responseClientCINOcrDTO`.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct CinOcrWire {
    pub documento: Text,
    pub estado: Text,
    pub nomenclatura: Text,
    pub nome: Text,
    pub cpf: Text,
    pub sexo: Text,
    pub dt_nascimento: Text,
    pub nacionalidade: Text,
    pub naturalidade: Text,
    pub dt_validade: Text,
    pub posto: Text,
    pub filiacao: Text,
    pub nome_pai: Text,
    pub nome_mae: Text,
    pub orgao_emissor: Text,
    pub local: Text,
    pub dt_expedicao: Text,
    pub analfabeto: Flag,
    pub dt_expedicao_formatada: Text,
    pub dt_nascimento_formatada: Text,
    pub dt_criacao: Text,
}

/// `biometriaCertiface` (object `biometriaDocumento`).
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct BiometriaDocumento {
    /// Protocol of the validation request.
    pub protocolo: Text,
    /// Document photo against the selfie; absent when disabled.
    pub facematch: Option<BiometricCheckWire>,
    /// Document photo against the registry base; absent when disabled.
    pub registry: Option<BiometricCheckWire>,
}

/// `facematch` / `registry`: `codigo` and `score` are numbers in the full
/// journey and strings in the digital-licence result.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct BiometricCheckWire {
    /// Response code, as sent.
    pub codigo: Text,
    /// Message for the code.
    pub causa: Text,
    /// Similarity 0.0..1.0, only when run.
    pub score: Num,
}

/// A `documentos` item.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Documento {
    /// Serial number of the file in the ticket.
    pub arquivo: Int,
    /// File status code.
    pub status_arquivo: Int,
    /// Document types identified: an object or a list.
    pub arquivos_processado: OneOrMany<ArquivoProcessado>,
}

/// An `arquivosProcessado` item.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ArquivoProcessado {
    /// Document type and side code.
    pub tipo: Int,
    /// Reading status code.
    pub status_arquivo_processado: Int,
}

/// `serviceID`, the union of both variants' fields.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServiceId {
    /// Result code (full journey) or internal code (digital licence).
    pub codigo: Int,
    /// Protocol.
    pub protocolo: Text,
    /// Risk class, e.g. `300` (full journey).
    pub score: Text,
    /// Approved in the biometric analysis (digital licence).
    pub aprovado: Flag,
    /// Known in the base (digital licence).
    pub conhecido: Flag,
    /// Facial similarity percentage (digital licence).
    pub score_biometrico: Num,
}

impl ServiceId {
    /// True for the digital-licence variant: only it has these fields.
    pub fn is_digital_licence(&self) -> bool {
        self.aprovado.0.is_some() || self.conhecido.0.is_some() || self.score_biometrico.0.is_some()
    }
}

/// `livenessResult`, the union of both variants' fields.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct LivenessResultWire {
    /// Step at which the process ended, or origin of the validation.
    pub causa: Text,
    /// Transaction type code, as sent.
    #[serde(rename = "codID")]
    pub cod_id: Text,
    /// Protocol.
    pub protocolo: Text,
    /// Positive access (full journey).
    pub valid: Flag,
    /// Facial validation succeeded (digital licence).
    pub validado: Flag,
}

impl LivenessResultWire {
    /// True for the digital-licence variant (`validado` instead of `valid`).
    pub fn is_digital_licence(&self) -> bool {
        self.validado.0.is_some() && self.valid.0.is_none()
    }
}

/// `fotos`.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct Fotos<'a> {
    /// The liveness frontal image.
    #[serde(rename = "livenessResult", borrow)]
    pub liveness_result: Option<FotoLiveness<'a>>,
    /// Document images: a list (or a single object).
    #[serde(borrow)]
    pub documento: OneOrMany<FotoDocumento<'a>>,
}

/// `fotos.livenessResult`.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct FotoLiveness<'a> {
    /// Frontal image, Base64.
    #[serde(borrow)]
    pub frontal: Base64Image<'a>,
}

/// A `fotos.documento` item.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct FotoDocumento<'a> {
    /// Type or description.
    pub descricao: Text,
    /// The image, Base64.
    #[serde(borrow)]
    pub imagem: Base64Image<'a>,
}

opaque_debug!(
    JourneyResultWire<'a>,
    AnaliseDocumento,
    DadosOcr,
    RgOcrWire,
    CnhOcrWire,
    DniOcrWire,
    CinOcrWire,
    BiometriaDocumento,
    BiometricCheckWire,
    Documento,
    ArquivoProcessado,
    ServiceId,
    LivenessResultWire,
    Fotos<'a>,
    FotoLiveness<'a>,
    FotoDocumento<'a>,
);
