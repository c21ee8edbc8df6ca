//! Engine versions: the `MAJOR[.MINOR[.PATCH]]` format, the one table of release series
//! the operator supports per engine, the series past their end of life, and which
//! version changes each engine makes to its data in place.

use crate::Engine;

/// A parsed `spec.version`: digits only, one to three parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: Option<u32>,
    pub patch: Option<u32>,
}

impl Version {
    /// Parses `MAJOR[.MINOR[.PATCH]]` where each part is ASCII digits that fit a `u32`,
    /// written without leading zeros (`16.4`, not `016` or `16.04`): the version is the
    /// image tag, and only that spelling names an image.
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
    if part.len() > 1 && part.starts_with('0') {
        return None;
    }
    part.parse().ok()
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.major)?;
        if let Some(minor) = self.minor {
            write!(f, ".{minor}")?;
        }
        if let Some(patch) = self.patch {
            write!(f, ".{patch}")?;
        }
        Ok(())
    }
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
/// whose releases are named `MAJOR.MINOR` (moving mysql 8.4 back to 8.0, or 9.3 back to
/// 9.2, is a downgrade of the series, which the engine cannot do in place).
pub fn series_rank(engine: Engine, version: Version) -> (u32, u32) {
    if minor_names_series(engine) {
        (version.major, version.minor.unwrap_or(0))
    } else {
        (version.major, 0)
    }
}

/// Release series whose upstream support has ended, with when: the image is no longer
/// built and gets no fixes. mysql's innovation releases before 9.7 are each superseded by
/// the next one.
const END_OF_LIFE: [(Engine, u32, Option<u32>, &str); 4] = [
    (Engine::Postgres, 13, None, "November 2025"),
    (Engine::Mysql, 8, Some(0), "April 2026"),
    (Engine::Mongodb, 6, Some(0), "July 2025"),
    // 9.0 to 9.6: matched by major 9 with a minor below the 9.7 LTS (see end_of_life).
    (
        Engine::Mysql,
        9,
        None,
        "the release of the 9.7 LTS series (April 2026)",
    ),
];

/// mysql's long-term support series: an upgrade may not skip one.
const MYSQL_LTS: [(u32, u32); 3] = [(8, 0), (8, 4), (9, 7)];

/// When `version`'s series reached its end of life, if it did.
pub fn end_of_life(engine: Engine, version: Version) -> Option<&'static str> {
    END_OF_LIFE
        .iter()
        .find(|(e, major, minor, _)| {
            *e == engine
                && *major == version.major
                && match (engine, minor) {
                    (Engine::Mysql, None) => version.minor.is_some_and(|m| m < 7),
                    (_, Some(minor)) => version.minor == Some(*minor),
                    (_, None) => true,
                }
        })
        .map(|(_, _, _, when)| *when)
}

/// What a version change does to the data already on the volumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The same series (a patch or minor release the engine runs on the same files).
    WithinSeries,
    /// An upgrade the engine performs on its data in place when it starts.
    InPlaceUpgrade,
    /// A major upgrade the new version cannot make to the old files: the operator dumps
    /// the data, starts the new version in a directory of its own and restores the dump
    /// there, keeping the old directory to go back to.
    DumpAndRestore,
    /// A change the engine cannot make to its data: the reason, as a sentence.
    Refused(String),
}

/// What moving `engine`'s data from `from` to `to` means.
pub fn change(engine: Engine, from: Version, to: Version) -> Change {
    let (before, after) = (series_rank(engine, from), series_rank(engine, to));
    if before == after {
        return Change::WithinSeries;
    }
    if after < before {
        return Change::Refused(format!(
            "may not move back from {from} to {to}: {engine} cannot read data written by a newer release series"
        ));
    }
    match engine {
        // The official image carries one major's binaries, so pg_upgrade (which needs
        // both) cannot run in it.
        Engine::Postgres => Change::DumpAndRestore,
        Engine::Mysql => {
            let (from_series, to_series) = (mysql_series(from), mysql_series(to));
            match MYSQL_LTS
                .iter()
                .find(|lts| from_series < **lts && **lts < to_series)
            {
                Some((major, minor)) => Change::Refused(format!(
                    "mysql cannot upgrade in place from {}.{} to {}.{}: an upgrade may not skip the {major}.{minor} long-term support series; move to {major}.{minor} first",
                    from_series.0, from_series.1, to_series.0, to_series.1
                )),
                None => Change::InPlaceUpgrade,
            }
        }
        Engine::Mongodb if to.major == from.major + 1 => Change::InPlaceUpgrade,
        Engine::Mongodb => Change::Refused(format!(
            "mongodb upgrades one major version at a time: move from {}.0 to {}.0 first",
            from.major,
            from.major + 1
        )),
    }
}

/// mysql's release series of a version: `MAJOR.MINOR` (a missing minor counts as 0).
fn mysql_series(version: Version) -> (u32, u32) {
    (version.major, version.minor.unwrap_or(0))
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
            "016",
            "16.04",
            "7.00",
            "00",
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
    fn a_single_zero_is_a_part_but_a_leading_zero_is_not() {
        assert_eq!(v("7.0").minor, Some(0));
        assert_eq!(v("16.0.0").to_string(), "16.0.0");
        assert_eq!(Version::parse("16.04"), None);
    }

    #[test]
    fn series_past_their_end_of_life_are_named_with_when() {
        assert_eq!(
            end_of_life(Engine::Postgres, v("13.4")),
            Some("November 2025")
        );
        assert_eq!(end_of_life(Engine::Postgres, v("14")), None);
        assert_eq!(end_of_life(Engine::Mongodb, v("6.0.5")), Some("July 2025"));
        assert_eq!(end_of_life(Engine::Mongodb, v("7.0")), None);
        assert_eq!(end_of_life(Engine::Mysql, v("8.0.40")), Some("April 2026"));
        assert!(end_of_life(Engine::Mysql, v("9.3")).is_some());
        assert_eq!(end_of_life(Engine::Mysql, v("9.7")), None);
        assert_eq!(end_of_life(Engine::Mysql, v("8.4")), None);
    }

    #[test]
    fn postgres_moves_a_major_forward_by_dump_and_restore_and_never_back() {
        assert_eq!(
            change(Engine::Postgres, v("16.1"), v("16.4")),
            Change::WithinSeries
        );
        assert_eq!(
            change(Engine::Postgres, v("16.4"), v("16.1")),
            Change::WithinSeries
        );
        for (from, to) in [("13", "17"), ("17", "18"), ("16", "17")] {
            assert_eq!(
                change(Engine::Postgres, v(from), v(to)),
                Change::DumpAndRestore,
                "{from} to {to}"
            );
        }
        assert!(matches!(
            change(Engine::Postgres, v("17"), v("16")),
            Change::Refused(_)
        ));
    }

    #[test]
    fn mysql_upgrades_in_place_without_skipping_a_long_term_series() {
        for (from, to) in [
            ("8.0", "8.4"),
            ("8.4", "9.2"),
            ("8.4", "9.7"),
            ("9.2", "9.5"),
            ("9.5", "9.7"),
            ("8.0.36", "8.0.40"),
        ] {
            assert_ne!(
                std::mem::discriminant(&change(Engine::Mysql, v(from), v(to))),
                std::mem::discriminant(&Change::Refused(String::new())),
                "{from} to {to}"
            );
        }
        for (from, to, lts) in [("8.0", "9.1", "8.4"), ("8.0", "9.7", "8.4")] {
            let Change::Refused(reason) = change(Engine::Mysql, v(from), v(to)) else {
                panic!("{from} to {to} must be refused");
            };
            assert!(reason.contains(&format!("move to {lts} first")), "{reason}");
        }
        assert!(matches!(
            change(Engine::Mysql, v("8.4"), v("8.0")),
            Change::Refused(_)
        ));
        assert!(matches!(
            change(Engine::Mysql, v("9.3"), v("9.2")),
            Change::Refused(_)
        ));
    }

    #[test]
    fn mongodb_upgrades_one_major_at_a_time_and_never_back() {
        assert_eq!(
            change(Engine::Mongodb, v("6.0"), v("7.0")),
            Change::InPlaceUpgrade
        );
        assert_eq!(
            change(Engine::Mongodb, v("7.0.2"), v("7.0.14")),
            Change::WithinSeries
        );
        let Change::Refused(reason) = change(Engine::Mongodb, v("6.0"), v("8.0")) else {
            panic!("6.0 to 8.0 must be refused");
        };
        assert!(reason.contains("from 6.0 to 7.0 first"), "{reason}");
        assert!(matches!(
            change(Engine::Mongodb, v("8.0"), v("7.0")),
            Change::Refused(_)
        ));
    }

    #[test]
    fn supported_lists_read_like_the_documentation() {
        assert_eq!(supported_list(Engine::Postgres), "13, 14, 15, 16, 17, 18");
        assert_eq!(supported_list(Engine::Mysql), "8.0, 8.4, 9.x");
        assert_eq!(supported_list(Engine::Mongodb), "6.0, 7.0, 8.0");
    }
}
