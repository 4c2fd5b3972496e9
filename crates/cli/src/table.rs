//! Tables in the layout of Python's `tabulate` "simple" format, which SONiC's CLI uses:
//! a header line, a line of dashes under each column, then the rows; columns right-aligned.
//! As in tabulate, a column is at least its header plus 2 (`MIN_PADDING`) wide: SONiC's
//! `PFC0` column is 6 dashes wide even when every value is `0`.

use std::fmt;

/// Room tabulate leaves around a header (`tabulate.MIN_PADDING`).
const MIN_PADDING: usize = 2;

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
        let mut widths: Vec<usize> = self
            .header
            .iter()
            .map(|h| h.chars().count() + MIN_PADDING)
            .collect();
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
        // `show pfc counters` (sonic-buffer-model.md §5.1).
        let mut t = Table::new(
            std::iter::once("Port Rx".to_owned()).chain((0..8).map(|p| format!("PFC{p}"))),
        );
        t.row(
            std::iter::once("Ethernet0".to_owned())
                .chain([1200, 201, 202, 203, 204, 205, 206, 207].map(thousands)),
        );
        assert_eq!(
            t.to_string(),
            "  Port Rx    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7\n\
             ---------  ------  ------  ------  ------  ------  ------  ------  ------\n\
             Ethernet0   1,200     201     202     203     204     205     206     207\n"
        );
        // `show pfcwd stats` (§4.6): the header sets the width when values are shorter.
        let mut t = Table::new(["QUEUE", "STATUS", "STORM DETECTED/RESTORED", "TX OK/DROP"]);
        t.row(["Ethernet0:3", "stormed", "1/0", "100/300"]);
        t.row(["Ethernet4:3", "operational", "2/2", "100/100"]);
        assert_eq!(
            t.to_string(),
            "      QUEUE       STATUS    STORM DETECTED/RESTORED    TX OK/DROP\n\
             -----------  -----------  -------------------------  ------------\n\
             Ethernet0:3      stormed                        1/0       100/300\n\
             Ethernet4:3  operational                        2/2       100/100\n"
        );
        // `show pfc priority` (§5.2), left-aligned.
        let mut t = Table::new(["Interface", "Lossless priorities"]).left_all();
        t.row(["Ethernet0", "3,4"]);
        assert_eq!(
            t.to_string(),
            "Interface    Lossless priorities\n\
             -----------  ---------------------\n\
             Ethernet0    3,4\n"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
