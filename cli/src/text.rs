//! How sizes and times are shown: sizes with their binary unit, the time
//! left before an expiry.

use std::time::{Duration, SystemTime};

pub fn human(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Time left until `at`, short: `29.8s`, `4m59s`, `1h59m`, `6d23h`.
pub fn time_left(at: SystemTime) -> String {
    let left = at
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    let s = left.as_secs();
    match s {
        0..60 => format!("{:.1}s", left.as_secs_f64()),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s % 3_600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3_600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_is_short() {
        let now = SystemTime::now();
        assert_eq!(time_left(now - Duration::from_secs(5)), "0.0s");
        assert_eq!(
            time_left(now + Duration::from_secs(4 * 60 + 59) + Duration::from_millis(500)),
            "4m59s"
        );
        assert_eq!(
            time_left(now + Duration::from_secs(2 * 3_600 + 90)),
            "2h01m"
        );
        assert_eq!(
            time_left(now + Duration::from_secs(7 * 86_400 + 3_700)),
            "7d01h"
        );
    }
}
