//! A cache store's eviction, as the commit path applies it: the victim's
//! key found in its tuple block's image (the index holds ids, and the hash
//! backend no keys), then an ordinary delete of that key, conditional on
//! the version chosen (step 2 of `commit`'s module doc). Nothing new is
//! written: after a crash an eviction is a delete like any other
//! (invariants 1 and 4).

use super::Committer;
use crate::error::{Error, ErrorKind, Result};
use crate::index::EntryId;
use crate::store::evict::{is_held, Evicted};

impl Committer {
    /// Deletes entry `id` if it still holds `version` and no read holds its
    /// pieces (checked again here, in commit order: a read may have begun
    /// since the victim was chosen).
    pub(super) async fn apply_evict(&mut self, id: EntryId, version: u64) -> Result<Evicted> {
        let found = {
            let st = self.shared.state.read();
            match st.entry(id).filter(|e| e.version == version) {
                None => return Ok(Evicted::Moved),
                Some(e) if is_held(e) => return Ok(Evicted::Held),
                Some(e) => (e.block, e.size()),
            }
        };
        let (block, size) = found;
        self.load_image(block).await?;
        // Versions are unique in the store: this is the entry's tuple.
        let key = self
            .table
            .images
            .get(&block)
            .and_then(|image| image.iter().find(|t| t.version == version))
            .map(|t| t.key.clone())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!("tuple block {block} lacks the tuple of the entry to evict"),
                )
            })?;
        self.apply_delete(&key, Some(version)).await?;
        let st = self.shared.state.read();
        if st.entry(id).is_some_and(|e| e.version == version) {
            return Ok(Evicted::Moved);
        }
        st.remember_evicted(&key);
        Ok(Evicted::Gone(size))
    }
}
