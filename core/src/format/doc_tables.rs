//! FORMAT.md's layout tables, read by the tests that hold the named offsets
//! of each on-disk structure to the document (and the document to them).

/// The format document, as compiled into the tests.
const FORMAT_MD: &str = include_str!("../../FORMAT.md");

/// The rows (offset, size column) of the first `| offset | size | field |`
/// table after the line that starts with `heading`; panics (failing
/// the test) when the heading or the table is missing.
pub(crate) fn rows(heading: &str) -> Vec<(usize, String)> {
    let after = FORMAT_MD
        .split_once(&format!("\n{heading}"))
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("FORMAT.md has no line starting {heading:?}"));
    let table = after
        .split_once("| offset | size | field |")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no layout table after {heading:?}"));
    table
        .lines()
        .skip(2) // the rest of the header line, and the |---| line
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let offset = cells[1]
                .parse()
                .unwrap_or_else(|_| panic!("offset {:?} in {heading:?}", cells[1]));
            (offset, cells[2].to_string())
        })
        .collect()
}

/// Asserts that the document's table after `heading` and the code's
/// named fields (offset, size as the document writes it) are the same
/// list, in both directions.
pub(crate) fn assert_matches(heading: &str, fields: &[(&str, usize, &str)]) {
    let doc = rows(heading);
    for (name, offset, size) in fields {
        assert!(
            doc.iter().any(|(o, s)| o == offset && s == size),
            "{heading}: {name} is at {offset} ({size} bytes) in the code; FORMAT.md's table: {doc:?}"
        );
    }
    for (offset, size) in &doc {
        assert!(
            fields.iter().any(|(_, o, s)| o == offset && s == size),
            "{heading}: FORMAT.md has a field at {offset} ({size}) that no named offset declares"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::assert_matches;
    use crate::format::*;

    #[test]
    fn superblock_offsets_match_format_md() {
        let extents = format!("{SB_EXTENT_LEN} × n");
        assert_matches(
            "## Superblock",
            &[
                ("SUPER_MAGIC", 0, "8"),
                ("SB_VERSION", SB_VERSION, "4"),
                ("SB_BLOCK_SIZE", SB_BLOCK_SIZE, "4"),
                ("SB_CAPACITY", SB_CAPACITY, "8"),
                ("SB_MAX_ORDER", SB_MAX_ORDER, "1"),
                ("SB_STORE_ID", SB_STORE_ID, "8"),
                ("SB_SEQ", SB_SEQ, "8"),
                ("SB_CREATED", SB_CREATED, "8"),
                ("SB_EXTENT_COUNT", SB_EXTENT_COUNT, "2"),
                ("SB_CLEAN_SEQ", SB_CLEAN_SEQ, "8"),
                ("SB_EXTENTS", SB_EXTENTS, &extents),
                ("SB_SETTINGS_FLAGS", SB_SETTINGS_FLAGS, "1"),
                ("SB_SETTINGS_INDEX", SB_SETTINGS_INDEX, "1"),
                ("SB_SETTINGS_INLINE", SB_SETTINGS_INLINE, "2"),
                ("SB_SETTINGS_MAX_CAPACITY", SB_SETTINGS_MAX_CAPACITY, "8"),
                (
                    "SB_SETTINGS_ASKED_CAPACITY",
                    SB_SETTINGS_ASKED_CAPACITY,
                    "8",
                ),
                ("SB_JOURNAL", SB_JOURNAL, "9"),
                ("SB_EXTENT_TABLE", SB_EXTENT_TABLE, "9"),
                ("SB_INDEX_IMAGE", SB_INDEX_IMAGE, "17"),
                ("SB_CHANGE_MAP", SB_CHANGE_MAP, "9"),
                ("SB_CRC", SB_CRC, "4"),
            ],
        );
        // The extent list ends where the settings record starts.
        assert_eq!(SB_EXTENTS + MAX_META_EXTENTS * SB_EXTENT_LEN, SB_SETTINGS);
    }

    #[test]
    fn extent_table_offsets_match_format_md() {
        let entries = format!("{SB_EXTENT_LEN} × n");
        assert_matches(
            "### Extent table",
            &[
                ("EXTENT_TABLE_MAGIC", 0, "8"),
                ("XT_STORE_ID", XT_STORE_ID, "8"),
                ("XT_COUNT", XT_COUNT, "4"),
                ("XT_CRC", XT_CRC, "4"),
                ("XT_ENTRIES", XT_ENTRIES, &entries),
            ],
        );
    }
}
