//! Benchmark programs for blobcask and the pieces they share: raw-device
//! baselines (`raw`) and the comparison against other engines (`compare`),
//! which the `compare` binary and the CLI's `bench` command both run.

pub mod compare;
pub mod raw;

/// Parses a byte size written as a number with an optional K, M, G or T
/// suffix (powers of 1024, either case): "64M", "10G", "4096".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, shift) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 10),
        Some('M') => (&s[..s.len() - 1], 20),
        Some('G') => (&s[..s.len() - 1], 30),
        Some('T') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("bad size {s:?} (use e.g. 64M or 10G)"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_parse_with_suffixes_and_refuse_garbage() {
        use super::parse_size;
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("16k"), Ok(16 << 10));
        assert_eq!(parse_size(" 64M "), Ok(64 << 20));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert!(parse_size("M").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("99999999999T").is_err(), "overflow is an error");
    }
}
