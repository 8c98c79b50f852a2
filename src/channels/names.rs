//! What a channel may be called: a leaf that the configuration and the
//! weighted split both check names against.

/// A channel name that is safe as a metric label and in `channel:<name>`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
