//! Tables in the layout of Python's `tabulate` "simple" format, which SONiC's CLI uses:
//! a header line, a line of dashes under each column, then the rows; columns right-aligned.

use std::fmt;

/// A table being built.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    left: bool,
}

impl Table {
    pub(crate) fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            left: false,
        }
    }

    /// Left-align every column.
    pub(crate) fn left_all(mut self) -> Self {
        self.left = true;
        self
    }

    pub(crate) fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            let mut parts = Vec::with_capacity(n);
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                parts.push(if self.left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                });
            }
            writeln!(f, "{}", parts.join("  ").trim_end())
        };
        line(f, &self.header)?;
        line(
            f,
            &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        )?;
        for r in &self.rows {
            line(f, r)?;
        }
        Ok(())
    }
}

/// `1234567` → `1,234,567` (SONiC's counters).
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sonic_layout() {
        let mut t = Table::new(["Port Rx", "PFC0", "PFC3"]);
        t.row(["Ethernet0".to_owned(), thousands(1200), thousands(203)]);
        assert_eq!(
            t.to_string(),
            "  Port Rx   PFC0  PFC3\n---------  -----  ----\nEthernet0  1,200   203\n"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
