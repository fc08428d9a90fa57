//! Removing the owner keys from the manifests a GitOps tool applies: the
//! label and annotation `camel.apache.org/operator.id` of every Camel K
//! resource in a file ([`strip`]); whether that moves anything in the
//! cluster ([`live`]); and the commit of the files it changed ([`commit`]).
//!
//! Why: a tool (Flux, Argo CD) that applies a Camel K resource from a
//! manifest naming its operator sets the key back at its next apply, and so
//! undoes the reconciler's moves. Once the reconciler co-owns the keys in
//! the cluster (a server-side apply of both as `camelk-owner-keys`), they
//! can leave the manifests: the API server keeps a field while one manager
//! still holds it.
//!
//! Contract of [`strip`]:
//! - Input: one file's text, any number of YAML documents (`---`). Each
//!   document whose `apiVersion` is in the group `camel.apache.org` (and
//!   each such item of a `kind: List`) loses the key from
//!   `metadata.annotations` and `metadata.labels`; a map left empty goes
//!   with its key (`annotations:` disappears rather than becoming `{}`).
//! - Nothing else changes: every other byte stays (comments, quoting, key
//!   order, blank lines). A removed entry of a block map takes its whole
//!   line(s), its trailing comment included; one of a flow map (`{a: b}`),
//!   its separating comma. Other documents are never touched.
//! - Guard: the new text is parsed again and must hold the same documents,
//!   node for node (values and styles), minus exactly the removed entries;
//!   otherwise the file is refused and nothing is returned.
//! - Refused, with `file:line:column` (an error [`Diagnostic`]): text that
//!   is not UTF-8 or not YAML, a key that appears twice in one map, an
//!   entry that shares its line with another one, an edit that would leave
//!   `metadata` empty. A file that is not YAML and looks like a template
//!   (`{{`: Helm) is a warning instead: out of scope, left untouched.
//! - Other places that still name the key once the edit is done (a
//!   Kustomization's `commonAnnotations`, a JSON patch, a non-Camel K
//!   resource) are warnings in [`Stripped::notes`]: a tool may apply them.
//! - Pure: no file system, no cluster.
//!
//! The YAML reader is the manifest's own ([`Tree`], one per document, with
//! byte positions); no second parser is involved.

pub mod commit;
pub mod live;

use std::ops::Range;

use super::diagnostic::{Diagnostic, Severity};
use super::tree::{Entry, FieldPath, Location, Node, Segment, Style, Tree, Value};
use crate::camel_k::{CamelKind, GROUP, OPERATOR_ID_KEY};

/// The largest file read (16 MiB): far above any manifest file (one
/// object may hold 1.5 MiB), and a bound on what one file costs.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The key as a JSON pointer writes it (`/metadata/annotations/camel.apache.org~1operator.id`).
const POINTER_KEY: &str = "camel.apache.org~1operator.id";

/// One file after the edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stripped {
    /// The whole text after the edit (the input when nothing was removed).
    pub text: String,
    /// The resources that lost a key, in file order.
    pub resources: Vec<StrippedResource>,
    /// Warnings: places that still name the key once the edit is done.
    pub notes: Vec<Diagnostic>,
}

impl Stripped {
    /// How many keys were removed (a label and an annotation count two).
    pub fn keys_removed(&self) -> usize {
        self.resources.iter().map(StrippedResource::keys).sum()
    }
}

/// A Camel K resource whose owner keys were removed from its manifest.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StrippedResource {
    /// `kind` as written.
    pub kind: String,
    /// `apiVersion` as written.
    pub api_version: String,
    /// `metadata.name` (empty when the manifest has none).
    pub name: String,
    /// `metadata.namespace`, when the manifest names one.
    pub namespace: Option<String>,
    /// Where the resource starts in the file.
    #[serde(flatten)]
    pub at: Location,
    /// The label's value that was removed.
    pub label: Option<String>,
    /// The annotation's value that was removed.
    pub annotation: Option<String>,
}

impl StrippedResource {
    /// The catalogued kind `kind` names (the group is Camel K's; any version).
    pub fn camel_kind(&self) -> Option<CamelKind> {
        CamelKind::ALL.into_iter().find(|k| k.kind() == self.kind)
    }

    /// How many keys were removed from it: 1 or 2.
    pub fn keys(&self) -> usize {
        usize::from(self.label.is_some()) + usize::from(self.annotation.is_some())
    }

    /// What was removed, as `label=VALUE annotation=VALUE`.
    pub fn removed(&self) -> String {
        [("label", &self.label), ("annotation", &self.annotation)]
            .into_iter()
            .filter_map(|(key, value)| value.as_ref().map(|v| format!("{key}={v}")))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// [`strip`] of a file's bytes: they must be UTF-8 (the error names the
/// line and column of the first byte that is not).
pub fn strip_bytes(file: &str, bytes: &[u8]) -> Result<Stripped, Diagnostic> {
    match std::str::from_utf8(bytes) {
        Ok(text) => strip(file, text),
        Err(e) => {
            let good = e.valid_up_to();
            let text = std::str::from_utf8(&bytes[..good]).unwrap_or_default();
            Err(error(
                file,
                end_of(text),
                format!(
                    "the file is not UTF-8 (byte 0x{:02x} here); YAML is UTF-8: left untouched",
                    bytes[good]
                ),
            ))
        }
    }
}

/// Removes the owner keys from every Camel K resource of `text` (see the
/// module documentation for what changes and what is refused).
pub fn strip(file: &str, text: &str) -> Result<Stripped, Diagnostic> {
    let lines = Lines::new(text);
    let documents = documents(file, text, &lines)?;
    let mut cuts = Vec::new();
    let mut resources = Vec::new();
    for (index, document) in documents.iter().enumerate() {
        for path in resource_paths(&document.tree.root) {
            let node = document.tree.get(&path).expect("a path just found");
            let found = Found {
                file,
                text,
                document,
                doc: index,
            };
            if let Some(resource) = plan_resource(&found, &path, node, &mut cuts)? {
                resources.push(resource);
            }
        }
    }
    let mut ranges = Vec::new();
    for group in group_by_map(&cuts) {
        ranges.extend(cut_ranges(
            file,
            text,
            &lines,
            &documents[group.doc],
            &group,
        )?);
    }
    ranges.sort_by_key(|r| (r.start, r.end));
    if ranges.windows(2).any(|w| w[0].end > w[1].start) {
        let at = resources.first().map(|r| r.at).unwrap_or_default();
        return Err(error(
            file,
            at,
            "the owner keys overlap other entries here; remove them by hand".into(),
        ));
    }
    let mut new = String::with_capacity(text.len());
    let mut at = 0;
    for range in &ranges {
        new.push_str(&text[at..range.start]);
        at = range.end;
    }
    new.push_str(&text[at..]);
    if !ranges.is_empty() {
        guard(file, &new, &documents, &cuts, &resources)?;
    }
    let notes = mentions(file, text, &lines, &ranges);
    Ok(Stripped {
        text: new,
        resources,
        notes,
    })
}

/// The warning for a file that is not plain YAML at `at` and looks like a
/// Go template (`{{`: Helm), which is YAML only once rendered; `None` for
/// any other file.
fn template(file: &str, text: &str, at: Location) -> Option<Diagnostic> {
    if !text.contains("{{") {
        return None;
    }
    let mentions = if text.contains(OPERATOR_ID_KEY) {
        format!("; it names {OPERATOR_ID_KEY}: remove it from the chart by hand")
    } else {
        String::new()
    };
    Some(Diagnostic {
        severity: Severity::Warning,
        file: file.to_string(),
        at,
        message: format!("not plain YAML (a Helm or Go template?): left untouched{mentions}"),
    })
}

/// One YAML document of a file, parsed on its own.
struct Document {
    /// Byte offset of its first line in the file.
    start: usize,
    /// Lines of the file before it.
    lines_before: usize,
    tree: Tree,
}

impl Document {
    /// A position in the document, as a position in the file.
    fn location(&self, at: Location) -> Location {
        Location {
            line: at.line + self.lines_before,
            column: at.column,
        }
    }
}

/// The documents of `text`: found by one pass of the parser (whose errors
/// have the file's positions), then each read into a [`Tree`].
fn documents(file: &str, text: &str, lines: &Lines) -> Result<Vec<Document>, Diagnostic> {
    use serde_saphyr::granit_parser::{Event, Options, Parser};

    let not_yaml = |at: Location, message: &str| {
        template(file, text, at).unwrap_or_else(|| {
            error(
                file,
                at,
                format!("YAML syntax error: {message}; left untouched"),
            )
        })
    };

    let mut options = Options::default();
    options.emit_comments = false;
    let mut spans = Vec::new();
    let mut open = None;
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, span) = event.map_err(|e| {
            let marker = e.marker();
            not_yaml(
                Location {
                    line: marker.line(),
                    column: marker.col() + 1,
                },
                &e.info(),
            )
        })?;
        match event {
            Event::DocumentStart(..) => {
                open = Some(lines.line_start(span.start.byte_offset().unwrap_or_default()));
            }
            Event::DocumentEnd => {
                if let Some(start) = open.take() {
                    let end = span.end.byte_offset().unwrap_or(text.len()).max(start);
                    spans.push(start..end);
                }
            }
            _ => {}
        }
    }
    spans
        .into_iter()
        .map(|range| {
            let lines_before = lines.line_of(range.start) - 1;
            let tree = Tree::parse(&text[range.clone()]).map_err(|e| {
                let at = Location {
                    line: e.at.line + lines_before,
                    column: e.at.column,
                };
                let message = e
                    .message
                    .split("; an OperatorAssignment")
                    .next()
                    .unwrap_or_default();
                not_yaml(at, message)
            })?;
            Ok(Document {
                start: range.start,
                lines_before,
                tree,
            })
        })
        .collect()
}

/// Paths of the Camel K resources of a document: its root, or the items
/// of a `kind: List`.
fn resource_paths(root: &Node) -> Vec<FieldPath> {
    if is_camel_k(root) {
        return vec![FieldPath::root()];
    }
    if scalar(entry(root, "kind")) == Some("List")
        && let Some(Value::Sequence(items)) = entry(root, "items").map(|n| &n.value)
    {
        return items
            .iter()
            .enumerate()
            .filter(|(_, item)| is_camel_k(item))
            .map(|(i, _)| FieldPath::root().key("items").index(i))
            .collect();
    }
    Vec::new()
}

fn is_camel_k(node: &Node) -> bool {
    scalar(entry(node, "apiVersion"))
        .and_then(|v| v.split_once('/'))
        .is_some_and(|(group, _)| group == GROUP)
}

/// One entry to remove: `key` of the mapping at `map` in document `doc`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cut {
    doc: usize,
    map: FieldPath,
    key: String,
}

/// Where a resource was found: the file and its text, the document and its index.
struct Found<'a> {
    file: &'a str,
    text: &'a str,
    document: &'a Document,
    doc: usize,
}

/// Finds the owner keys of the resource at `path`, adds the cuts that
/// remove them, and returns the resource when it has any.
fn plan_resource(
    found: &Found,
    path: &FieldPath,
    node: &Node,
    cuts: &mut Vec<Cut>,
) -> Result<Option<StrippedResource>, Diagnostic> {
    let Found {
        file,
        text,
        document,
        doc,
    } = *found;
    let Some(metadata) = entry(node, "metadata").filter(|m| matches!(m.value, Value::Mapping(_)))
    else {
        return Ok(None);
    };
    let metadata_path = path.key("metadata");
    let mut found = [None, None];
    let mut emptied = Vec::new();
    for (slot, map_name) in ["labels", "annotations"].into_iter().enumerate() {
        let Some(map) = entry(metadata, map_name) else {
            continue;
        };
        let Value::Mapping(entries) = &map.value else {
            continue;
        };
        let hits: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.key == OPERATOR_ID_KEY)
            .collect();
        let hit = match hits.as_slice() {
            [] => continue,
            [one] => *one,
            [_, second, ..] => {
                return Err(error(
                    file,
                    document.location(second.key_at),
                    format!(
                        "{OPERATOR_ID_KEY} appears twice in `metadata.{map_name}`; a key may appear once in a mapping"
                    ),
                ));
            }
        };
        let value = match &hit.value.value {
            Value::Scalar(value) => value.clone(),
            _ => {
                // In a template, a template expression (`{{ .Values.id }}`).
                let at = document.location(hit.value.at);
                return Err(template(file, text, at).unwrap_or_else(|| {
                    error(
                        file,
                        at,
                        format!(
                            "{OPERATOR_ID_KEY} in `metadata.{map_name}` is not a plain value; remove it by hand"
                        ),
                    )
                }));
            }
        };
        found[slot] = Some(value);
        if entries.len() == 1 {
            emptied.push(map_name);
        } else {
            cuts.push(Cut {
                doc,
                map: metadata_path.key(map_name),
                key: OPERATOR_ID_KEY.to_string(),
            });
        }
    }
    let [label, annotation] = found;
    if label.is_none() && annotation.is_none() {
        return Ok(None);
    }
    let resource = StrippedResource {
        kind: scalar(entry(node, "kind")).unwrap_or_default().to_string(),
        api_version: scalar(entry(node, "apiVersion"))
            .unwrap_or_default()
            .to_string(),
        name: scalar(entry(metadata, "name"))
            .unwrap_or_default()
            .to_string(),
        namespace: scalar(entry(metadata, "namespace")).map(str::to_string),
        at: document.location(node.at),
        label,
        annotation,
    };
    if let Value::Mapping(entries) = &metadata.value
        && entries.len() == emptied.len()
    {
        return Err(error(
            file,
            document.location(metadata.at),
            "removing the owner keys would leave `metadata` empty; remove them by hand".into(),
        ));
    }
    for map_name in emptied {
        cuts.push(Cut {
            doc,
            map: metadata_path.clone(),
            key: map_name.to_string(),
        });
    }
    Ok(Some(resource))
}

/// The cuts of one mapping.
struct MapCuts {
    doc: usize,
    map: FieldPath,
    keys: Vec<String>,
}

fn group_by_map(cuts: &[Cut]) -> Vec<MapCuts> {
    let mut groups: Vec<MapCuts> = Vec::new();
    for cut in cuts {
        match groups
            .iter_mut()
            .find(|g| g.doc == cut.doc && g.map == cut.map)
        {
            Some(group) => group.keys.push(cut.key.clone()),
            None => groups.push(MapCuts {
                doc: cut.doc,
                map: cut.map.clone(),
                keys: vec![cut.key.clone()],
            }),
        }
    }
    groups
}

/// The byte ranges of the file that removing `group`'s entries deletes.
fn cut_ranges(
    file: &str,
    text: &str,
    lines: &Lines,
    document: &Document,
    group: &MapCuts,
) -> Result<Vec<Range<usize>>, Diagnostic> {
    let map = document.tree.get(&group.map).expect("a planned map exists");
    let Value::Mapping(entries) = &map.value else {
        unreachable!("cuts are planned in mappings only");
    };
    let removed: Vec<bool> = entries
        .iter()
        .map(|e| group.keys.contains(&e.key))
        .collect();
    // Positions in the file of each entry's key and the end of its value.
    let key_start = |e: &Entry| lines.byte_at(document.location(e.key_at));
    let value_end = |e: &Entry| document.start + e.value.end;
    let mut ranges = Vec::new();
    match map.style {
        Style::Block => {
            for (e, _) in entries.iter().zip(&removed).filter(|(_, r)| **r) {
                let range = entry_lines(text, key_start(e), value_end(e)).ok_or_else(|| {
                    error(
                        file,
                        document.location(e.key_at),
                        format!(
                            "`{}` shares its line with other content; remove it by hand",
                            e.key
                        ),
                    )
                })?;
                ranges.push(range);
            }
        }
        Style::Flow => {
            // Each run of removed entries goes with the comma after it, or
            // the last run with the comma before it.
            let mut i = 0;
            while i < entries.len() {
                if !removed[i] {
                    i += 1;
                    continue;
                }
                let first = i;
                while i < entries.len() && removed[i] {
                    i += 1;
                }
                let last = i - 1;
                let range = if i < entries.len() {
                    key_start(&entries[first])..key_start(&entries[i])
                } else if first > 0 {
                    value_end(&entries[first - 1])..value_end(&entries[last])
                } else {
                    unreachable!("an emptied map is cut from its parent");
                };
                ranges.push(range);
            }
        }
        _ => unreachable!("a mapping is block or flow"),
    }
    Ok(ranges)
}

/// The whole lines of a block entry whose key starts at `key` and value
/// ends at `end`: from its line's start to after the line it ends on, when
/// the key is the first thing on its line and only a comment follows the
/// value.
fn entry_lines(text: &str, key: usize, end: usize) -> Option<Range<usize>> {
    let start = text[..key].rfind('\n').map_or(0, |i| i + 1);
    if !text[start..key].bytes().all(|b| b == b' ') {
        return None;
    }
    // A block scalar's span already ends after its line break.
    if text[..end].ends_with('\n') {
        return Some(start..end);
    }
    let eol = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    let rest = text[end..eol].trim_matches([' ', '\t', '\r', '\n']);
    (rest.is_empty() || rest.starts_with('#')).then_some(start..eol)
}

/// Checks the edited text against the old documents with the cuts made.
fn guard(
    file: &str,
    new: &str,
    old: &[Document],
    cuts: &[Cut],
    resources: &[StrippedResource],
) -> Result<(), Diagnostic> {
    let at = resources.first().map(|r| r.at).unwrap_or_default();
    let fail = || {
        error(
            file,
            at,
            "internal error: the edit would change more than the owner keys; left untouched".into(),
        )
    };
    let lines = Lines::new(new);
    let edited = documents(file, new, &lines).map_err(|_| fail())?;
    if edited.len() != old.len() {
        return Err(fail());
    }
    for (index, (before, after)) in old.iter().zip(&edited).enumerate() {
        let mut expected = before.tree.root.clone();
        for cut in cuts.iter().filter(|c| c.doc == index) {
            let map = get_mut(&mut expected, &cut.map).ok_or_else(fail)?;
            if let Value::Mapping(entries) = &mut map.value {
                entries.retain(|e| e.key != cut.key);
            }
        }
        if !same(&expected, &after.tree.root) {
            return Err(fail());
        }
    }
    Ok(())
}

/// Whether two nodes hold the same values in the same styles (positions aside).
fn same(a: &Node, b: &Node) -> bool {
    if a.style != b.style {
        return false;
    }
    match (&a.value, &b.value) {
        (Value::Scalar(x), Value::Scalar(y)) => x == y,
        (Value::Alias, Value::Alias) => true,
        (Value::Sequence(x), Value::Sequence(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Mapping(x), Value::Mapping(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(a, b)| a.key == b.key && same(&a.value, &b.value))
        }
        _ => false,
    }
}

fn get_mut<'a>(node: &'a mut Node, path: &FieldPath) -> Option<&'a mut Node> {
    let mut node = node;
    for segment in &path.0 {
        node = match (&mut node.value, segment) {
            (Value::Mapping(entries), Segment::Key(key)) => {
                &mut entries.iter_mut().find(|e| &e.key == key)?.value
            }
            (Value::Sequence(items), Segment::Index(i)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Warnings for each place of `text` outside the `removed` ranges that
/// names the key (positions in `text`, as every position this module gives).
fn mentions(file: &str, text: &str, lines: &Lines, removed: &[Range<usize>]) -> Vec<Diagnostic> {
    let mut found: Vec<usize> = [OPERATOR_ID_KEY, POINTER_KEY]
        .into_iter()
        .flat_map(|needle| text.match_indices(needle).map(|(at, _)| at))
        .filter(|at| !removed.iter().any(|r| r.contains(at)))
        .collect();
    found.sort_unstable();
    found
        .into_iter()
        .map(|at| Diagnostic {
            severity: Severity::Warning,
            file: file.to_string(),
            at: lines.location(at),
            message: format!(
                "{OPERATOR_ID_KEY} is still named here, outside a Camel K resource's labels and \
                 annotations; if a tool applies it (a Kustomization's commonAnnotations or \
                 commonLabels, a patch), remove it by hand"
            ),
        })
        .collect()
}

fn entry<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.value {
        Value::Mapping(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
        _ => None,
    }
}

fn scalar(node: Option<&Node>) -> Option<&str> {
    match node.map(|n| &n.value) {
        Some(Value::Scalar(value)) => Some(value.as_str()),
        _ => None,
    }
}

fn error(file: &str, at: Location, message: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: file.to_string(),
        at,
        message,
    }
}

/// The position just after `text`.
fn end_of(text: &str) -> Location {
    Lines::new(text).location(text.len())
}

/// Where each line of a text starts, to turn byte offsets into positions
/// and back.
struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { text, starts }
    }

    /// 1-based line of byte `at`.
    fn line_of(&self, at: usize) -> usize {
        self.starts.partition_point(|&s| s <= at)
    }

    fn line_start(&self, at: usize) -> usize {
        self.starts[self.line_of(at) - 1]
    }

    /// The position of byte `at` (column in characters).
    fn location(&self, at: usize) -> Location {
        let line = self.line_of(at);
        let start = self.starts[line - 1];
        Location {
            line,
            column: self.text[start..at].chars().count() + 1,
        }
    }

    /// The byte offset of a position (column in characters).
    fn byte_at(&self, at: Location) -> usize {
        let start = self.starts[at.line - 1];
        start
            + self.text[start..]
                .char_indices()
                .nth(at.column - 1)
                .map_or(self.text.len() - start, |(i, _)| i)
    }
}

#[cfg(test)]
mod tests;
