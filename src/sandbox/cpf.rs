//! Brazilian tax ids (CPF): normalisation and check digits.

/// The 11 digits of a CPF given with or without the usual punctuation
/// (`123.456.789-09`), or `None` when it is not a well-formed CPF with
/// valid check digits.
pub fn normalize(raw: &str) -> Option<String> {
    let digits: String = raw
        .trim()
        .chars()
        .filter(|c| !matches!(c, '.' | '-'))
        .collect();
    if digits.len() != 11 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let d: Vec<u32> = digits.bytes().map(|b| u32::from(b - b'0')).collect();
    // Eleven equal digits pass the arithmetic but are not issued.
    if d.iter().all(|&x| x == d[0]) {
        return None;
    }
    (check_digit(&d[..9]) == d[9] && check_digit(&d[..10]) == d[10]).then_some(digits)
}

/// The check digit that follows `digits` (9 or 10 of them).
fn check_digit(digits: &[u32]) -> u32 {
    let weight_start = digits.len() as u32 + 1;
    let sum: u32 = digits
        .iter()
        .enumerate()
        .map(|(i, d)| d * (weight_start - i as u32))
        .sum();
    match (sum * 10) % 11 {
        10 => 0,
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn accepts_valid_cpf_with_or_without_punctuation() {
        assert_eq!(normalize("529.982.247-25").as_deref(), Some("52998224725"));
        assert_eq!(normalize("52998224725").as_deref(), Some("52998224725"));
    }

    #[test]
    fn rejects_bad_check_digits_length_and_repeated_digits() {
        assert_eq!(normalize("52998224724"), None);
        assert_eq!(normalize("5299822472"), None);
        assert_eq!(normalize("11111111111"), None);
        assert_eq!(normalize("5299822472a"), None);
    }
}
