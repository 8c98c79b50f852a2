//! The store's sealing key when `[cluster]` names none: a file of Base64
//! of 32 random bytes (the format of `[cluster] secret_key_file`, so the
//! same file can serve a replica that later joins a fleet), created `0600`
//! on first start.
//!
//! Losing the file loses the records: they were sealed under it, and the
//! store refuses to start under another key rather than read every
//! record as absent ([`super::StoreError::WrongKey`]).

use std::{io::Write as _, os::unix::fs::OpenOptionsExt as _, path::Path};

use aes_gcm::aead::Generate as _;
use base64::Engine as _;

use super::StoreError;
use crate::cluster::{config::decode_key, encryption::SealKey};

/// The key in `path`, made and written first if the file does not exist.
pub(super) fn load_or_create(path: &Path) -> Result<SealKey, StoreError> {
    let failed = |cause: String| StoreError::KeyFile {
        path: path.to_owned(),
        cause,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let text = zeroize::Zeroizing::new(text);
            decode_key("store.key_file", &text).map_err(|e| failed(e.to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path).map_err(failed),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// Writes a new random key to `path` (which must not exist), durably:
/// a key lost in a crash after records were sealed under it would lose
/// them too.
fn create(path: &Path) -> Result<SealKey, String> {
    let key = SealKey::new(
        <[u8; 32]>::try_generate().map_err(|e| format!("no random bytes from the system: {e}"))?,
    );
    let text =
        zeroize::Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(*key) + "\n");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| e.to_string())?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| e.to_string())?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_missing_key_file_is_created_owner_only_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let first = load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(*load_or_create(&path).unwrap(), *first);
        let other = dir.path().join("other");
        assert_ne!(*load_or_create(&other).unwrap(), *first, "random per file");
    }

    #[test]
    fn a_key_file_that_holds_no_key_is_refused_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "not a key").unwrap();
        let e = load_or_create(&path).unwrap_err();
        assert!(matches!(e, StoreError::KeyFile { .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        assert!(!e.to_string().contains("not a key"), "{e}");
    }
}
