//! The `spec.storage` quantity: whole gibibytes written as `<n>Gi`.

/// The number of gibibytes in `storage`, or `None` unless it is exactly `<digits>Gi`
/// and fits in a `u64`.
pub fn parse_gi(storage: &str) -> Option<u64> {
    let digits = storage.strip_suffix("Gi")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_gi;

    #[test]
    fn whole_gibibytes_parse() {
        assert_eq!(parse_gi("1Gi"), Some(1));
        assert_eq!(parse_gi("100Gi"), Some(100));
        assert_eq!(parse_gi("007Gi"), Some(7));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "Gi",
            "10",
            "10G",
            "10GB",
            "100Mi",
            "1.5Gi",
            "-1Gi",
            " 1Gi",
            "1Gi ",
            "99999999999999999999999Gi",
        ] {
            assert_eq!(parse_gi(bad), None, "{bad:?}");
        }
    }
}
