//! SONiC CONFIG_DB JSON in and out: [`import`] turns a `config_db.json` into a headroom TOML
//! configuration, [`export`] turns a resolved [`crate::Config`] into CONFIG_DB JSON.
//!
//! The mapping, table by table and field by field, is in docs/sonic.md. In short: `PORT`,
//! `CABLE_LENGTH`, `BUFFER_POOL`, `BUFFER_PROFILE`, `BUFFER_PG`, `BUFFER_QUEUE`,
//! `PORT_QOS_MAP`, the six map tables, `WRED_PROFILE`, `SCHEDULER`, `QUEUE`, `PFC_WD`,
//! `DEVICE_METADATA|localhost` (buffer model, platform), `LOSSLESS_TRAFFIC_PATTERN` and
//! `DEFAULT_LOSSLESS_BUFFER_PARAMETER` become the headroom keys of the same meaning; a table or
//! field headroom does not model is named once in a warning, never dropped silently; a bad value
//! is refused with the JSON path of the field (`.BUFFER_PROFILE."x".dynamic_th`), the line it is
//! on, and the reason.
//!
//! Range checks are headroom's own: the importer writes the TOML, the configuration parser checks
//! it, and each of its findings is reported at the JSON field the TOML key came from (the importer
//! records where every key it writes came from).

mod export;
mod import;

use core::fmt;

pub use export::{export, Exported};
pub use import::{import, ImportOptions, Imported, PgProfileLookup};

/// One problem found in a CONFIG_DB file (or in the options of the import).
///
/// `Display` renders `file:line: path: message`, without the line when it is not known and
/// without the path when the problem is about the whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SonicDiagnostic {
    /// The file name as given in [`ImportOptions::source`] (or the option's name, `--map`).
    pub file: String,
    /// 1-based line of the field in the file, when it is written there.
    pub line: Option<usize>,
    /// jq-style path of the field: `.BUFFER_PG."Ethernet0|3-4".profile`; empty for the file.
    pub path: String,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for SonicDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every error of a refused import (at least one), and the warnings found before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SonicErrors {
    /// The errors, in the order found.
    pub errors: Vec<SonicDiagnostic>,
    /// Warnings found on the way.
    pub warnings: Vec<SonicDiagnostic>,
}

impl fmt::Display for SonicErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SonicErrors {}

/// The jq path of a field given by its keys: `["BUFFER_PG", "Ethernet0|3-4", "profile"]` →
/// `.BUFFER_PG."Ethernet0|3-4".profile` (a key that is not an identifier is quoted, as jq needs).
pub(crate) fn jq_path(keys: &[String]) -> String {
    let mut path = String::new();
    for key in keys {
        let bare = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if bare {
            path.push('.');
            path.push_str(key);
        } else {
            path.push_str(".\"");
            path.push_str(&key.replace('\\', "\\\\").replace('"', "\\\""));
            path.push('"');
        }
    }
    path
}

/// The 1-based line of the key at `keys` in the JSON `text` (the innermost key that is written;
/// `None` when not even the first is). A small scanner over the text: serde_json's values carry
/// no positions. Malformed text ends the search (it was parsed before, so it is not malformed).
pub(crate) fn line_of(text: &str, keys: &[String]) -> Option<usize> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
    };
    let mut best = None;
    scan.find(keys, &mut best);
    best.map(|offset| text[..offset.min(text.len())].matches('\n').count() + 1)
}

struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn blanks(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    /// A string at the cursor (which is on its opening quote), with the common escapes decoded.
    fn string(&mut self) -> Option<String> {
        if self.peek() != Some(b'"') {
            return None;
        }
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let b = self.peek()?;
            self.at += 1;
            match b {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = self.peek()?;
                    self.at += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'u' => {
                            // Keys of CONFIG_DB are ASCII; a \u escape only has to be skipped.
                            self.at += 4;
                            out.push(b'?');
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
    }

    /// Skips one value (string, number, literal, object or array).
    fn skip_value(&mut self) -> Option<()> {
        self.blanks();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
            }
            _ => {
                while self
                    .peek()
                    .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
                {
                    self.at += 1;
                }
                Some(())
            }
        }
    }

    /// Walks into the object at the cursor along `keys`, recording in `best` the offset of the
    /// innermost key found.
    fn find(&mut self, keys: &[String], best: &mut Option<usize>) -> Option<()> {
        let (first, rest) = keys.split_first()?;
        self.blanks();
        if self.peek()? != b'{' {
            return None;
        }
        self.at += 1;
        loop {
            self.blanks();
            if self.peek()? == b'}' {
                return None;
            }
            let key_at = self.at;
            let key = self.string()?;
            self.blanks();
            if self.peek()? != b':' {
                return None;
            }
            self.at += 1;
            if &key == first {
                *best = Some(key_at);
                return self.find(rest, best);
            }
            self.skip_value()?;
            self.blanks();
            if self.peek()? == b',' {
                self.at += 1;
            }
        }
    }
}

/// Sorts SONiC port names as SONiC lists them: by the number at their end (`Ethernet4` before
/// `Ethernet12`), then by name.
pub(crate) fn port_order(a: &str, b: &str) -> core::cmp::Ordering {
    fn split(name: &str) -> (&str, Option<u64>) {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (stem, number) = name.split_at(name.len() - digits);
        (stem, number.parse().ok())
    }
    let (stem_a, number_a) = split(a);
    let (stem_b, number_b) = split(b);
    stem_a
        .cmp(stem_b)
        .then(number_a.cmp(&number_b))
        .then(a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn jq_paths_quote_what_is_not_an_identifier() {
        assert_eq!(
            jq_path(&keys(&["BUFFER_PG", "Ethernet0|3-4", "profile"])),
            ".BUFFER_PG.\"Ethernet0|3-4\".profile"
        );
        assert_eq!(
            jq_path(&keys(&["SCHEDULER", "scheduler.1"])),
            ".SCHEDULER.\"scheduler.1\""
        );
        assert_eq!(jq_path(&keys(&["PORT", "Ethernet0"])), ".PORT.Ethernet0");
        assert_eq!(jq_path(&keys(&["X", "0"])), ".X.\"0\"");
    }

    #[test]
    fn lines_of_nested_keys() {
        let text = "{\n  \"PORT\": {\"Ethernet0\": {\"speed\": \"1\"},\n    \"Ethernet4\": {\n      \"mtu\": \"x\", \"speed\": \"2\"\n    }\n  },\n  \"A\": [1, {\"b\": \"}\"}]\n}\n";
        assert_eq!(line_of(text, &keys(&["PORT"])), Some(2));
        assert_eq!(
            line_of(text, &keys(&["PORT", "Ethernet4", "speed"])),
            Some(4)
        );
        assert_eq!(
            line_of(text, &keys(&["PORT", "Ethernet0", "speed"])),
            Some(2)
        );
        // The innermost key that is written.
        assert_eq!(line_of(text, &keys(&["PORT", "Ethernet4", "fec"])), Some(3));
        assert_eq!(line_of(text, &keys(&["A"])), Some(7));
        assert_eq!(line_of(text, &keys(&["NOPE"])), None);
        assert_eq!(
            line_of("{\"a\": \"b\\\"c\", \"d\": 1}", &keys(&["d"])),
            Some(1)
        );
    }

    #[test]
    fn ports_sort_by_their_number() {
        let mut names = vec![
            "Ethernet12",
            "Ethernet4",
            "Ethernet0",
            "Ethernet100",
            "Eth1",
        ];
        names.sort_by(|a, b| port_order(a, b));
        assert_eq!(
            names,
            [
                "Eth1",
                "Ethernet0",
                "Ethernet4",
                "Ethernet12",
                "Ethernet100"
            ]
        );
    }
}
