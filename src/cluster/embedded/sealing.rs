//! Every value sealed under the store's key with its table and key as
//! associated data (`cluster::encryption`, as on Redis): a value copied
//! into another record does not open there.

use zeroize::Zeroizing;

use super::Table;
use crate::cluster::encryption::{SealContext, Sealer};

/// `value` sealed for the record `key` of `table`.
pub(super) fn seal(sealer: &Sealer, table: Table, key: &[u8], value: &[u8]) -> String {
    sealer.seal_bytes(&SealContext::embedded_record(table.name(), key), value)
}

/// The value sealed in `sealed` for the record `key` of `table`; `None`
/// when it does not open there under the store's key.
pub(super) fn open(
    sealer: &Sealer,
    table: Table,
    key: &[u8],
    sealed: &str,
) -> Option<Zeroizing<Vec<u8>>> {
    sealer.open_bytes(&SealContext::embedded_record(table.name(), key), sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_opens_only_as_the_record_it_was_sealed_for() {
        let sealer = Sealer::new(&[9; 32], None);
        let (journeys, budgets) = (Table::new("journeys"), Table::new("budgets"));
        let sealed = seal(&sealer, journeys, b"j1", b"appkey-canary");
        assert!(!sealed.contains("canary"));
        let opened = open(&sealer, journeys, b"j1", &sealed);
        assert_eq!(
            opened.as_deref().map(Vec::as_slice),
            Some(&b"appkey-canary"[..])
        );
        assert_eq!(open(&sealer, journeys, b"j2", &sealed), None);
        assert_eq!(open(&sealer, budgets, b"j1", &sealed), None);
        assert_eq!(
            open(&Sealer::new(&[8; 32], None), journeys, b"j1", &sealed),
            None
        );
    }
}
