//! The OCR objects of the journey result, "read" from the end user given
//! at `/appkey`: the name, CPF and birth date are theirs, the rest is
//! fixed plausible data derived from the CPF.

use serde_json::{Value, json};

use super::documents::{DocumentType, LicenceFormat};
use super::store::EndUser;
use super::wire_time::{br_date, iso_date};

/// Values shared by every OCR object.
struct Person<'a> {
    name: String,
    cpf: &'a str,
    birth: String,
    birth_iso: String,
    father: String,
    mother: String,
    parents: String,
    created: &'a str,
}

impl<'a> Person<'a> {
    fn new(user: &'a EndUser, created: &'a str) -> Self {
        let name = user.name.to_uppercase();
        let surname = name.rsplit(' ').next().unwrap_or("SILVA").to_owned();
        let father = format!("JOSE {surname}");
        let mother = format!("MARIA {surname}");
        Self {
            parents: format!("{father} E {mother}"),
            father,
            mother,
            name,
            cpf: &user.cpf,
            birth: br_date(user.birth),
            birth_iso: iso_date(user.birth),
            created,
        }
    }

    /// A document number derived from the CPF, so it is stable.
    fn number(&self, len: usize) -> &str {
        self.cpf.get(..len).unwrap_or(self.cpf)
    }
}

const ISSUED: &str = "15/06/2018";
const ISSUED_ISO: &str = "2018-06-15";
const VALID_UNTIL: &str = "15/06/2028";
const FIRST_LICENCE: &str = "10/03/2010";

/// The OCR object of `doc_type` (its key is [`DocumentType::ocr_key`]).
pub(crate) fn document(doc_type: DocumentType, user: &EndUser, created: &str) -> Value {
    let p = Person::new(user, created);
    match doc_type {
        DocumentType::Rg => json!({
            "estado": "SP", "documento": "RG", "dtExpedicao": ISSUED, "dtExpedicaoFormatada": ISSUED_ISO,
            "dtNascimentoFormatada": p.birth_iso, "nrRg": p.number(9), "nome": p.name,
            "filiacao": p.parents, "nomePai": p.father, "nomeMae": p.mother,
            "docOrigem": "CERTIDAO DE NASCIMENTO", "dtNascimento": p.birth, "cpf": p.cpf,
            "naturalidade": "SAO PAULO - SP", "nomenclatura": "SECRETARIA DA SEGURANCA PUBLICA",
            "dtCriacao": p.created, "flAnalfabeto": false,
        }),
        DocumentType::Cnh | DocumentType::Cnh2022 => json!({
            "estado": "SP", "estadoNome": "SÃO PAULO", "documento": "CNH", "nome": p.name,
            "docOrigem": format!("{} SSP SP", p.number(9)), "documentoOrigem": p.number(9),
            "emissorOrigem": "SSP", "ufOrigem": "SP", "cpf": p.cpf, "dtNascimento": p.birth,
            "dtNascimentoFormatada": p.birth_iso, "filiacao": p.parents, "nomePai": p.father,
            "nomeMae": p.mother, "permissao": null, "acc": null, "categoria": "AB",
            "numeroRegistro": format!("0{}", p.number(10)), "validade": VALID_UNTIL,
            "primeiraHabilitacao": FIRST_LICENCE, "local": "SAO PAULO, SP", "dtExpedicao": ISSUED,
            "dtExpedicaoFormatada": ISSUED_ISO, "codSeguranca": format!("9{}", p.number(10)),
            "espelho": format!("1{}", p.number(9)), "renach": format!("SP{}", p.number(9)),
            "dtCriacao": p.created,
        }),
        DocumentType::Dni => json!({
            "estado": "SP", "nomenclatura": "REPUBLICA FEDERATIVA DO BRASIL", "naturalidade": "SAO PAULO - SP",
            "filiacao": p.parents, "nomePai": p.father, "nomeMae": p.mother, "dtNascimento": p.birth,
            "dtNascimentoFormatada": p.birth_iso, "nome": p.name, "observacaoFront": "", "outroRG": "",
            "orgao": "TSE", "fator": "O+", "registroCivil": "", "cnh": "", "cns": "", "cpf": p.cpf,
            "ctps": "", "serieCTPS": "", "ufctps": "", "dni": format!("DNI{}", p.number(9)),
            "tituloEleitor": format!("0{}", p.number(11)), "dtExpedicao": ISSUED,
            "dtExpedicaoFormatada": ISSUED_ISO, "local": "TSE", "certMilitar": "", "nomeSocial": "",
            "pis": "", "profissional": "", "rg": p.number(9), "dtCriacao": p.created, "flAnalfabeto": false,
        }),
        DocumentType::Cin => json!({
            "documento": "CIN", "estado": "SP", "nomenclatura": "SECRETARIA DA SEGURANCA PUBLICA",
            "nome": p.name, "cpf": p.cpf, "sexo": "F", "dtNascimento": p.birth,
            "nacionalidade": "BRASILEIRA", "naturalidade": "SAO PAULO - SP", "dtValidade": "15/06/2033",
            "posto": "POUPATEMPO SE", "filiacao": p.parents, "nomePai": p.father, "nomeMae": p.mother,
            "orgaoEmissor": "SSP/SP", "local": "SAO PAULO - SP", "dtExpedicao": ISSUED, "analfabeto": false,
            "dtExpedicaoFormatada": ISSUED_ISO, "dtNascimentoFormatada": p.birth_iso, "dtCriacao": p.created,
        }),
        DocumentType::Crnm => json!({
            "documento": "CRNM", "nome": p.name, "cpf": p.cpf, "rnm": format!("V{}", p.number(7)),
            "dtNascimento": p.birth, "dtNascimentoFormatada": p.birth_iso, "nacionalidade": "PORTUGUESA",
            "filiacao": p.parents, "nomePai": p.father, "nomeMae": p.mother, "classificacao": "RESIDENTE",
            "dtValidade": "15/06/2030", "dtExpedicao": ISSUED, "dtExpedicaoFormatada": ISSUED_ISO,
            "dtCriacao": p.created,
        }),
        DocumentType::Passport => json!({
            "documento": "PASSAPORTE", "tipo": "P", "paisEmissor": "BRA", "passaporte": format!("FX{}", p.number(6)),
            "nome": p.name, "cpf": p.cpf, "nacionalidade": "BRASILEIRO(A)", "dtNascimento": p.birth,
            "dtNascimentoFormatada": p.birth_iso, "sexo": "F", "dtValidade": "15/06/2028",
            "dtExpedicao": ISSUED, "dtExpedicaoFormatada": ISSUED_ISO, "filiacao": p.parents,
            "nomePai": p.father, "nomeMae": p.mother, "dtCriacao": p.created,
        }),
    }
}

/// The CNH object of a digital-licence submission.
pub(crate) fn digital_licence(format: LicenceFormat, user: &EndUser, created: &str) -> Value {
    let p = Person::new(user, created);
    json!({
        "documento": "CNH Digital", "formato": format.formato(), "extensao": format.extensao(),
        "nome": p.name, "docOrigem": format!("{} SSP SP", p.number(9)), "cpf": p.cpf,
        "dtNascimento": p.birth, "dtNascimentoFormatada": p.birth_iso, "filiacao": p.parents,
        "categoria": "AB", "numeroRegistro": format!("0{}", p.number(10)), "validade": VALID_UNTIL,
        "primeiraHabilitacao": FIRST_LICENCE, "local": "SAO PAULO - SP", "renach": format!("SP{}", p.number(9)),
        "nomePai": p.father, "nomeMae": p.mother, "observacao": "",
    })
}
