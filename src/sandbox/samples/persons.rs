//! Test persons: every CPF the sandbox's test-environment rules know.
//! All CPFs have valid check digits.

/// An end user as given to `/appkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestPerson {
    /// CPF, 11 digits, valid check digits.
    pub cpf: &'static str,
    /// `nome`.
    pub name: &'static str,
    /// `nascimento`, dd/mm/yyyy.
    pub birth_date: &'static str,
}

const fn person(cpf: &'static str, name: &'static str, birth_date: &'static str) -> TestPerson {
    TestPerson {
        cpf,
        name,
        birth_date,
    }
}

/// The five CPFs whose registry check is positive (codigo 200).
pub const REGISTRY_POSITIVE: [TestPerson; 5] = [
    person("52110000139", "Ana Positiva Souza", "14/03/1985"),
    person("52110000210", "Bruno Positivo Lima", "02/11/1990"),
    person("52110000309", "Carla Positiva Rocha", "27/07/1978"),
    person("52110000481", "Diego Positivo Alves", "09/01/2000"),
    person("52110000562", "Elisa Positiva Costa", "30/05/1969"),
];

/// The five CPFs whose registry check is negative (codigo 300).
pub const REGISTRY_NEGATIVE: [TestPerson; 5] = [
    person("52120000174", "Fabio Negativo Dias", "11/02/1982"),
    person("52120000255", "Gabriela Negativa Reis", "23/09/1995"),
    person("52120000336", "Heitor Negativo Melo", "05/12/1974"),
    person("52120000417", "Iris Negativa Pires", "18/06/1988"),
    person("52120000506", "Joao Negativo Ramos", "01/04/1960"),
];

/// Five CPFs whose face match is negative (codigo 300). Their registry
/// check answers "not found" (codigo 4), like any CPF outside the two
/// registry sets.
pub const FACE_MATCH_NEGATIVE: [TestPerson; 5] = [
    person("52130000100", "Karina Diferente Lopes", "07/08/1992"),
    person("52130000290", "Lucas Diferente Nunes", "15/10/1986"),
    person("52130000371", "Marta Diferente Gomes", "29/01/1971"),
    person("52130000452", "Nelson Diferente Cruz", "03/03/1999"),
    person("52130000533", "Olga Diferente Vaz", "21/11/1965"),
];

/// One CPF pinned to each face-bureau risk class (`serviceID.score`),
/// in the order of [`RISK_CLASSES`](super::RISK_CLASSES).
pub const RISK_CLASS_PINNED: [(&str, TestPerson); 11] = [
    (
        "000",
        person("52140000064", "Paulo Risco Zero", "12/12/1980"),
    ),
    (
        "100",
        person("52140000145", "Quesia Risco Cem", "08/08/1981"),
    ),
    (
        "200",
        person("52140000226", "Rafael Risco Duzentos", "17/04/1983"),
    ),
    (
        "300",
        person("52140000307", "Sara Risco Trezentos", "25/02/1984"),
    ),
    (
        "400",
        person("52140000498", "Tiago Risco Quatrocentos", "06/06/1986"),
    ),
    (
        "500",
        person("52140000579", "Ursula Risco Quinhentos", "19/09/1987"),
    ),
    (
        "600",
        person("52140000650", "Vitor Risco Seiscentos", "28/10/1989"),
    ),
    (
        "700",
        person("52140000730", "Wanda Risco Setecentos", "04/05/1991"),
    ),
    (
        "800",
        person("52140000811", "Xavier Risco Oitocentos", "13/07/1993"),
    ),
    (
        "900",
        person("52140000900", "Yara Risco Novecentos", "22/01/1996"),
    ),
    (
        "1000",
        person("52140001036", "Zeca Risco Mil", "31/03/1998"),
    ),
];

/// A CPF in no test set: registry "not found" (codigo 4), face match
/// positive, risk class from the hash rule.
pub const REGISTRY_NOT_FOUND: TestPerson =
    person("52998224725", "Teresa Desconhecida Prado", "10/10/1975");

/// The person of a fully green journey: registry positive, face match
/// positive.
pub const HAPPY_PERSON: TestPerson = REGISTRY_POSITIVE[0];
