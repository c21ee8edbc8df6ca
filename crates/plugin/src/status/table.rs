//! Columns lined up as `kubectl get` lines them up: each as wide as its widest cell,
//! three spaces apart, the last one not padded.

use std::fmt::Write as _;

/// `headers` and `rows` as aligned lines, each ending in a newline.
pub fn table<const N: usize>(headers: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = headers.map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header = headers.map(str::to_owned);
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let rows = [
            ["orders-0".to_owned(), "Primary".to_owned(), "-".to_owned()],
            [
                "orders-10".to_owned(),
                "Replica".to_owned(),
                "12 bytes".to_owned(),
            ],
        ];
        assert_eq!(
            table(["NAME", "ROLE", "LAG"], &rows),
            "NAME        ROLE      LAG\n\
             orders-0    Primary   -\n\
             orders-10   Replica   12 bytes\n"
        );
    }

    #[test]
    fn an_empty_last_cell_leaves_no_trailing_spaces() {
        let rows = [["a".to_owned(), String::new()]];
        assert_eq!(table(["X", "MESSAGE"], &rows), "X   MESSAGE\na\n");
    }
}
