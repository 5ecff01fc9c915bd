//! `import DIR [--skip-errors]`: every file under DIR (the storing itself
//! is `load.rs`), and the exit status when files were skipped.

use std::path::{Path, PathBuf};

use crate::load;
use crate::open::open;
use crate::progress::Progress;

/// `import DIR [--skip-errors]`.
pub fn import(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    dir: &Path,
    skip_errors: &bool,
) -> Result<(), String> {
    let path = store_path()?;
    let s = open(&path)?;
    let report = load::import(&s, &path, dir, &mut Progress::new("import"))?;
    s.close().map_err(|e| e.to_string())?;
    if report.skipped > 0 && !skip_errors {
        return Err(format!(
            "{} file(s) skipped (listed above; the rest is stored); --skip-errors exits 0 for that",
            report.skipped
        ));
    }
    Ok(())
}
