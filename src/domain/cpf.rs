//! The Brazilian tax id (CPF) of an end user.

use std::fmt;

/// A CPF with valid check digits, held as its 11 digits. Personal data:
/// `Debug` and `Display` redact it.
#[derive(Clone, PartialEq, Eq)]
pub struct Cpf(String);

impl Cpf {
    /// Parses a CPF, formatted (`123.456.789-09`) or not. The error says
    /// what is wrong without repeating the value.
    pub fn parse(input: &str) -> Result<Self, &'static str> {
        let input = input.trim();
        if input.is_empty() {
            return Err("is required");
        }
        if input
            .chars()
            .any(|c| !(c.is_ascii_digit() || matches!(c, '.' | '-' | ' ')))
        {
            return Err("must contain only digits, optionally formatted as 000.000.000-00");
        }
        let digits: Vec<u32> = input.chars().filter_map(|c| c.to_digit(10)).collect();
        if digits.len() != 11 {
            return Err("must have 11 digits");
        }
        if digits.iter().all(|d| *d == digits[0]) {
            return Err("is not a valid CPF (repeated digits)");
        }
        if check_digit(&digits[..9]) != digits[9] || check_digit(&digits[..10]) != digits[10] {
            return Err("is not a valid CPF (check digits do not match)");
        }
        Ok(Cpf(digits
            .iter()
            .map(|d| char::from(b'0' + *d as u8))
            .collect()))
    }

    /// The 11 digits, as the upstream takes them.
    pub fn digits(&self) -> &str {
        &self.0
    }
}

/// The mod-11 check digit over `digits` (weights n+1 down to 2).
fn check_digit(digits: &[u32]) -> u32 {
    let n = digits.len() as u32 + 1;
    let sum: u32 = digits
        .iter()
        .enumerate()
        .map(|(i, d)| d * (n - i as u32))
        .sum();
    let r = (sum * 10) % 11;
    if r == 10 { 0 } else { r }
}

impl fmt::Debug for Cpf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cpf(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_formatted_and_plain_cpfs_and_normalises_them() {
        assert_eq!(
            Cpf::parse("529.982.247-25").unwrap().digits(),
            "52998224725"
        );
        assert_eq!(Cpf::parse("52998224725").unwrap().digits(), "52998224725");
    }

    #[test]
    fn rejects_wrong_check_digits_lengths_letters_and_repeats() {
        assert!(Cpf::parse("52998224724").is_err());
        assert!(Cpf::parse("5299822472").is_err());
        assert!(Cpf::parse("5299822472a").is_err());
        assert!(Cpf::parse("11111111111").is_err());
        assert!(Cpf::parse("").is_err());
    }

    #[test]
    fn debug_redacts_the_cpf() {
        let cpf = Cpf::parse("52998224725").unwrap();
        assert!(!format!("{cpf:?}").contains("529"));
    }
}
