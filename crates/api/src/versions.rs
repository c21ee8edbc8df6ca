//! Engine versions: the `MAJOR[.MINOR[.PATCH]]` format and the one table of release
//! series the operator supports per engine.

use crate::Engine;

/// A parsed `spec.version`: digits only, one to three parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: Option<u32>,
    pub patch: Option<u32>,
}

impl Version {
    /// Parses `MAJOR[.MINOR[.PATCH]]` where each part is ASCII digits that fit a `u32`.
    pub fn parse(text: &str) -> Option<Self> {
        let parts: Vec<u32> = text.split('.').map(number).collect::<Option<_>>()?;
        if parts.len() > 3 {
            return None;
        }
        Some(Self {
            major: *parts.first()?,
            minor: parts.get(1).copied(),
            patch: parts.get(2).copied(),
        })
    }
}

fn number(part: &str) -> Option<u32> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// One supported release series: a major version, and for engines whose series are
/// named by `MAJOR.MINOR` (mysql 8.0 and 8.4, mongodb 7.0) the minor as well.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Series {
    pub major: u32,
    /// `None` when every minor of `major` belongs to the series (postgres 16, mysql 9).
    pub minor: Option<u32>,
}

impl std::fmt::Display for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.minor {
            Some(minor) => write!(f, "{}.{minor}", self.major),
            None => write!(f, "{}", self.major),
        }
    }
}

const fn major(major: u32) -> Series {
    Series { major, minor: None }
}

const fn minor(major: u32, minor: u32) -> Series {
    Series {
        major,
        minor: Some(minor),
    }
}

/// The release series the operator runs, per engine. Postgres numbers its majors 13,
/// 14, ...; mysql ships the 8.0 and 8.4 LTS series and the 9.x innovation line; mongodb
/// names each major `N.0`.
pub const SUPPORTED: [(Engine, &[Series]); 3] = [
    (
        Engine::Postgres,
        &[
            major(13),
            major(14),
            major(15),
            major(16),
            major(17),
            major(18),
        ],
    ),
    (Engine::Mysql, &[minor(8, 0), minor(8, 4), major(9)]),
    (Engine::Mongodb, &[minor(6, 0), minor(7, 0), minor(8, 0)]),
];

/// The supported series of `engine`, oldest first.
pub fn supported(engine: Engine) -> &'static [Series] {
    SUPPORTED
        .iter()
        .find(|(e, _)| *e == engine)
        .map_or(&[], |(_, series)| *series)
}

/// The supported series `version` belongs to, if any.
pub fn series_of(engine: Engine, version: Version) -> Option<Series> {
    supported(engine).iter().copied().find(|series| {
        series.major == version.major && series.minor.is_none_or(|m| version.minor == Some(m))
    })
}

/// Whether `engine` names its series by `MAJOR.MINOR` (mysql 8.4, mongodb 7.0) rather
/// than by the major alone (postgres 16).
fn minor_names_series(engine: Engine) -> bool {
    supported(engine).iter().any(|s| s.minor.is_some())
}

/// Where a version sits for upgrade ordering: the major, then the minor for engines
/// whose series are `MAJOR.MINOR` (moving mysql 8.4 back to 8.0 is a downgrade of the
/// series, which the engine cannot do in place).
pub fn series_rank(engine: Engine, version: Version) -> (u32, u32) {
    if minor_names_series(engine) {
        (version.major, version.minor.unwrap_or(0))
    } else {
        (version.major, 0)
    }
}

/// The supported series of `engine` as a list for messages: `13, 14, 15` or
/// `8.0, 8.4, 9.x`.
pub fn supported_list(engine: Engine) -> String {
    let any_minor_suffix = if minor_names_series(engine) { ".x" } else { "" };
    supported(engine)
        .iter()
        .map(|s| match s.minor {
            Some(_) => s.to_string(),
            None => format!("{s}{any_minor_suffix}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).expect("well formed")
    }

    #[test]
    fn one_to_three_digit_parts_parse() {
        assert_eq!(
            v("16"),
            Version {
                major: 16,
                minor: None,
                patch: None
            }
        );
        assert_eq!(v("8.4").minor, Some(4));
        assert_eq!(v("7.0.12").patch, Some(12));
    }

    #[test]
    fn anything_but_dotted_digits_is_malformed() {
        for bad in [
            "",
            ".",
            "16.",
            ".16",
            "16..1",
            "1.2.3.4",
            "v16",
            "16.4-alpine",
            "latest",
            " 16",
            "+1",
            "-1",
            "99999999999",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn postgres_supports_majors_13_to_18_with_any_minor() {
        for good in ["13", "14.2", "15.4", "16.4", "17.0", "18.1"] {
            assert!(series_of(Engine::Postgres, v(good)).is_some(), "{good}");
        }
        for bad in ["12.9", "19", "9.6"] {
            assert!(series_of(Engine::Postgres, v(bad)).is_none(), "{bad}");
        }
    }

    #[test]
    fn mysql_supports_the_8_0_and_8_4_series_and_every_9_x() {
        for good in ["8.0", "8.0.39", "8.4", "8.4.2", "9", "9.1", "9.3.0"] {
            assert!(series_of(Engine::Mysql, v(good)).is_some(), "{good}");
        }
        for bad in ["8", "8.1", "8.3.0", "5.7", "10.0"] {
            assert!(series_of(Engine::Mysql, v(bad)).is_none(), "{bad}");
        }
    }

    #[test]
    fn mongodb_supports_6_0_7_0_and_8_0() {
        for good in ["6.0", "7.0.14", "8.0"] {
            assert!(series_of(Engine::Mongodb, v(good)).is_some(), "{good}");
        }
        for bad in ["7", "7.1", "5.0", "9.0"] {
            assert!(series_of(Engine::Mongodb, v(bad)).is_none(), "{bad}");
        }
    }

    #[test]
    fn series_rank_counts_the_minor_only_where_it_names_the_series() {
        assert_eq!(
            series_rank(Engine::Postgres, v("16.4")),
            series_rank(Engine::Postgres, v("16.1"))
        );
        assert!(series_rank(Engine::Mysql, v("8.0")) < series_rank(Engine::Mysql, v("8.4")));
        assert!(series_rank(Engine::Mongodb, v("7.0")) < series_rank(Engine::Mongodb, v("8.0")));
    }

    #[test]
    fn supported_lists_read_like_the_documentation() {
        assert_eq!(supported_list(Engine::Postgres), "13, 14, 15, 16, 17, 18");
        assert_eq!(supported_list(Engine::Mysql), "8.0, 8.4, 9.x");
        assert_eq!(supported_list(Engine::Mongodb), "6.0, 7.0, 8.0");
    }
}
