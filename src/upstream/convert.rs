//! Wire answers -> `idgate.v1` messages.
//!
//! Codes travel twice: typed, and raw as the upstream sent them. Where the
//! proto enum numbers equal the wire codes (document kinds, processing,
//! file and reading statuses, biometric and face-bureau codes) a code no
//! table lists becomes `*_UNSPECIFIED` and only the raw value tells it.
//! Objects the upstream omits stay unset. Images are decoded from Base64
//! here, once, straight into the message's bytes.

mod result;

use std::time::{Duration, SystemTime};

use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::domain::{SessionGrant, SessionToken};
use crate::proto::v1 as pb;

pub use result::journey_result;

use super::wire::{ChallengesWire, Session3DWire, VerdictWire, WireError};

/// How long generated 2D challenges stay valid
/// (`docs/upstream.md#timing-and-state-rules`).
pub const CHALLENGE_WINDOW: Duration = Duration::from_secs(60);

/// The typed value of a code whose proto number equals the wire code, or 0
/// (`*_UNSPECIFIED`) when no table lists it.
pub(crate) fn code_enum<E: TryFrom<i32> + Into<i32>>(code: i32) -> i32 {
    E::try_from(code).map(Into::into).unwrap_or(0)
}

/// Normalises decimal text for comparison: `200`, `200.0` and `200.00`
/// are the same code; `300.10` is `300.1`. `None` if not decimal text.
pub fn normalize_decimal(raw: &str) -> Option<String> {
    let s = raw.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let frac = frac.trim_end_matches('0');
    Some(if frac.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{frac}")
    })
}

/// `codID` -> [`pb::LivenessCode`], compared as decimal text (never as
/// floats): 200.0 valid, 300.1 invalid, 300.2 user blocked.
pub fn liveness_code(raw: &str) -> pb::LivenessCode {
    match normalize_decimal(raw).as_deref() {
        Some("200") => pb::LivenessCode::Valid,
        Some("300.1") => pb::LivenessCode::Invalid,
        Some("300.2") => pb::LivenessCode::UserBlocked,
        _ => pb::LivenessCode::Unspecified,
    }
}

/// `serviceID.score` -> [`pb::RiskClass`]: 000 no information; 100/200
/// very low; 300 low; 400/500/600 medium; 700/800 high; 900/1000 highest.
pub fn risk_class(raw: &str) -> pb::RiskClass {
    let t = raw.trim();
    // `000` is its own class; `0` and `0.0` are read as the same.
    match normalize_decimal(t).as_deref() {
        Some("0") => pb::RiskClass::NoInformation,
        Some("100" | "200") => pb::RiskClass::VeryLow,
        Some("300") => pb::RiskClass::Low,
        Some("400" | "500" | "600") => pb::RiskClass::Medium,
        Some("700" | "800") => pb::RiskClass::High,
        Some("900" | "1000") => pb::RiskClass::Highest,
        _ => pb::RiskClass::Unspecified,
    }
}

/// `status` -> [`pb::JourneyStatus`]; accents and case do not matter, and
/// the webhook's `Error` is read as `Erro`.
pub fn journey_status(raw: &str) -> pb::JourneyStatus {
    let folded: String = raw
        .trim()
        .chars()
        .map(|c| match c {
            'ã' | 'Ã' | 'á' | 'Á' | 'â' | 'Â' => 'a',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    match folded
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .as_str()
    {
        "completo" => pb::JourneyStatus::Complete,
        "em processamento" => pb::JourneyStatus::Processing,
        "nao processado" => pb::JourneyStatus::NotProcessed,
        "erro" | "error" => pb::JourneyStatus::Error,
        _ => pb::JourneyStatus::Unspecified,
    }
}

/// A `google.protobuf.Duration` of `millis` milliseconds; a negative
/// count, which no upstream means, is zero.
fn duration_millis(millis: i64) -> prost_types::Duration {
    let millis = millis.max(0);
    prost_types::Duration {
        seconds: millis / 1000,
        nanos: i32::try_from((millis % 1000) * 1_000_000).unwrap_or(0),
    }
}

/// Reads the points in time the upstream writes as text: RFC 3339, or
/// `yyyy-mm-dd hh:mm:ss` (optionally with `T` and a fraction) and
/// `dd/MM/yyyy hh:mm:ss` in the upstream's offset
/// (`[upstream] utc_offset_minutes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireTimes {
    offset: UtcOffset,
}

impl Default for WireTimes {
    fn default() -> Self {
        WireTimes::new(super::config::DEFAULT_UTC_OFFSET_MINUTES)
    }
}

impl WireTimes {
    /// Times written `minutes` from UTC; an offset out of range is UTC.
    pub fn new(minutes: i16) -> Self {
        let offset =
            UtcOffset::from_whole_seconds(i32::from(minutes) * 60).unwrap_or(UtcOffset::UTC);
        WireTimes { offset }
    }

    /// The instant `raw` names; `None` when it is empty or not a time.
    pub fn parse(&self, raw: &str) -> Option<prost_types::Timestamp> {
        use time::format_description::well_known::Rfc3339;
        use time::macros::format_description;
        let raw = raw.trim();
        if raw.is_empty() {
            return None;
        }
        if let Ok(at) = OffsetDateTime::parse(raw, &Rfc3339) {
            return Some(SystemTime::from(at).into());
        }
        let local = [
            format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
            format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
            format_description!("[year]-[month]-[day] [hour]:[minute]:[second].[subsecond]"),
            format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond]"),
            format_description!("[day]/[month]/[year] [hour]:[minute]:[second]"),
        ]
        .iter()
        .find_map(|f| PrimitiveDateTime::parse(raw, f).ok())?;
        Some(SystemTime::from(local.assume_offset(self.offset)).into())
    }
}

/// The liveness verdict of `/captcha` and `/3d/liveness`.
pub fn verdict(wire: VerdictWire) -> pb::LivenessVerdict {
    let raw_code = wire.cod_id.into_string();
    pb::LivenessVerdict {
        valid: wire.valid.or_false(),
        code: liveness_code(&raw_code).into(),
        raw_code,
        cause: wire.cause.into_string(),
        protocol: wire.protocol.into_string(),
    }
}

/// The challenges of `/challenge`. `requested_at` is when the request was
/// sent: the challenges were generated after it, so the deadline computed
/// from it is never later than the upstream's.
pub fn challenges(
    wire: ChallengesWire<'_>,
    requested_at: SystemTime,
) -> Result<pb::CreateChallengesResponse, WireError> {
    let challenge_key = wire
        .chkey
        .0
        .filter(|k| !k.trim().is_empty())
        .ok_or(WireError::missing("chkey"))?;
    let mut challenges = Vec::with_capacity(wire.challenges.0.len());
    for (i, c) in wire.challenges.0.into_iter().enumerate() {
        let face_type = match c.tipo_face {
            Some(t) => Some(pb::FaceType {
                code: t.codigo.into_string(),
                icon: t
                    .imagem
                    .decode(&format!("challenges[{i}].tipoFace.imagem"))?,
            }),
            None => None,
        };
        challenges.push(pb::Challenge {
            message: c.mensagem.into_string(),
            duration: c
                .tempo_em_segundos
                .0
                .map(|s| duration_millis(s.saturating_mul(1000))),
            face_type,
        });
    }
    Ok(pb::CreateChallengesResponse {
        challenge_key,
        challenge_count: wire
            .number_of_challenges
            .0
            .map(|_| wire.number_of_challenges.to_i32())
            .unwrap_or(challenges.len() as i32),
        challenges,
        total_duration: wire
            .total_time
            .0
            .map(|s| duration_millis(s.saturating_mul(1000))),
        snapshot_interval: wire.snap_frequence_in_millis.0.map(duration_millis),
        snapshot_count: wire.snap_number.to_i32(),
        expire_time: Some((requested_at + CHALLENGE_WINDOW).into()),
    })
}

/// A `/3d/session-token` answer; the token is required under either name.
pub fn session_3d(mut wire: Session3DWire) -> Result<SessionGrant, WireError> {
    let token = wire.take_token().ok_or(WireError::missing("token"))?;
    Ok(SessionGrant {
        token: SessionToken::new(token),
        vendor: wire.vendor.into_string(),
        vendor_url: wire.url.into_string(),
        contingency: wire.is_contingency.or_false(),
    })
}

/// `serde_json` object -> `google.protobuf.Struct`, for the OCR objects
/// whose fields the spec does not show (CRNM, passport).
pub fn json_struct(map: serde_json::Map<String, serde_json::Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map.into_iter().map(|(k, v)| (k, json_value(v))).collect(),
    }
}

fn json_value(v: serde_json::Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(f) => Kind::NumberValue(f),
            None => Kind::StringValue(n.to_string()),
        },
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(json_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(json_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests;
