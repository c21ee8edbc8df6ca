//! Kubernetes resource quantities (`512Mi`, `1.5G`, `250m`, `2`), read as numbers so
//! requests can be compared with limits and engine settings sized from them.

/// The value of a quantity in its base unit (bytes, cores), or `None` when it is not a
/// quantity the API server would accept.
pub fn parse(quantity: &str) -> Option<f64> {
    let quantity = quantity.trim();
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    if number.is_empty() || number.starts_with('-') {
        return None;
    }
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            10f64.powi(digits.parse().ok()?)
        }
    };
    Some(number * scale).filter(|v| v.is_finite())
}

/// A memory quantity in whole bytes.
pub fn bytes(quantity: &str) -> Option<u64> {
    // Quantities are whole bytes in practice; a fraction of a byte rounds up.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    parse(quantity).map(|v| v.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_decimal_milli_and_exponent_forms() {
        assert_eq!(bytes("512Mi"), Some(512 * 1024 * 1024));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("2G"), Some(2_000_000_000));
        assert_eq!(bytes("1e9"), Some(1_000_000_000));
        assert_eq!(bytes("1048576"), Some(1_048_576));
        assert_eq!(parse("250m"), Some(0.25));
        assert_eq!(parse("2"), Some(2.0));
    }

    #[test]
    fn what_is_not_a_quantity_is_none() {
        for bad in ["", "Gi", "1GB", "-1Gi", "1 Gi x", "lots", "1e"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
