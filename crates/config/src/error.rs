//! Errors and warnings that name the file, line, column, key and reason.
//!
//! Every diagnostic carries a dotted key path (`buffer_profile.pg_lossless.dynamic_th`) and, when the
//! key or one of its ancestors is written in the file, the 1-based line and column of that text.
//! Locations come from a [`SpanIndex`] built from the `toml_edit` document, so checks that run after
//! deserialisation still point at the offending text.

use core::fmt;
use core::ops::Range;
use std::collections::HashMap;

/// A line and column in the configuration text, both 1-based; the column counts characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Line number, from 1.
    pub line: usize,
    /// Column number in characters, from 1.
    pub column: usize,
}

/// One problem found in a configuration file.
///
/// `Display` renders `file:line:column: key: message` (or `file: key: message` when the problem
/// has no place in the text, e.g. a default that does not fit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name as given to [`crate::parse`] or [`crate::load`].
    pub file: String,
    /// Where in the file, when the key (or one of its ancestors) is written there.
    pub location: Option<Location>,
    /// Dotted TOML key path, e.g. `port.Ethernet0.buffer_pg."3-4"`; empty for whole-file problems.
    pub key: String,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(location) = self.location {
            write!(f, ":{}:{}", location.line, location.column)?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

/// A problem that refuses the configuration.
pub type ConfigError = Diagnostic;

/// A problem worth telling the operator that does not refuse the configuration.
pub type Warning = Diagnostic;

/// Every error found in one configuration file (at least one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The errors, in the order they were found.
    pub errors: Vec<ConfigError>,
    /// Warnings found before the errors stopped the checks (may be empty).
    pub warnings: Vec<Warning>,
}

impl fmt::Display for ConfigErrors {
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

impl std::error::Error for ConfigErrors {}

/// Where each key and value of a parsed document lies in the text, by dotted key path.
#[derive(Debug, Default)]
pub(crate) struct SpanIndex {
    /// Span of the key text (for a table header, the last key of the header).
    keys: HashMap<String, Range<usize>>,
    /// Span of the value (for a table, its header and body when known).
    values: HashMap<String, Range<usize>>,
    /// Every (path, span) pair, keys and values, for reverse look-up from an error span.
    all: Vec<(String, Range<usize>)>,
}

impl SpanIndex {
    pub(crate) fn build(doc: &toml_edit::ImDocument<String>) -> Self {
        let mut index = Self::default();
        index.walk_table(doc.as_table(), "");
        index
    }

    fn record(&mut self, path: &str, key: Option<Range<usize>>, value: Option<Range<usize>>) {
        if let Some(span) = key {
            self.keys
                .entry(path.to_owned())
                .or_insert_with(|| span.clone());
            self.all.push((path.to_owned(), span));
        }
        if let Some(span) = value {
            self.values
                .entry(path.to_owned())
                .or_insert_with(|| span.clone());
            self.all.push((path.to_owned(), span));
        }
    }

    fn walk_table(&mut self, table: &dyn toml_edit::TableLike, prefix: &str) {
        for (name, item) in table.iter() {
            let path = join_key(prefix, name);
            let key_span = table.get_key_value(name).and_then(|(key, _)| key.span());
            self.walk_item(item, &path, key_span);
        }
    }

    fn walk_item(&mut self, item: &toml_edit::Item, path: &str, key_span: Option<Range<usize>>) {
        match item {
            toml_edit::Item::None => {}
            toml_edit::Item::Value(value) => {
                self.record(path, key_span, value.span());
                self.walk_value(value, path);
            }
            toml_edit::Item::Table(table) => {
                self.record(path, key_span, table.span());
                self.walk_table(table, path);
            }
            toml_edit::Item::ArrayOfTables(array) => {
                self.record(path, key_span, array.span());
                for (i, table) in array.iter().enumerate() {
                    let element = format!("{path}[{i}]");
                    self.record(&element, None, table.span());
                    self.walk_table(table, &element);
                }
            }
        }
    }

    fn walk_value(&mut self, value: &toml_edit::Value, path: &str) {
        match value {
            toml_edit::Value::Array(array) => {
                for (i, element) in array.iter().enumerate() {
                    let element_path = format!("{path}[{i}]");
                    self.record(&element_path, None, element.span());
                    self.walk_value(element, &element_path);
                }
            }
            toml_edit::Value::InlineTable(table) => self.walk_table(table, path),
            _ => {}
        }
    }

    /// Span of the value at `path` if it is written, else of its key, else of the nearest written
    /// ancestor.
    pub(crate) fn span_of_value(&self, path: &str) -> Option<Range<usize>> {
        let mut current = path;
        loop {
            if let Some(span) = self.values.get(current).or_else(|| self.keys.get(current)) {
                return Some(span.clone());
            }
            current = parent_path(current)?;
        }
    }

    /// Span of the key at `path` if it is written, else of its value, else of the nearest written
    /// ancestor.
    pub(crate) fn span_of_key(&self, path: &str) -> Option<Range<usize>> {
        let mut current = path;
        loop {
            if let Some(span) = self.keys.get(current).or_else(|| self.values.get(current)) {
                return Some(span.clone());
            }
            current = parent_path(current)?;
        }
    }

    /// Whether `path` is written in the file.
    pub(crate) fn contains(&self, path: &str) -> bool {
        self.keys.contains_key(path) || self.values.contains_key(path)
    }

    /// The innermost key path whose key or value text encloses `span`.
    pub(crate) fn path_at(&self, span: &Range<usize>) -> Option<&str> {
        self.all
            .iter()
            .filter(|(_, s)| s.start <= span.start && span.end <= s.end)
            .min_by_key(|(_, s)| s.end - s.start)
            .map(|(path, _)| path.as_str())
    }
}

/// The path of the table that holds `path`, or `None` at the top.
fn parent_path(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    // Array elements: `a.b[3]` -> `a.b`.
    if path.ends_with(']') {
        if let Some(open) = path.rfind('[') {
            return Some(&path[..open]);
        }
    }
    // Walk back to the last dot that is not inside quotes.
    let mut in_quotes = false;
    let mut last_dot = None;
    for (i, c) in path.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '.' if !in_quotes => last_dot = Some(i),
            _ => {}
        }
    }
    Some(last_dot.map_or("", |dot| &path[..dot]))
}

/// `prefix.key`, quoting `key` the way TOML needs when it is not a bare key.
pub(crate) fn join_key(prefix: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_owned()
    } else {
        format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""))
    };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn location_of(text: &str, offset: usize) -> Location {
    let offset = offset.min(text.len());
    // Snap to a character boundary so slicing below cannot panic.
    let offset = (0..=offset)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    Location { line, column }
}

/// Collects errors and warnings while a configuration is checked.
#[derive(Debug)]
pub(crate) struct Diagnostics<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
    pub(crate) spans: &'a SpanIndex,
    pub(crate) errors: Vec<ConfigError>,
    pub(crate) warnings: Vec<Warning>,
}

impl<'a> Diagnostics<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str, spans: &'a SpanIndex) -> Self {
        Self {
            file,
            text,
            spans,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub(crate) fn diagnostic(&self, key: &str, message: String, at_key: bool) -> Diagnostic {
        let span = if at_key {
            self.spans.span_of_key(key)
        } else {
            self.spans.span_of_value(key)
        };
        Diagnostic {
            file: self.file.to_owned(),
            location: span.map(|span| location_of(self.text, span.start)),
            key: key.to_owned(),
            message,
        }
    }

    /// An error about the value at `key`.
    pub(crate) fn error(&mut self, key: &str, message: impl Into<String>) {
        let diagnostic = self.diagnostic(key, message.into(), false);
        self.errors.push(diagnostic);
    }

    /// An error about the key itself (its presence), pointing at the key text.
    pub(crate) fn error_at_key(&mut self, key: &str, message: impl Into<String>) {
        let diagnostic = self.diagnostic(key, message.into(), true);
        self.errors.push(diagnostic);
    }

    /// A warning about the value at `key`.
    pub(crate) fn warning(&mut self, key: &str, message: impl Into<String>) {
        let diagnostic = self.diagnostic(key, message.into(), false);
        self.warnings.push(diagnostic);
    }

    /// The first of `candidates` written in the file, else the last candidate. Used to blame a
    /// resolved value on the place it came from (`port.X.field`, then `port_defaults.field`).
    pub(crate) fn pick(&self, candidates: &[String]) -> String {
        candidates
            .iter()
            .find(|candidate| self.spans.contains(candidate))
            .or(candidates.last())
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_paths_respect_quotes_and_arrays() {
        assert_eq!(
            parent_path("port.Ethernet0.buffer_pg.\"3-4\""),
            Some("port.Ethernet0.buffer_pg")
        );
        assert_eq!(parent_path("a.\"x.y\""), Some("a"));
        assert_eq!(parent_path("runtime.lcore[1]"), Some("runtime.lcore"));
        assert_eq!(parent_path("switch"), Some(""));
        assert_eq!(parent_path(""), None);
    }

    #[test]
    fn keys_are_quoted_only_when_needed() {
        assert_eq!(join_key("", "port"), "port");
        assert_eq!(join_key("port", "Ethernet0"), "port.Ethernet0");
        assert_eq!(join_key("a", "3-4"), "a.3-4");
        assert_eq!(join_key("a", "x.y"), "a.\"x.y\"");
        assert_eq!(join_key("a", "scheduler.1"), "a.\"scheduler.1\"");
    }

    #[test]
    fn locations_count_lines_and_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(location_of(text, 0), Location { line: 1, column: 1 });
        assert_eq!(location_of(text, 6), Location { line: 2, column: 1 });
        // "bé = " is 6 bytes but 5 characters: the value starts at column 6.
        assert_eq!(location_of(text, 12), Location { line: 2, column: 6 });
        // Offsets inside a multi-byte character or past the end do not panic.
        assert_eq!(location_of(text, 8).line, 2);
        assert_eq!(location_of(text, 1000).line, 3);
    }
}
