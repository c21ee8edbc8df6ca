//! How long certificates live and when they are renewed: the flags of
//! `webhook certs bootstrap`, with their defaults.

use std::time::Duration;

const DAY: u64 = 24 * 60 * 60;

/// Validity periods and renewal thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// How long a new CA is valid.
    pub ca_validity: Duration,
    /// How long a new serving certificate is valid (never past its CA).
    pub serving_validity: Duration,
    /// A certificate is renewed once less than this share (percent) of its validity
    /// period is left: the CA by a new CA, the serving certificate by the same CA.
    pub renew_before_percentage: u8,
    /// How long each step of a CA rotation waits: a new CA is trusted at least this long
    /// before it signs the served certificate, so every API server has the new
    /// caBundle; the old CA stays trusted at least this long after, so every webhook
    /// Pod has the new certificate (kubelet's Secret volume sync, then the reload).
    pub ca_overlap: Duration,
}

impl Default for Renewal {
    fn default() -> Self {
        Self {
            ca_validity: Duration::from_secs(3650 * DAY),
            serving_validity: Duration::from_secs(365 * DAY),
            renew_before_percentage: 33,
            ca_overlap: Duration::from_secs(60 * 60),
        }
    }
}

impl Renewal {
    /// A CA with less than this left is rotated.
    pub fn renew_ca_within(&self) -> Duration {
        share(self.ca_validity, self.renew_before_percentage)
    }

    /// A serving certificate with less than this left is renewed.
    pub fn renew_serving_within(&self) -> Duration {
        share(self.serving_validity, self.renew_before_percentage)
    }
}

fn share(validity: Duration, percent: u8) -> Duration {
    validity * u32::from(percent.min(100)) / 100
}

/// Parses a duration written as a whole number and a unit: `90s`, `10m`, `1h`, `365d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit; write e.g. 90s, 10m, 1h or 365d"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 60 * 60,
        "d" => DAY,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d")),
    };
    number
        .checked_mul(seconds)
        .filter(|&total| total > 0)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} must be more than zero and less than forever"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_a_whole_number_and_a_unit() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("3650d"), Ok(Duration::from_secs(3650 * DAY)));
        for bad in [
            "",
            "10",
            "m",
            "1.5h",
            "10w",
            "0s",
            "-1d",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_defaults_renew_a_third_before_the_end() {
        let renewal = Renewal::default();
        assert_eq!(
            renewal.renew_serving_within(),
            Duration::from_secs(365 * DAY * 33 / 100)
        );
        assert_eq!(
            renewal.renew_ca_within(),
            Duration::from_secs(3650 * DAY * 33 / 100)
        );
    }
}
