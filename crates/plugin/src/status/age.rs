//! Times as `kubectl get` shows them: an age of a few significant units (`90s`, `5m30s`,
//! `3h`, `2d4h`), and a moment with its distance from now.

use jiff::Timestamp;

/// How long ago `then` was at `now`, the way kubectl prints an AGE column (its
/// `HumanDuration`): more precision while it is recent, less as it grows. A time in the
/// future (a clock ahead of this one) reads as `0s`.
pub fn age(then: Timestamp, now: Timestamp) -> String {
    human(now.as_second().saturating_sub(then.as_second()).max(0))
}

/// `seconds` in kubectl's short form.
fn human(seconds: i64) -> String {
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    let years = days / 365;
    let pair = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        pair(minutes, "m", seconds % 60, "s")
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        pair(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        pair(days, "d", hours % 24, "h")
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if years < 8 {
        pair(years, "y", days % 365, "d")
    } else {
        format!("{years}y")
    }
}

/// `moment` in UTC to the second, with how far it is from `now`:
/// `2025-03-01T03:00:00Z (5h ago)` or `2025-03-02T03:00:00Z (in 19h)`.
pub fn moment(moment: Timestamp, now: Timestamp) -> String {
    let text = moment.strftime("%Y-%m-%dT%H:%M:%SZ");
    if moment > now {
        format!("{text} (in {})", age(now, moment))
    } else {
        format!("{text} ({} ago)", age(moment, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn ages_keep_more_precision_while_recent() {
        for (seconds, shown) in [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (330, "5m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600 + 20 * 60, "3h20m"),
            (5 * 3600, "5h"),
            (30 * 3600, "30h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (200 * 86400, "200d"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(age(at(1_000), at(1_000 + seconds)), shown, "{seconds}s");
        }
    }

    #[test]
    fn a_time_ahead_of_the_clock_is_zero_seconds_old() {
        assert_eq!(age(at(100), at(50)), "0s");
    }

    #[test]
    fn a_moment_says_whether_it_is_past_or_to_come() {
        let now = at(1_740_798_000); // 2025-03-01T03:00:00Z
        assert_eq!(
            moment(at(1_740_798_000 - 5 * 3600), now),
            "2025-02-28T22:00:00Z (5h ago)"
        );
        assert_eq!(
            moment(at(1_740_798_000 + 19 * 3600), now),
            "2025-03-01T22:00:00Z (in 19h)"
        );
    }
}
