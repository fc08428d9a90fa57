//! A YAML document as a tree of nodes that remember where they are in the
//! file, used to point errors at `line:column` and to check field names.
//!
//! Contract: [`Tree::parse`] accepts exactly one YAML document and fails with
//! the parser's position on a syntax error; [`Tree::locate`] maps a
//! [`FieldPath`] to the position of the deepest node of that path that exists,
//! so a message about a missing field points at its parent.
//!
//! Limits, each refused as a syntax error at the place it is crossed, so
//! no input can exhaust the stack or memory (a stack overflow is a crash):
//! nesting deeper than [`MAX_DEPTH`], and aliases that repeat more than
//! [`MAX_ALIAS_NODES`] nodes (a "billion laughs" document). The size limit
//! ([`crate::api::MAX_MANIFEST_BYTES`]) is checked before this parser runs.
//!
//! Every node also keeps its byte range in the text and its style (plain,
//! quoted, block, flow), so an edit can splice at a known place
//! (the pin splice of [`super::edit`]) without a second parser.

use std::collections::HashMap;
use std::fmt;

use serde_saphyr::granit_parser::{
    Event, Options, Parser, ScalarStyle, ScanError, Span, StructureStyle,
};

/// The deepest nesting of mappings and sequences accepted: 32.
///
/// Why this value: the deepest place of an `OperatorAssignment`
/// (`spec.rules[].match.selector.matchExpressions[].values[]`) is 9 levels
/// down, so 32 leaves room for anything valid, while every later stage
/// (unknown fields, typed reading, dropping the tree) recurses once per
/// level and must not be handed 10,000 levels.
pub(crate) const MAX_DEPTH: usize = 32;

/// The most nodes aliases (`*name`) may repeat in one document: 10,000.
///
/// Why this value: an alias is read as a copy of its anchor, so nine lines
/// of aliases of aliases can stand for a billion nodes. A manifest repeats
/// a selector or a list of pins at most, a few hundred nodes; 10,000 is far
/// above that and far below what costs memory or time.
pub(crate) const MAX_ALIAS_NODES: u64 = 10_000;

/// A position in the file; both numbers start at 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Location {
    fn of(span: &Span) -> Location {
        Location {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// One step of a path into the document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Where a value sits in the document, such as `spec.rules[2].operator`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    /// The document root.
    pub(crate) fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    /// The path to `key` of the mapping at this path.
    pub(crate) fn key(&self, key: &str) -> FieldPath {
        let mut path = self.clone();
        path.0.push(Segment::Key(key.to_string()));
        path
    }

    /// The path to item `index` (from 0) of the sequence at this path.
    pub(crate) fn index(&self, index: usize) -> FieldPath {
        let mut path = self.clone();
        path.0.push(Segment::Index(index));
        path
    }

    /// Builds a path from `spec.rules[2].operator` notation.
    pub(crate) fn parse(text: &str) -> FieldPath {
        let mut segments = Vec::new();
        for part in text.split('.').filter(|p| !p.is_empty()) {
            let (name, indices) = part.split_once('[').map_or((part, ""), |(n, i)| (n, i));
            if !name.is_empty() {
                segments.push(Segment::Key(name.to_string()));
            }
            for index in indices.split('[') {
                if let Ok(i) = index.trim_end_matches(']').parse() {
                    segments.push(Segment::Index(i));
                }
            }
        }
        FieldPath(segments)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if i == 0 => write!(f, "{key}")?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A node of the document.
#[derive(Clone, Debug)]
pub struct Node {
    /// Where the value starts.
    pub at: Location,
    pub value: Value,
    /// Byte offset of the value's first character (for a quoted scalar, the
    /// quote; for a flow collection, the bracket).
    pub start: usize,
    /// Byte offset just past the value's last character: the closing quote
    /// or bracket, or for a block collection the end of its last item.
    pub end: usize,
    pub style: Style,
}

/// How a node is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    /// `|` or `>` scalars.
    BlockScalar,
    /// A block (indented) collection.
    Block,
    /// A flow collection (`[...]`, `{...}`).
    Flow,
}

/// What a node holds. Mapping keys that are not scalars are kept as their
/// text `<complex key>` so they are still reported as unknown fields.
#[derive(Clone, Debug)]
pub enum Value {
    Scalar(String),
    Sequence(Vec<Node>),
    Mapping(Vec<Entry>),
    Alias,
}

/// A key and its value in a mapping.
#[derive(Clone, Debug)]
pub struct Entry {
    pub key: String,
    pub(crate) key_at: Location,
    pub value: Node,
}

/// A parse failure, with the parser's position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub at: Location,
    pub message: String,
}

/// A whole document.
#[derive(Clone, Debug)]
pub struct Tree {
    /// The top-level node.
    pub root: Node,
    /// Whether the document has no tags, anchors or aliases (its nodes are
    /// then all there is to know).
    pub plain: bool,
}

/// A collection being read: where it starts, its style, its children.
struct Opened {
    at: Location,
    start: usize,
    style: Style,
    kind: Open,
    /// Its anchor id (0: none).
    anchor: usize,
    /// Nodes below it so far, aliases counted as copies of their anchor.
    nodes: u64,
}

enum Open {
    Sequence(Vec<Node>),
    Mapping(Vec<Entry>, Option<(String, Location)>),
}

fn collection_style(style: StructureStyle) -> Style {
    match style {
        StructureStyle::Block => Style::Block,
        StructureStyle::Flow => Style::Flow,
    }
}

/// End of a collection: after its closing bracket (flow), or after its
/// last item (block).
fn collection_end(opened: &Opened, span: &Span, last_child_end: Option<usize>) -> usize {
    match opened.style {
        Style::Flow => span.end.byte_offset().unwrap_or(opened.start),
        _ => last_child_end.unwrap_or(opened.start),
    }
}

impl Tree {
    /// Parses one YAML document, keeping every node's position.
    pub fn parse(text: &str) -> Result<Tree, SyntaxError> {
        let mut stack: Vec<Opened> = Vec::new();
        let mut root: Option<Node> = None;
        // Anchor id -> nodes it stands for; nodes aliases repeated so far.
        let mut anchors: HashMap<usize, u64> = HashMap::new();
        let mut repeated: u64 = 0;
        let mut documents = 0;
        let mut plain = true;
        // Comments are still checked as syntax, but not kept: nothing here
        // reads them, and keeping them costs a tenth of the parse.
        let mut options = Options::default();
        options.emit_comments = false;
        // The scanner counts flow brackets ahead of the events: stop it at
        // the same depth, with the same message.
        options.flow_nesting_limit = MAX_DEPTH;
        options.block_nesting_limit = MAX_DEPTH;
        for event in Parser::new_from_str_with_options(text, options) {
            let (event, span) = event.map_err(syntax_error)?;
            let at = Location::of(&span);
            let start = span.start.byte_offset().unwrap_or_default();
            let finished = match event {
                Event::DocumentStart(..) => {
                    documents += 1;
                    if documents > 1 {
                        return Err(SyntaxError {
                            at,
                            message: "expected a single YAML document, found a second one".into(),
                        });
                    }
                    None
                }
                Event::MappingStart(style, anchor, tag) => {
                    plain &= anchor == 0 && tag.is_none();
                    too_deep(stack.len(), at)?;
                    stack.push(Opened {
                        at,
                        start,
                        style: collection_style(style),
                        kind: Open::Mapping(Vec::new(), None),
                        anchor,
                        nodes: 1,
                    });
                    None
                }
                Event::SequenceStart(style, anchor, tag) => {
                    plain &= anchor == 0 && tag.is_none();
                    too_deep(stack.len(), at)?;
                    stack.push(Opened {
                        at,
                        start,
                        style: collection_style(style),
                        kind: Open::Sequence(Vec::new()),
                        anchor,
                        nodes: 1,
                    });
                    None
                }
                Event::MappingEnd | Event::SequenceEnd => stack.pop().map(|opened| {
                    let last = match &opened.kind {
                        Open::Mapping(entries, _) => entries.last().map(|e| e.value.end),
                        Open::Sequence(items) => items.last().map(|n| n.end),
                    };
                    let end = collection_end(&opened, &span, last);
                    let node = Node {
                        at: opened.at,
                        start: opened.start,
                        end,
                        style: opened.style,
                        value: match opened.kind {
                            Open::Mapping(entries, _) => Value::Mapping(entries),
                            Open::Sequence(items) => Value::Sequence(items),
                        },
                    };
                    (node, opened.nodes, opened.anchor)
                }),
                Event::Scalar(value, style, anchor, tag) => Some((
                    Node {
                        at,
                        start,
                        end: span.end.byte_offset().unwrap_or(start),
                        style: match style {
                            ScalarStyle::Plain => Style::Plain,
                            ScalarStyle::SingleQuoted => Style::SingleQuoted,
                            ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
                            _ => Style::BlockScalar,
                        },
                        value: {
                            plain &= anchor == 0 && tag.is_none();
                            Value::Scalar(value.into_owned())
                        },
                    },
                    1,
                    anchor,
                )),
                Event::Alias(id) => {
                    plain = false;
                    let nodes = anchors.get(&id).copied().unwrap_or(1);
                    repeated = repeated.saturating_add(nodes);
                    if repeated > MAX_ALIAS_NODES {
                        return Err(SyntaxError {
                            at,
                            message: format!(
                                "aliases repeat more than {MAX_ALIAS_NODES} nodes (this one \
                                 alone {nodes}); a manifest needs no alias bomb: write the \
                                 values out, or alias less"
                            ),
                        });
                    }
                    Some((alias_node(at, start, &span), nodes, 0))
                }
                Event::UnresolvedAlias(_) => {
                    plain = false;
                    Some((alias_node(at, start, &span), 1, 0))
                }
                _ => None,
            };
            let Some((node, nodes, anchor)) = finished else {
                continue;
            };
            if anchor != 0 {
                anchors.insert(anchor, nodes);
            }
            if let Some(parent) = stack.last_mut() {
                parent.nodes = parent.nodes.saturating_add(nodes);
            }
            match stack.last_mut().map(|o| &mut o.kind) {
                None => root = Some(node),
                Some(Open::Sequence(items)) => items.push(node),
                Some(Open::Mapping(entries, pending)) => match pending.take() {
                    Some((key, key_at)) => entries.push(Entry {
                        key,
                        key_at,
                        value: node,
                    }),
                    None => {
                        let key = match node.value {
                            Value::Scalar(key) => key,
                            _ => "<complex key>".to_string(),
                        };
                        *pending = Some((key, node.at));
                    }
                },
            }
        }
        Ok(Tree {
            root: root.unwrap_or(Node {
                at: Location { line: 1, column: 1 },
                value: Value::Scalar(String::new()),
                start: 0,
                end: 0,
                style: Style::Plain,
            }),
            plain,
        })
    }

    /// The node at `path`, if it exists.
    pub(crate) fn get(&self, path: &FieldPath) -> Option<&Node> {
        let mut node = &self.root;
        for segment in &path.0 {
            node = child(node, segment)?;
        }
        Some(node)
    }

    /// Position of `path`'s value, or of its deepest existing ancestor.
    pub(crate) fn locate(&self, path: &FieldPath) -> Location {
        let mut node = &self.root;
        for segment in &path.0 {
            match child(node, segment) {
                Some(next) => node = next,
                None => break,
            }
        }
        node.at
    }

    /// Position of the key of the entry at `path` (for unknown fields), or
    /// of its value when it is not a mapping entry.
    pub(crate) fn locate_key(&self, path: &FieldPath) -> Location {
        let Some((Segment::Key(key), parent)) = path.0.split_last() else {
            return self.locate(path);
        };
        match self.get(&FieldPath(parent.to_vec())).map(|n| &n.value) {
            Some(Value::Mapping(entries)) => entries
                .iter()
                .find(|e| &e.key == key)
                .map(|e| e.key_at)
                .unwrap_or_else(|| self.locate(path)),
            _ => self.locate(path),
        }
    }
}

/// Refuses a collection opened at `depth` (the number already open).
fn too_deep(depth: usize, at: Location) -> Result<(), SyntaxError> {
    if depth < MAX_DEPTH {
        return Ok(());
    }
    Err(SyntaxError {
        at,
        message: format!(
            "nested more than {MAX_DEPTH} levels deep; an OperatorAssignment needs fewer than 10"
        ),
    })
}

fn alias_node(at: Location, start: usize, span: &Span) -> Node {
    Node {
        at,
        start,
        end: span.end.byte_offset().unwrap_or(start),
        style: Style::Plain,
        value: Value::Alias,
    }
}

fn child<'a>(node: &'a Node, segment: &Segment) -> Option<&'a Node> {
    match (&node.value, segment) {
        (Value::Mapping(entries), Segment::Key(key)) => {
            entries.iter().find(|e| &e.key == key).map(|e| &e.value)
        }
        (Value::Sequence(items), Segment::Index(i)) => items.get(*i),
        _ => None,
    }
}

fn syntax_error(error: ScanError) -> SyntaxError {
    let marker = error.marker();
    let at = Location {
        line: marker.line(),
        column: marker.col() + 1,
    };
    match error.info().as_str() {
        "recursion limit exceeded" => return too_deep(MAX_DEPTH, at).unwrap_err(),
        "while parsing node, found unknown anchor" => {
            return SyntaxError {
                at,
                message: "this alias (`*name`) names no anchor (`&name`) defined before it".into(),
            };
        }
        _ => {}
    }
    SyntaxError {
        at,
        message: error.info(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_values_and_keys() {
        let tree = Tree::parse("a:\n  b:\n    - x\n    - {c: 1}\n").unwrap();
        assert_eq!(
            tree.locate(&FieldPath::parse("a.b[1].c")),
            Location {
                line: 4,
                column: 11
            }
        );
        assert_eq!(
            tree.locate_key(&FieldPath::parse("a.b")),
            Location { line: 2, column: 3 }
        );
        assert_eq!(
            tree.locate(&FieldPath::parse("a.b[0]")),
            Location { line: 3, column: 7 }
        );
        // Missing: the deepest ancestor.
        assert_eq!(
            tree.locate(&FieldPath::parse("a.b[7].z")),
            Location { line: 3, column: 5 }
        );
    }

    #[test]
    fn nodes_know_their_bytes_and_style() {
        let text = "a:\n  - 'x'   # c\n  - {b: \"y\"}\nz: w\n";
        let tree = Tree::parse(text).unwrap();
        let span = |path: &str| {
            let node = tree.get(&FieldPath::parse(path)).unwrap();
            (&text[node.start..node.end], node.style)
        };
        assert_eq!(span("a[0]"), ("'x'", Style::SingleQuoted));
        assert_eq!(span("a[1]"), ("{b: \"y\"}", Style::Flow));
        assert_eq!(span("a[1].b"), ("\"y\"", Style::DoubleQuoted));
        assert_eq!(span("z"), ("w", Style::Plain));
        // A block collection ends where its last item ends.
        assert_eq!(span("a"), ("- 'x'   # c\n  - {b: \"y\"}", Style::Block));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let error = Tree::parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(error.at.line >= 1, "{error:?}");
        assert!(Tree::parse("a: 1\n---\nb: 2\n").is_err());
    }

    #[test]
    fn paths_print_and_parse() {
        let path = FieldPath::parse("spec.rules[2].operator");
        assert_eq!(path.to_string(), "spec.rules[2].operator");
        assert_eq!(
            FieldPath::root()
                .key("spec")
                .key("pins")
                .index(0)
                .to_string(),
            "spec.pins[0]"
        );
    }
}
