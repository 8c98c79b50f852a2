//! Lenient scalars: the upstream writes the same field as a number in one
//! answer and as a string in another (`codID` 200.0 or "200.0", `score`
//! 300 or "300"), so wire fields accept either and keep what was sent.
//!
//! Each type holds an `Option`: JSON `null` and a missing field (with
//! `#[serde(default)]`) are both "absent". `Debug` never prints the value,
//! because these fields carry names, tax ids and dates.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Text as sent: a string, or a number or boolean kept in its JSON
/// spelling (`200.0` stays `"200.0"`).
#[derive(Clone, Default, PartialEq)]
pub struct Text(pub Option<String>);

impl Text {
    /// The text, or `""` when absent (proto3 strings have no absence).
    pub fn into_string(self) -> String {
        self.0.unwrap_or_default()
    }

    /// The text, if present.
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// True when the field was absent or null.
    pub fn is_absent(&self) -> bool {
        self.0.is_none()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(_) => f.write_str("Text(<redacted>)"),
            None => f.write_str("Text(None)"),
        }
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
                Ok(Text(Some(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(Some(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(Some(float_text(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
                Ok(Text(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Text, E> {
                Ok(Text(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A float in JSON's spelling: `200.0` stays `200.0` (Rust's `Display`
/// would drop the fraction, and `codID` is compared as decimal text).
fn float_text(v: f64) -> String {
    match serde_json::Number::from_f64(v) {
        Some(n) => n.to_string(),
        None => v.to_string(),
    }
}

/// An integer code or id: a JSON integer, a float with no fraction
/// (`4.0`), or a string holding either. An empty string is absent; any
/// other text is a data error.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Int(pub Option<i64>);

impl Int {
    /// The value as an `i32` proto field; out-of-range values, which no
    /// code table has, become 0 (the `*_UNSPECIFIED` value).
    pub fn to_i32(self) -> i32 {
        self.0.and_then(|v| i32::try_from(v).ok()).unwrap_or(0)
    }
}

impl fmt::Debug for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Int({:?})", self.0)
    }
}

/// Parses integer text leniently: `12`, ` 12 `, `12.0`.
pub fn parse_int_text(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(v) = s.parse::<i64>() {
        return Some(v);
    }
    let (whole, frac) = s.split_once('.')?;
    if !frac.is_empty() && frac.bytes().all(|b| b == b'0') {
        whole.parse::<i64>().ok()
    } else {
        None
    }
}

fn int_from_f64(v: f64) -> Option<i64> {
    // Integral and inside the range that i64 represents exactly.
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Some(v as i64)
    } else {
        None
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer, as a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
                Ok(Int(Some(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                i64::try_from(v)
                    .map(|v| Int(Some(v)))
                    .map_err(|_| E::invalid_value(de::Unexpected::Other("a large integer"), &self))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Int, E> {
                int_from_f64(v)
                    .map(|v| Int(Some(v)))
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Other("a fraction"), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Int, E> {
                if v.trim().is_empty() {
                    return Ok(Int(None));
                }
                parse_int_text(v)
                    .map(|v| Int(Some(v)))
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Other("text"), &self))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Int, E> {
                Ok(Int(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Int, E> {
                Ok(Int(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A decimal number (scores): a JSON number or a string holding one. An
/// empty string is absent; other text is a data error.
#[derive(Clone, Copy, Default, PartialEq)]
pub struct Num(pub Option<f64>);

impl fmt::Debug for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Num({:?})", self.0)
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, or a string holding one")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(Some(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(Some(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(Some(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                let t = v.trim();
                if t.is_empty() {
                    return Ok(Num(None));
                }
                // Some locales write a decimal comma.
                let parsed = t.parse::<f64>().ok().or_else(|| {
                    t.contains(',')
                        .then(|| t.replace(',', ".").parse::<f64>().ok())
                        .flatten()
                });
                match parsed {
                    Some(f) if f.is_finite() => Ok(Num(Some(f))),
                    _ => Err(E::invalid_value(de::Unexpected::Other("text"), &self)),
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A boolean: `true`/`false`, the strings `"true"`/`"false"` (any case),
/// or the numbers and strings `1`/`0`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Flag(pub Option<bool>);

impl Flag {
    /// The value, false when absent (proto3 `bool`).
    pub fn or_false(self) -> bool {
        self.0.unwrap_or(false)
    }
}

impl fmt::Debug for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flag({:?})", self.0)
    }
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean, as a boolean, a string or 0/1")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Flag, E> {
                match v {
                    0 => Ok(Flag(Some(false))),
                    1 => Ok(Flag(Some(true))),
                    _ => Err(E::invalid_value(de::Unexpected::Other("a number"), &self)),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Flag, E> {
                match v {
                    0 => Ok(Flag(Some(false))),
                    1 => Ok(Flag(Some(true))),
                    _ => Err(E::invalid_value(de::Unexpected::Other("a number"), &self)),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Flag, E> {
                let t = v.trim();
                if t.is_empty() {
                    Ok(Flag(None))
                } else if t.eq_ignore_ascii_case("true") || t == "1" {
                    Ok(Flag(Some(true)))
                } else if t.eq_ignore_ascii_case("false") || t == "0" {
                    Ok(Flag(Some(false)))
                } else {
                    Err(E::invalid_value(de::Unexpected::Other("text"), &self))
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Flag, E> {
                Ok(Flag(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An item or a list of items: `arquivosProcessado` and `documento` come
/// both ways. `null` is an empty list.
#[derive(Clone)]
pub struct OneOrMany<T>(pub Vec<T>);

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany(Vec::new())
    }
}

impl<T> fmt::Debug for OneOrMany<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OneOrMany({} items)", self.0.len())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object or a list of objects")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(item) = seq.next_element::<T>()? {
                    items.push(item);
                }
                Ok(OneOrMany(items))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let one = T::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(OneOrMany(vec![one]))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OneOrMany(Vec::new()))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OneOrMany(Vec::new()))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct S {
        t: Text,
        i: Int,
        n: Num,
        f: Flag,
    }

    fn s(json: &str) -> S {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn text_keeps_the_json_spelling_of_numbers() {
        assert_eq!(s(r#"{"t":200.0}"#).t.as_deref(), Some("200.0"));
        assert_eq!(s(r#"{"t":"300.1"}"#).t.as_deref(), Some("300.1"));
        assert_eq!(s(r#"{"t":42}"#).t.as_deref(), Some("42"));
        assert_eq!(s(r#"{"t":true}"#).t.as_deref(), Some("true"));
        assert!(s(r#"{"t":null}"#).t.is_absent());
        assert!(s(r#"{}"#).t.is_absent());
    }

    #[test]
    fn int_accepts_numbers_strings_and_integral_floats() {
        assert_eq!(s(r#"{"i":4}"#).i.0, Some(4));
        assert_eq!(s(r#"{"i":"70"}"#).i.0, Some(70));
        assert_eq!(s(r#"{"i":"22.0"}"#).i.0, Some(22));
        assert_eq!(s(r#"{"i":9.0}"#).i.0, Some(9));
        assert_eq!(s(r#"{"i":""}"#).i.0, None);
        assert!(serde_json::from_str::<S>(r#"{"i":"abc"}"#).is_err());
        assert!(serde_json::from_str::<S>(r#"{"i":1.5}"#).is_err());
        assert!(serde_json::from_str::<S>(r#"{"i":[1]}"#).is_err());
    }

    #[test]
    fn num_and_flag_are_lenient_about_their_type() {
        assert_eq!(s(r#"{"n":"0.93"}"#).n.0, Some(0.93));
        assert_eq!(s(r#"{"n":"0,5"}"#).n.0, Some(0.5));
        assert_eq!(s(r#"{"n":87}"#).n.0, Some(87.0));
        assert_eq!(s(r#"{"f":"true"}"#).f.0, Some(true));
        assert_eq!(s(r#"{"f":0}"#).f.0, Some(false));
        assert_eq!(s(r#"{"f":null}"#).f.0, None);
        assert!(serde_json::from_str::<S>(r#"{"f":"maybe"}"#).is_err());
    }

    #[test]
    fn debug_of_text_prints_no_value() {
        let t = s(r#"{"t":"Maria da Silva"}"#).t;
        assert!(!format!("{t:?}").contains("Maria"));
    }
}
