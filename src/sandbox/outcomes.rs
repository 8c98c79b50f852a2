//! The test-environment rules: deterministic results of the registry
//! check, the face match and the face bureau, chosen by CPF (and, for a
//! face missing from the document, by a document marker).

use super::samples::{
    FACE_MATCH_NEGATIVE, REGISTRY_NEGATIVE, REGISTRY_POSITIVE, RISK_CLASS_PINNED, RISK_CLASSES,
};

/// One biometric check result (`facematch` or `registry`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckResult {
    /// `codigo`.
    pub codigo: u32,
    /// `causa`.
    pub causa: &'static str,
    /// `score`, present only when the comparison ran.
    pub score: Option<f64>,
}

const POSITIVE: CheckResult = CheckResult {
    codigo: 200,
    causa: "Validação positiva: faces semelhantes",
    score: Some(0.93),
};
const NEGATIVE: CheckResult = CheckResult {
    codigo: 300,
    causa: "Validação negativa: baixa similaridade",
    score: Some(0.21),
};
const NOT_FOUND: CheckResult = CheckResult {
    codigo: 4,
    causa: "CPF não cadastrado na base interna",
    score: None,
};
const NO_FACE: CheckResult = CheckResult {
    codigo: 400,
    causa: "Face não encontrada no documento",
    score: None,
};

fn in_set(cpf: &str, set: &[super::samples::TestPerson]) -> bool {
    set.iter().any(|p| p.cpf == cpf)
}

/// Registry check: positive for the five [`REGISTRY_POSITIVE`] CPFs,
/// negative for the five [`REGISTRY_NEGATIVE`] ones, "not found" (4) for
/// every other CPF, as the spec's test environment does.
pub fn registry(cpf: &str) -> CheckResult {
    if in_set(cpf, &REGISTRY_POSITIVE) {
        POSITIVE
    } else if in_set(cpf, &REGISTRY_NEGATIVE) {
        NEGATIVE
    } else {
        NOT_FOUND
    }
}

/// Face match: 400 when the document has no face (`+no-face`), negative
/// for the five [`FACE_MATCH_NEGATIVE`] CPFs, positive otherwise (the
/// sandbox compares no real faces).
pub fn face_match(cpf: &str, no_face: bool) -> CheckResult {
    if no_face {
        NO_FACE
    } else if in_set(cpf, &FACE_MATCH_NEGATIVE) {
        NEGATIVE
    } else {
        POSITIVE
    }
}

/// Face-bureau risk class (`serviceID.score`): pinned for the
/// [`RISK_CLASS_PINNED`] CPFs, else `RISK_CLASSES[first nine digits % 11]`.
pub fn risk_class(cpf: &str) -> &'static str {
    if let Some((class, _)) = RISK_CLASS_PINNED.iter().find(|(_, p)| p.cpf == cpf) {
        return class;
    }
    let base: u64 = cpf.get(..9).and_then(|d| d.parse().ok()).unwrap_or(0);
    RISK_CLASSES[(base % RISK_CLASSES.len() as u64) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::cpf;
    use crate::sandbox::samples::{REGISTRY_NOT_FOUND, TestPerson};

    fn all_people() -> Vec<TestPerson> {
        let mut v: Vec<TestPerson> = Vec::new();
        v.extend(REGISTRY_POSITIVE);
        v.extend(REGISTRY_NEGATIVE);
        v.extend(FACE_MATCH_NEGATIVE);
        v.extend(RISK_CLASS_PINNED.iter().map(|(_, p)| *p));
        v.push(REGISTRY_NOT_FOUND);
        v
    }

    #[test]
    fn every_sample_cpf_has_valid_check_digits_and_is_unique() {
        let people = all_people();
        for p in &people {
            assert_eq!(cpf::normalize(p.cpf).as_deref(), Some(p.cpf), "{}", p.name);
        }
        let mut cpfs: Vec<&str> = people.iter().map(|p| p.cpf).collect();
        cpfs.sort_unstable();
        cpfs.dedup();
        assert_eq!(cpfs.len(), people.len());
    }

    #[test]
    fn registry_rule_follows_the_test_sets() {
        assert!(
            REGISTRY_POSITIVE
                .iter()
                .all(|p| registry(p.cpf).codigo == 200)
        );
        assert!(
            REGISTRY_NEGATIVE
                .iter()
                .all(|p| registry(p.cpf).codigo == 300)
        );
        assert_eq!(registry(REGISTRY_NOT_FOUND.cpf).codigo, 4);
    }

    #[test]
    fn pinned_risk_classes_cover_every_class() {
        for (class, p) in RISK_CLASS_PINNED {
            assert_eq!(risk_class(p.cpf), class);
        }
        let pinned: Vec<&str> = RISK_CLASS_PINNED.iter().map(|(c, _)| *c).collect();
        assert_eq!(pinned, RISK_CLASSES.to_vec());
    }
}
