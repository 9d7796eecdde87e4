//! Durations as people type them, for every flag and variable that takes
//! one (`--ttl`, `--connect-timeout`, `--grace`, `--once`, a soak's
//! `--duration`).

use std::time::Duration;

/// Parses `10s`, `1500ms`, `1m30s` (humantime's units), or a bare number
/// of seconds. Leading and trailing blanks are ignored.
///
/// # Errors
/// Why the text is not a duration, quoting it: a negative sign, an
/// unknown unit, a number too large for a duration.
///
/// ```
/// use std::time::Duration;
/// use elect::config::parse_duration;
///
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
/// assert!(parse_duration("-1s").unwrap_err().contains("negative"));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!(
            "{text:?} is negative: a duration is like 10s or 500ms"
        ));
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration like 10s or 500ms ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_s_durations() {
        assert_eq!(parse_duration(" 500ms "), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in [
            "",
            "soon",
            "-1s",
            "1.5.3s",
            "99999999999999999999999s",
            "10 parsecs",
        ] {
            let why = parse_duration(bad).unwrap_err();
            assert!(why.contains(&format!("{:?}", bad.trim())), "{bad}: {why}");
        }
    }
}
