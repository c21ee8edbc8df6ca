//! A backup schedule: a standard cron expression of five fields, read in UTC.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A parsed `spec.backup.schedule`.
#[derive(Clone, Debug)]
pub struct Schedule(Cron);

impl Schedule {
    /// Parses a five-field cron expression (minute, hour, day of month, month, day of
    /// week) or a nickname such as `@daily`; the error is a sentence for the user.
    pub fn parse(expression: &str) -> Result<Self, String> {
        let fields = expression.split_whitespace().count();
        if !expression.trim_start().starts_with('@') && fields != 5 {
            return Err(format!(
                "must have five fields (minute, hour, day of month, month, day of week), not {fields}"
            ));
        }
        CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map(Self)
            .map_err(|err| format!("is not a cron expression: {err}"))
    }

    /// The first time the schedule fires strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let zoned = after.to_zoned(TimeZone::UTC);
        self.0
            .find_next_occurrence(&zoned, false)
            .ok()
            .map(|next| next.timestamp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn a_daily_schedule_fires_once_a_day_at_its_time_in_utc() {
        let daily = Schedule::parse("0 3 * * *").expect("valid");
        assert_eq!(
            daily.next_after(at("2026-12-05T01:00:00Z")),
            Some(at("2026-12-05T03:00:00Z"))
        );
        assert_eq!(
            daily.next_after(at("2026-12-05T03:00:00Z")),
            Some(at("2026-12-06T03:00:00Z")),
            "strictly after"
        );
    }

    #[test]
    fn steps_and_nicknames_are_understood() {
        let every_five = Schedule::parse("*/5 * * * *").expect("valid");
        assert_eq!(
            every_five.next_after(at("2026-12-05T01:02:03Z")),
            Some(at("2026-12-05T01:05:00Z"))
        );
        let hourly = Schedule::parse("@hourly").expect("valid");
        assert_eq!(
            hourly.next_after(at("2026-12-05T01:02:03Z")),
            Some(at("2026-12-05T02:00:00Z"))
        );
    }

    #[test]
    fn anything_but_five_fields_is_refused_with_the_reason() {
        let seconds = Schedule::parse("0 0 3 * * *").expect_err("six fields");
        assert!(seconds.contains("five fields"), "{seconds}");
        assert!(Schedule::parse("61 * * * *").is_err());
        assert!(Schedule::parse("every day").is_err());
    }
}
