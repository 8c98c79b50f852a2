//! Opening a store: its directory (created `0700`), its file (locked, so
//! a second process is refused), its key (checked against what the file
//! was sealed under), and the bytes its live records count. Each failure
//! is named with its path and cause; nothing falls back to memory.

use std::{
    os::unix::fs::DirBuilderExt as _,
    sync::{Arc, atomic::AtomicU64},
};

use redb::ReadableTable as _;

use super::{
    StoreConfig, StoreError, Table,
    context::Context,
    key_file,
    record::{EXPIRIES, KEY_CHECK, META, RECORDS, USED_BYTES},
    sealing,
};
use crate::cluster::encryption::Keys;

/// The key check's place in the sealing scheme, and what it seals: a
/// constant, so only the key is being checked.
const KEY_CHECK_TABLE: Table = Table::new("idgate.store");
const KEY_CHECK_VALUE: &[u8] = b"idgate.store.key-check.v1";

/// The open file, its context, and the bytes its live records count.
pub(super) struct Opened {
    pub db: Arc<redb::Database>,
    pub ctx: Arc<Context>,
    pub used: u64,
}

/// Opens (creating if need be) the store `config` describes. Records are
/// sealed by `sealer` (the `[cluster]` key) when given, else by the key
/// in `config`'s key file, created on first start.
pub(super) fn open(config: &StoreConfig, keys: Option<Keys>) -> Result<Opened, StoreError> {
    let dir = &config.path;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StoreError::Unwritable {
            path: dir.to_owned(),
            cause: e.to_string(),
        })?;
    let path = config.store_file();
    let db = redb::Database::create(&path).map_err(|e| StoreError::storage(&path, e))?;
    let keys = match keys {
        Some(keys) => keys,
        None => {
            let key = key_file::load_or_create(&config.key_file())?;
            Keys::new(&key, None)
        }
    };
    let ctx = Context {
        path,
        sealer: keys.sealer,
        digester: keys.digester,
        max_bytes: config.max_bytes,
        used: AtomicU64::new(0),
    };
    let used = prepare(&db, &ctx)?;
    ctx.set_used(used);
    Ok(Opened {
        db: Arc::new(db),
        ctx: Arc::new(ctx),
        used,
    })
}

/// Creates the tables, checks the key against the file's key check (and
/// seals it anew under the current key, so that a rotation's previous key
/// can be dropped once the records it sealed have expired), and reads the
/// bytes counted.
fn prepare(db: &redb::Database, ctx: &Context) -> Result<u64, StoreError> {
    let txn = db.begin_write().map_err(|e| ctx.failed(e))?;
    txn.open_table(RECORDS).map_err(|e| ctx.failed(e))?;
    txn.open_table(EXPIRIES).map_err(|e| ctx.failed(e))?;
    let used = {
        let mut meta = txn.open_table(META).map_err(|e| ctx.failed(e))?;
        let check = meta
            .get(KEY_CHECK)
            .map_err(|e| ctx.failed(e))?
            .map(|v| v.value().to_vec());
        if let Some(check) = check {
            let opens = std::str::from_utf8(&check).ok().and_then(|sealed| {
                sealing::open(&ctx.sealer, KEY_CHECK_TABLE, KEY_CHECK.as_bytes(), sealed)
            });
            if opens.as_deref().map(Vec::as_slice) != Some(KEY_CHECK_VALUE) {
                return Err(StoreError::WrongKey {
                    path: ctx.path.clone(),
                });
            }
        }
        let sealed = sealing::seal(
            &ctx.sealer,
            KEY_CHECK_TABLE,
            KEY_CHECK.as_bytes(),
            KEY_CHECK_VALUE,
        );
        meta.insert(KEY_CHECK, sealed.as_bytes())
            .map_err(|e| ctx.failed(e))?;
        meta.get(USED_BYTES)
            .map_err(|e| ctx.failed(e))?
            .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes))
            .unwrap_or(0)
    };
    txn.commit().map_err(|e| ctx.failed(e))?;
    Ok(used)
}
