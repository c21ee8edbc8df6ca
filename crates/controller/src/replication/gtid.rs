//! mysql GTID sets (`uuid:1-5:7,uuid2:1-3`): how many transactions a set holds, and
//! whether one set holds another. The controller compares instances' histories with
//! these: a replica whose history is not part of the primary's (or that misses what the
//! primary no longer keeps in its binary log) cannot follow it and is cloned anew.

use std::collections::BTreeMap;

/// A set of transactions, per source server: sorted, disjoint, inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GtidSet {
    ranges: BTreeMap<String, Vec<(u64, u64)>>,
}

impl GtidSet {
    /// Parses the text mysql prints (whitespace and line breaks allowed, case of the
    /// uuid ignored). `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut set = Self::default();
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        for member in compact.split(',').filter(|m| !m.is_empty()) {
            let mut parts = member.split(':');
            let uuid = parts.next()?.to_ascii_lowercase();
            if uuid.len() != 36 || !uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                return None;
            }
            for interval in parts {
                let (start, end) = if let Some((start, end)) = interval.split_once('-') {
                    (start.parse().ok()?, end.parse().ok()?)
                } else {
                    let single = interval.parse().ok()?;
                    (single, single)
                };
                if start == 0 || end < start {
                    return None;
                }
                set.ranges
                    .entry(uuid.clone())
                    .or_default()
                    .push((start, end));
            }
        }
        for ranges in set.ranges.values_mut() {
            *ranges = merged(std::mem::take(ranges));
        }
        Some(set)
    }

    /// How many transactions the set holds.
    pub fn count(&self) -> u64 {
        self.ranges
            .values()
            .flatten()
            .map(|(start, end)| end - start + 1)
            .sum()
    }

    /// Every transaction of `self` and of `other`.
    pub fn union(&self, other: &Self) -> Self {
        let mut ranges = self.ranges.clone();
        for (uuid, theirs) in &other.ranges {
            let mine = ranges.entry(uuid.clone()).or_default();
            mine.extend(theirs);
            *mine = merged(std::mem::take(mine));
        }
        Self { ranges }
    }

    /// Whether every transaction of `self` is in `other`.
    pub fn is_subset_of(&self, other: &Self) -> bool {
        self.ranges.iter().all(|(uuid, mine)| {
            let theirs = other.ranges.get(uuid).map_or(&[][..], Vec::as_slice);
            mine.iter()
                .all(|&(start, end)| theirs.iter().any(|&(from, to)| from <= start && end <= to))
        })
    }
}

/// Sorted ranges with overlapping and adjacent ones joined.
fn merged(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= last.1.saturating_add(1) => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn set(text: &str) -> GtidSet {
        GtidSet::parse(text).expect("a GTID set")
    }

    #[test]
    fn counts_every_range_of_every_source() {
        assert_eq!(set("").count(), 0);
        assert_eq!(set(&format!("{A}:1-5:7")).count(), 6);
        assert_eq!(set(&format!("{A}:1-5,\n{B}:1-3")).count(), 8);
        assert_eq!(
            set(&format!("{A}:1-5:3-9")).count(),
            9,
            "overlaps count once"
        );
    }

    #[test]
    fn a_replica_behind_or_equal_is_a_subset_and_one_with_its_own_writes_is_not() {
        let primary = set(&format!("{A}:1-100,{B}:1-3"));
        assert!(set(&format!("{A}:1-40")).is_subset_of(&primary));
        assert!(set(&format!("{A}:1-100,{B}:1-3")).is_subset_of(&primary));
        assert!(set("").is_subset_of(&primary));
        assert!(!set(&format!("{A}:1-101")).is_subset_of(&primary));
        assert!(
            !set(&format!(
                "{A}:1-40,{}:1",
                "5e11fa47-71ca-11e1-9e33-c80aa9429562"
            ))
            .is_subset_of(&primary),
            "a transaction of its own"
        );
        assert!(set(&format!("{A}:1-50")).is_subset_of(&set(&format!("{A}:1-20:21-60"))));
    }

    #[test]
    fn union_joins_adjacent_ranges() {
        let joined = set(&format!("{A}:1-5")).union(&set(&format!("{A}:6-9,{B}:2")));
        assert_eq!(joined, set(&format!("{A}:1-9,{B}:2")));
        assert_eq!(joined.count(), 10);
    }

    #[test]
    fn upper_case_uuids_and_line_breaks_are_the_same_set() {
        assert_eq!(
            set(&format!("{}:1-3,\n{B}:4", A.to_uppercase())),
            set(&format!("{A}:1-3,{B}:4"))
        );
    }

    #[test]
    fn nonsense_is_no_set() {
        for text in [
            "NULL",
            "abc:1-2",
            &format!("{A}:5-1"),
            &format!("{A}:0"),
            &format!("{A}:x"),
        ] {
            assert_eq!(GtidSet::parse(text), None, "{text}");
        }
    }
}
