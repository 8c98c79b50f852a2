//! Liveness outcomes and how a test chooses them.
//!
//! 2D: a marker `IDGATE-SANDBOX:liveness=<outcome>` inside any snapshot.
//! 3D: `idgate-sandbox-liveness=<outcome>` anywhere in the session-token
//! `userAgent`. Without a marker the proof is valid.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::documents::markers;

/// The three verdicts (`docs/upstream.md#2d-submission-captcha`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LivenessOutcome {
    /// codID 200.0, valid = true.
    #[default]
    Valid,
    /// codID 300.1, valid = false.
    Invalid,
    /// codID 300.2, valid = false.
    Blocked,
}

/// `userAgent` fragment prefix that selects a 3D outcome.
pub const USER_AGENT_MARKER: &str = "idgate-sandbox-liveness=";

impl LivenessOutcome {
    /// All outcomes.
    pub const ALL: [LivenessOutcome; 3] = [
        LivenessOutcome::Valid,
        LivenessOutcome::Invalid,
        LivenessOutcome::Blocked,
    ];

    /// Name used in markers: `valid`, `invalid`, `blocked`.
    pub fn name(self) -> &'static str {
        match self {
            LivenessOutcome::Valid => "valid",
            LivenessOutcome::Invalid => "invalid",
            LivenessOutcome::Blocked => "blocked",
        }
    }

    /// `codID`.
    pub fn cod_id(self) -> f64 {
        match self {
            LivenessOutcome::Valid => 200.0,
            LivenessOutcome::Invalid => 300.1,
            LivenessOutcome::Blocked => 300.2,
        }
    }

    /// `valid`.
    pub fn is_valid(self) -> bool {
        self == LivenessOutcome::Valid
    }

    /// `cause`: empty on success.
    pub fn cause(self) -> &'static str {
        match self {
            LivenessOutcome::Valid => "",
            LivenessOutcome::Invalid => "Prova de vida inválida",
            LivenessOutcome::Blocked => "Usuário bloqueado",
        }
    }

    /// The snapshot marker text (`IDGATE-SANDBOX:liveness=invalid`).
    pub fn snapshot_marker(self) -> String {
        format!(
            "{}liveness={}",
            super::documents::MARKER_PREFIX,
            self.name()
        )
    }

    /// The `userAgent` that selects this outcome for a 3D session.
    pub fn user_agent(self) -> String {
        format!("{USER_AGENT_MARKER}{}", self.name())
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The outcome a 3D session's `userAgent` asks for.
    pub fn from_user_agent(user_agent: Option<&str>) -> Self {
        user_agent
            .and_then(|ua| {
                let at = ua.find(USER_AGENT_MARKER)? + USER_AGENT_MARKER.len();
                let rest = &ua[at..];
                let end = rest
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(rest.len());
                Self::from_name(&rest[..end])
            })
            .unwrap_or_default()
    }

    /// The outcome the snapshots ask for: the first liveness marker found.
    pub fn from_snapshots(snapshots: &[Snapshot]) -> Self {
        snapshots
            .iter()
            .flat_map(|s| markers(&s.image))
            .find_map(|token| Self::from_name(token.strip_prefix("liveness=")?))
            .unwrap_or_default()
    }
}

/// One 2D snapshot: the challenge type it answers and the image. Not
/// `Debug`: the image is biometric data.
#[derive(Clone)]
pub struct Snapshot {
    /// `tipoFace.codigo` of the challenge the snapshot was taken for.
    pub face_type: String,
    /// The decoded image.
    pub image: Vec<u8>,
}

/// Builds the `/captcha` `images` field from snapshots: each one
/// `data:image/jpeg;base64,type:<code>,<base64>`, concatenated.
pub fn encode_snapshots<'a>(snapshots: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    snapshots
        .into_iter()
        .map(|(code, image)| {
            format!(
                "data:image/jpeg;base64,type:{code},{}",
                STANDARD.encode(image)
            )
        })
        .collect()
}

/// Parses the `/captcha` `images` field. `None` when it is empty or any
/// part does not follow the pattern or is not Base64.
pub fn parse_snapshots(images: &str) -> Option<Vec<Snapshot>> {
    const HEAD: &str = "data:image/";
    let mut out = Vec::new();
    // Every part starts with "data:image/"; Base64 text never contains ':'
    // so splitting on the head is unambiguous.
    for part in images.split(HEAD).skip(1) {
        let (_subtype, rest) = part.split_once(";base64,type:")?;
        let (code, data) = rest.split_once(',')?;
        if code.is_empty() {
            return None;
        }
        let image = STANDARD.decode(data.trim()).ok()?;
        if image.is_empty() {
            return None;
        }
        out.push(Snapshot {
            face_type: code.to_owned(),
            image,
        });
    }
    let whole_input_used = images.trim_start().starts_with(HEAD);
    (whole_input_used && !out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip() {
        let payload = encode_snapshots([
            ("cod01", &b"abc"[..]),
            ("cod02", &b"IDGATE-SANDBOX:liveness=blocked"[..]),
        ]);
        let parsed = parse_snapshots(&payload).expect("parses");
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].face_type, "cod01");
        assert_eq!(
            LivenessOutcome::from_snapshots(&parsed),
            LivenessOutcome::Blocked
        );
    }

    #[test]
    fn garbage_snapshots_are_rejected() {
        assert!(parse_snapshots("").is_none());
        assert!(parse_snapshots("hello").is_none());
        assert!(parse_snapshots("data:image/jpeg;base64,type:c,!!!").is_none());
        assert!(parse_snapshots("xdata:image/jpeg;base64,type:c,YWJj").is_none());
    }

    #[test]
    fn user_agent_selects_3d_outcome_and_defaults_to_valid() {
        assert_eq!(
            LivenessOutcome::from_user_agent(Some("SDK/1.0 idgate-sandbox-liveness=invalid")),
            LivenessOutcome::Invalid
        );
        assert_eq!(
            LivenessOutcome::from_user_agent(Some("SDK/1.0")),
            LivenessOutcome::Valid
        );
        assert_eq!(
            LivenessOutcome::from_user_agent(None),
            LivenessOutcome::Valid
        );
    }
}
