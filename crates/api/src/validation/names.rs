//! The Kubernetes name rules the new fields need: DNS subdomains, qualified names (label
//! and annotation keys) and label values.

/// A DNS-1123 subdomain: at most 253 characters of lowercase letters, digits, '-' and
/// '.', each dot-separated part starting and ending with a letter or digit.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|part| {
            let bytes = part.as_bytes();
            matches!((bytes.first(), bytes.last()), (Some(f), Some(l)) if f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric())
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

/// What is wrong with a label or annotation key (`[prefix/]name`), if anything.
pub fn qualified_name_problem(key: &str) -> Option<&'static str> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return Some("must have a DNS subdomain as its prefix (before the '/')");
    }
    if name.is_empty() || name.len() > 63 || !is_label_word(name) {
        return Some(
            "must be at most 63 letters, digits, '-', '_' or '.' after any prefix, starting and ending with a letter or digit",
        );
    }
    None
}

/// What is wrong with a label value, if anything (an empty value is allowed).
pub fn label_value_problem(value: &str) -> Option<&'static str> {
    (value.len() > 63 || !(value.is_empty() || is_label_word(value))).then_some(
        "must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    )
}

fn is_label_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    matches!((bytes.first(), bytes.last()), (Some(f), Some(l)) if f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keys_and_values() {
        assert!(is_dns_subdomain("fast-ssd"));
        assert!(is_dns_subdomain("ebs.csi.aws.com"));
        assert!(!is_dns_subdomain("Fast"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(qualified_name_problem("team").is_none());
        assert!(qualified_name_problem("example.com/team").is_none());
        assert!(qualified_name_problem("Example.com/team").is_some());
        assert!(qualified_name_problem("example.com/").is_some());
        assert!(label_value_problem("").is_none());
        assert!(label_value_problem("blue_1.a").is_none());
        assert!(label_value_problem("-x").is_some());
        assert!(label_value_problem(&"x".repeat(64)).is_some());
    }
}
