//! Removing the owner keys from the manifests a GitOps tool applies: the
//! label and annotation `camel.apache.org/operator.id` of every Camel K
//! resource in a file (`strip`); whether that moves anything in the
//! cluster (`strip_verdict`). The commit of the files it changed is
//! [`crate::git::Checkout::commit_files_on_new_branch`].
//!
//! Why: a tool (Flux, Argo CD) that applies a Camel K resource from a
//! manifest naming its operator sets the key back at its next apply, and so
//! undoes the reconciler's moves. Once the reconciler co-owns the keys in
//! the cluster (a server-side apply of both as `camelk-owner-keys`), they
//! can leave the manifests: the API server keeps a field while one manager
//! still holds it.
//!
//! Why a marker ([`MARKER_KEY`]) takes the annotation's place: a tool
//! re-applies an object only when its dry run differs from the live object
//! (Flux's kustomize-controller compares labels, annotations and spec, not
//! `managedFields`). With the keys merely removed, the co-owner keeps them,
//! the dry run equals the live object, and the tool never applies again: its
//! `managedFields` entry goes on claiming the keys, and the reconciler goes
//! on reading it as a tool that applies them. The marker is a change the
//! tool must apply once, which drops its claim; it also tells people why
//! the keys are gone.
//!
//! Contract of `strip`:
//! - Input: one file's text, any number of YAML documents (`---`). In each
//!   document whose `apiVersion` is in the group `camel.apache.org` (and
//!   each such item of a `kind: List`):
//!   - `metadata.annotations`: the owner-key entry is replaced in place by
//!     the marker entry `camelk.dev/owner-keys: reconciler` (same line,
//!     indentation, position and trailing comment; in a flow map, the same
//!     place between its commas). When the marker is already there, the
//!     owner-key entry is removed instead.
//!   - `metadata.labels`: the owner-key entry is removed; a map left empty
//!     goes with its key (`labels:` disappears rather than becoming `{}`).
//!   - A resource with the key as a label only gets the marker added to its
//!     annotations, unless it is already there: in a block map as a line of
//!     its own after the last entry, indented as the entries; in a flow map
//!     after the last entry (`, camelk.dev/owner-keys: reconciler`). With no
//!     annotations map it is refused ("add the annotation by hand"): writing
//!     a new map into someone's layout is left to them.
//! - So a second run finds no owner key and changes nothing.
//! - Nothing else changes: every other byte stays (comments, quoting, key
//!   order, blank lines). A removed entry of a block map takes its whole
//!   line(s), its trailing comment included; one of a flow map (`{a: b}`),
//!   its separating comma. Other documents are never touched.
//! - Guard: the new text is parsed again and must hold the same documents,
//!   node for node (values and styles), with exactly these changes: the
//!   removed entries gone, the replaced entry's key and value the marker's,
//!   the added marker last in its map; otherwise the file is refused and
//!   nothing is returned.
//! - Refused, with `file:line:column` (an error [`Diagnostic`]): text that
//!   is not UTF-8 or not YAML, a key that appears twice in one map, an
//!   entry that shares its line with another one, an annotation entry with
//!   a comment between its key and its value, a label with no annotations
//!   map to mark. A file that is not YAML and looks like a template (`{{`:
//!   Helm) is a warning instead: out of scope, left untouched.
//! - Other places that still name the key once the edit is done (a
//!   Kustomization's `commonAnnotations`, a JSON patch, a non-Camel K
//!   resource) are warnings in [`Stripped::notes`]: a tool may apply them.
//! - Pure: no file system, no cluster.
//!
//! The YAML reader is the manifest's own ([`Tree`], one per document, with
//! byte positions); no second parser is involved.

pub(crate) mod strip_verdict;

pub use strip_verdict::{LiveKeys, LiveOwners, Loss, Verdict, read as read_live_owners};

use std::ops::Range;

use super::diagnostic::{Diagnostic, Severity};
use super::tree::{Entry, FieldPath, Location, Node, Segment, Style, Tree, Value};
use crate::camel_k::{CamelKind, GROUP, OPERATOR_ID_KEY};

/// The largest file read (16 MiB): far above any manifest file (one
/// object may hold 1.5 MiB), and a bound on what one file costs.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The marker annotation that takes the owner annotation's place in a
/// cleaned manifest, with the value [`MARKER_VALUE`]: the owner keys of this
/// resource are the reconciler's: they were removed from this manifest, and
/// a tool that applies it must not name them again.
pub const MARKER_KEY: &str = "camelk.dev/owner-keys";

/// The value of [`MARKER_KEY`].
pub const MARKER_VALUE: &str = "reconciler";

/// The key as a JSON pointer writes it (`/metadata/annotations/camel.apache.org~1operator.id`).
const POINTER_KEY: &str = "camel.apache.org~1operator.id";

/// One file after the edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stripped {
    /// The whole text after the edit (the input when nothing was removed).
    pub text: String,
    /// The resources that lost a key (and got the marker), in file order.
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
    /// The annotation's value that was removed (its entry replaced by the
    /// marker's, or removed when the marker was already there).
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

/// `strip` of a file's bytes: they must be UTF-8 (the error names the
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

/// Removes the owner keys from every Camel K resource of `text` and leaves
/// the marker in their place (see the module documentation for what
/// changes and what is refused).
pub(crate) fn strip(file: &str, text: &str) -> Result<Stripped, Diagnostic> {
    let lines = Lines::new(text);
    let documents = documents(file, text, &lines)?;
    let mut changes = Vec::new();
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
            if let Some(resource) = plan_resource(&found, &path, node, &mut changes)? {
                resources.push(resource);
            }
        }
    }
    let mut splices = Vec::new();
    for group in group_by_map(&changes) {
        splices.extend(splices_of(
            file,
            text,
            &lines,
            &documents[group.doc],
            &group,
        )?);
    }
    splices.sort_by_key(|s| (s.range.start, s.range.end));
    if splices
        .windows(2)
        .any(|w| w[0].range.end > w[1].range.start)
    {
        let at = resources.first().map(|r| r.at).unwrap_or_default();
        return Err(error(
            file,
            at,
            "the owner keys overlap other entries here; remove them by hand".into(),
        ));
    }
    let added: usize = splices.iter().map(|s| s.with.len()).sum();
    let mut new = String::with_capacity(text.len() + added);
    let mut at = 0;
    for splice in &splices {
        new.push_str(&text[at..splice.range.start]);
        new.push_str(&splice.with);
        at = splice.range.end;
    }
    new.push_str(&text[at..]);
    if !splices.is_empty() {
        guard(file, &new, &documents, &changes, &resources)?;
    }
    let edited: Vec<Range<usize>> = splices.into_iter().map(|s| s.range).collect();
    let notes = mentions(file, text, &lines, &edited);
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

/// One change to the mapping at `map` of document `doc`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Change {
    doc: usize,
    map: FieldPath,
    edit: EntryEdit,
}

/// What happens to an entry of a mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
enum EntryEdit {
    /// The entry `key` goes.
    Remove(String),
    /// The owner-key entry becomes the marker entry, in place.
    Mark,
    /// The marker entry is added after the last entry.
    AddMark,
}

/// Where a resource was found: the file and its text, the document and its index.
struct Found<'a> {
    file: &'a str,
    text: &'a str,
    document: &'a Document,
    doc: usize,
}

/// The owner key found in one map of a resource's metadata.
struct Hit {
    /// Its value.
    value: String,
    /// Where its key is, in the file.
    at: Location,
    /// It is the map's only entry.
    alone: bool,
}

/// Finds the owner keys of the resource at `path`, adds the changes that
/// remove them and mark the resource, and returns the resource when it has
/// any.
fn plan_resource(
    found: &Found,
    path: &FieldPath,
    node: &Node,
    changes: &mut Vec<Change>,
) -> Result<Option<StrippedResource>, Diagnostic> {
    let Some(metadata) = entry(node, "metadata").filter(|m| matches!(m.value, Value::Mapping(_)))
    else {
        return Ok(None);
    };
    let label = owner_key(found, metadata, "labels")?;
    let annotation = owner_key(found, metadata, "annotations")?;
    let Some(first) = label.as_ref().or(annotation.as_ref()) else {
        return Ok(None);
    };
    let Found { file, document, .. } = *found;
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
        label: label.as_ref().map(|h| h.value.clone()),
        annotation: annotation.as_ref().map(|h| h.value.clone()),
    };
    let metadata_path = path.key("metadata");
    let change = |map: FieldPath, edit: EntryEdit| Change {
        doc: found.doc,
        map,
        edit,
    };
    if let Some(label) = &label {
        changes.push(if label.alone {
            change(metadata_path.clone(), EntryEdit::Remove("labels".into()))
        } else {
            change(
                metadata_path.key("labels"),
                EntryEdit::Remove(OPERATOR_ID_KEY.into()),
            )
        });
    }
    let annotations = match entry(metadata, "annotations").map(|n| &n.value) {
        Some(Value::Mapping(entries)) => Some(entries),
        _ => None,
    };
    let marked = annotations.is_some_and(|entries| entries.iter().any(|e| e.key == MARKER_KEY));
    let annotations_path = metadata_path.key("annotations");
    match (&annotation, marked) {
        // A map holding the marker is never emptied.
        (Some(_), true) => changes.push(change(
            annotations_path,
            EntryEdit::Remove(OPERATOR_ID_KEY.into()),
        )),
        (Some(_), false) => changes.push(change(annotations_path, EntryEdit::Mark)),
        (None, true) => {}
        (None, false) if annotations.is_some() => {
            changes.push(change(annotations_path, EntryEdit::AddMark));
        }
        (None, false) => {
            return Err(error(
                file,
                first.at,
                format!(
                    "{OPERATOR_ID_KEY} is only a label of this resource, and it has no \
                     `metadata.annotations` to put the marker in: add the annotation by hand \
                     (`annotations:` with `{MARKER_KEY}: {MARKER_VALUE}`), then run again"
                ),
            ));
        }
    }
    Ok(Some(resource))
}

/// The owner key of `metadata.<map_name>`, if the map holds it.
fn owner_key(found: &Found, metadata: &Node, map_name: &str) -> Result<Option<Hit>, Diagnostic> {
    let Found {
        file,
        text,
        document,
        ..
    } = *found;
    let Some(Value::Mapping(entries)) = entry(metadata, map_name).map(|m| &m.value) else {
        return Ok(None);
    };
    let hits: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.key == OPERATOR_ID_KEY)
        .collect();
    let hit = match hits.as_slice() {
        [] => return Ok(None),
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
    Ok(Some(Hit {
        value,
        at: document.location(hit.key_at),
        alone: entries.len() == 1,
    }))
}

/// The changes of one mapping.
struct MapChanges {
    doc: usize,
    map: FieldPath,
    edits: Vec<EntryEdit>,
}

fn group_by_map(changes: &[Change]) -> Vec<MapChanges> {
    let mut groups: Vec<MapChanges> = Vec::new();
    for change in changes {
        match groups
            .iter_mut()
            .find(|g| g.doc == change.doc && g.map == change.map)
        {
            Some(group) => group.edits.push(change.edit.clone()),
            None => groups.push(MapChanges {
                doc: change.doc,
                map: change.map.clone(),
                edits: vec![change.edit.clone()],
            }),
        }
    }
    groups
}

/// Text that replaces a byte range of the file (an insertion: an empty range).
struct Splice {
    range: Range<usize>,
    with: String,
}

impl Splice {
    fn cut(range: Range<usize>) -> Splice {
        Splice {
            range,
            with: String::new(),
        }
    }
}

/// The splices that make `group`'s changes.
fn splices_of(
    file: &str,
    text: &str,
    lines: &Lines,
    document: &Document,
    group: &MapChanges,
) -> Result<Vec<Splice>, Diagnostic> {
    let map = document.tree.get(&group.map).expect("a planned map exists");
    let Value::Mapping(entries) = &map.value else {
        unreachable!("changes are planned in mappings only");
    };
    let removed: Vec<bool> = entries
        .iter()
        .map(|e| group.edits.contains(&EntryEdit::Remove(e.key.clone())))
        .collect();
    // Positions in the file of each entry's key and the end of its value.
    let key_start = |e: &Entry| lines.byte_at(document.location(e.key_at));
    let value_end = |e: &Entry| value_end(text, document, e);
    let mut splices = Vec::new();
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
                splices.push(Splice::cut(range));
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
                splices.push(Splice::cut(range));
            }
        }
        _ => unreachable!("a mapping is block or flow"),
    }
    let marker = format!("{MARKER_KEY}: {MARKER_VALUE}");
    for edit in &group.edits {
        match edit {
            EntryEdit::Remove(_) => {}
            EntryEdit::Mark => {
                let e = entries
                    .iter()
                    .find(|e| e.key == OPERATOR_ID_KEY)
                    .expect("a planned entry exists");
                let (start, end) = (key_start(e), value_end(e));
                if text[start..document.start + e.value.start].contains('#') {
                    return Err(error(
                        file,
                        document.location(e.key_at),
                        format!(
                            "a comment between the key and the value of {OPERATOR_ID_KEY}; \
                             replace the entry with `{marker}` by hand"
                        ),
                    ));
                }
                // A block scalar ends after its line break: keep it.
                let eol = if text[..end].ends_with('\n') {
                    line_break_before(text, end)
                } else {
                    ""
                };
                splices.push(Splice {
                    range: start..end,
                    with: format!("{marker}{eol}"),
                });
            }
            EntryEdit::AddMark => splices.push(add_marker(text, document, map, entries, &marker)),
        }
    }
    Ok(splices)
}

/// The insertion of `marker` after the last entry of the mapping `map`: in
/// a flow map after a comma (or inside `{}`), in a block map as a line of
/// its own indented as the entries, after the line the last entry ends on.
fn add_marker(
    text: &str,
    document: &Document,
    map: &Node,
    entries: &[Entry],
    marker: &str,
) -> Splice {
    let insert = |at: usize, with: String| Splice {
        range: at..at,
        with,
    };
    let Some(last) = entries.last() else {
        // An empty mapping is a flow one, `{}`.
        return insert(document.start + map.start + 1, marker.to_string());
    };
    let end = value_end(text, document, last);
    if map.style == Style::Flow {
        return insert(end, format!(", {marker}"));
    }
    let indent = " ".repeat(last.key_at.column - 1);
    // A block scalar ends after its line break.
    let after = if text[..end].ends_with('\n') {
        Some(end)
    } else {
        text[end..].find('\n').map(|i| end + i + 1)
    };
    match after {
        Some(at) => insert(
            at,
            format!("{indent}{marker}{}", line_break_before(text, at)),
        ),
        // The last line of a file without a final line break.
        None => {
            let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
            insert(text.len(), format!("{eol}{indent}{marker}"))
        }
    }
}

/// Where the value of a block map's `entry` ends in the file. A block
/// scalar's span runs on to the next token, over the blank lines, comments
/// and indentation before it: its value ends after its last line indented
/// deeper than its key.
fn value_end(text: &str, document: &Document, entry: &Entry) -> usize {
    let end = document.start + entry.value.end;
    if entry.value.style != Style::BlockScalar {
        return end;
    }
    let indent = entry.key_at.column - 1;
    let first = text[..document.start + entry.value.start]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let mut last = None;
    let mut at = first;
    for line in text[first..end].split_inclusive('\n') {
        at += line.len();
        let content = line.trim_start_matches(' ');
        if content.trim().is_empty() {
            continue;
        }
        if line.len() - content.len() <= indent {
            break;
        }
        last = Some(at);
    }
    last.unwrap_or(end)
}

/// The line break that ends just before byte `at`: `\r\n` or `\n`.
fn line_break_before(text: &str, at: usize) -> &'static str {
    if text[..at].ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
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
    // A block scalar ends after its line break.
    if text[..end].ends_with('\n') {
        return Some(start..end);
    }
    let eol = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    let rest = text[end..eol].trim_matches([' ', '\t', '\r', '\n']);
    (rest.is_empty() || rest.starts_with('#')).then_some(start..eol)
}

/// The marker entry, as the guard expects to read it back.
fn marker_entry() -> Entry {
    Entry {
        key: MARKER_KEY.to_string(),
        key_at: Location::default(),
        value: Node {
            at: Location::default(),
            value: Value::Scalar(MARKER_VALUE.to_string()),
            start: 0,
            end: 0,
            style: Style::Plain,
        },
    }
}

/// Checks the edited text against the old documents with the changes made.
fn guard(
    file: &str,
    new: &str,
    old: &[Document],
    changes: &[Change],
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
        for change in changes.iter().filter(|c| c.doc == index) {
            let map = get_mut(&mut expected, &change.map).ok_or_else(fail)?;
            let Value::Mapping(entries) = &mut map.value else {
                return Err(fail());
            };
            match &change.edit {
                EntryEdit::Remove(key) => entries.retain(|e| &e.key != key),
                EntryEdit::Mark => {
                    let owner = entries
                        .iter_mut()
                        .find(|e| e.key == OPERATOR_ID_KEY)
                        .ok_or_else(fail)?;
                    *owner = marker_entry();
                }
                EntryEdit::AddMark => entries.push(marker_entry()),
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

/// Warnings for each place of `text` outside the `edited` ranges (removed
/// or replaced) that names the key (positions in `text`, as every position this module gives).
fn mentions(file: &str, text: &str, lines: &Lines, edited: &[Range<usize>]) -> Vec<Diagnostic> {
    let mut found: Vec<usize> = [OPERATOR_ID_KEY, POINTER_KEY]
        .into_iter()
        .flat_map(|needle| text.match_indices(needle).map(|(at, _)| at))
        .filter(|at| !edited.iter().any(|r| r.contains(at)))
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
