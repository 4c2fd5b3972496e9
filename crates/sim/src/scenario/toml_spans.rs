//! Where each key and value of a scenario file lies, so that every error names
//! `file:line:column: key: reason` like the switch configuration's (docs/config.md).

use core::fmt;
use core::ops::Range;
use std::collections::BTreeMap;

/// One problem in a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file, as given.
    pub file: String,
    /// 1-based line and column, when the key (or an ancestor) is written in the file.
    pub location: Option<(usize, usize)>,
    /// Dotted key path (`flow[2].size`); empty for whole-file problems.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, column)) = self.location {
            write!(f, ":{line}:{column}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Spans by dotted path.
#[derive(Debug, Default)]
pub(crate) struct Spans {
    by_path: BTreeMap<String, Range<usize>>,
    all: Vec<(String, Range<usize>)>,
}

impl Spans {
    pub(crate) fn build(doc: &toml_edit::ImDocument<String>) -> Self {
        let mut s = Self::default();
        s.table(doc.as_table(), "");
        s
    }

    fn record(&mut self, path: &str, span: Option<Range<usize>>) {
        if let Some(span) = span {
            self.by_path
                .entry(path.to_owned())
                .or_insert_with(|| span.clone());
            self.all.push((path.to_owned(), span));
        }
    }

    fn table(&mut self, table: &dyn toml_edit::TableLike, prefix: &str) {
        for (name, item) in table.iter() {
            let path = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}.{name}")
            };
            if let Some((key, _)) = table.get_key_value(name) {
                self.record(&path, key.span());
            }
            self.item(item, &path);
        }
    }

    fn item(&mut self, item: &toml_edit::Item, path: &str) {
        match item {
            toml_edit::Item::None => {}
            toml_edit::Item::Value(v) => self.value(v, path),
            toml_edit::Item::Table(t) => {
                self.record(path, t.span());
                self.table(t, path);
            }
            toml_edit::Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.record(&p, t.span());
                    self.table(t, &p);
                }
            }
        }
    }

    fn value(&mut self, v: &toml_edit::Value, path: &str) {
        // A value's errors point at the value, not at its key.
        if let Some(span) = v.span() {
            self.by_path.insert(path.to_owned(), span.clone());
            self.all.push((path.to_owned(), span));
        }
        match v {
            toml_edit::Value::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    self.value(e, &format!("{path}[{i}]"));
                }
            }
            toml_edit::Value::InlineTable(t) => self.table(t, path),
            _ => {}
        }
    }

    /// The span of `path`, else of its nearest written ancestor.
    fn span_of(&self, path: &str) -> Option<Range<usize>> {
        let mut p = path;
        loop {
            if let Some(s) = self.by_path.get(p) {
                return Some(s.clone());
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }

    /// The innermost path whose text encloses `span`.
    pub(crate) fn path_at(&self, span: &Range<usize>) -> Option<&str> {
        self.all
            .iter()
            .filter(|(_, s)| s.start <= span.start && span.end <= s.end)
            .min_by_key(|(_, s)| s.end - s.start)
            .map(|(p, _)| p.as_str())
    }
}

/// 1-based line and column (characters) of byte `offset` in `text`.
pub(crate) fn location_of(text: &str, offset: usize) -> (usize, usize) {
    let offset = (0..=offset.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// Makes errors for one file.
#[derive(Debug)]
pub(crate) struct Blame<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
    pub(crate) spans: &'a Spans,
}

impl Blame<'_> {
    pub(crate) fn error(&self, key: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            location: self
                .spans
                .span_of(key)
                .map(|s| location_of(self.text, s.start)),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}
