//! The fast path of pin edits: new text spliced into the pin list at the byte
//! ranges the positioned parse ([`crate::manifest::tree`]) already knows,
//! instead of a second, lossless parse of the whole file by `yaml-edit`.
//! Private to [`super`] (the one interface of manifest edits), which tries it
//! first and falls back to `yaml-edit`.
//!
//! Contract:
//! - [`pins`] handles the common shapes only and says so by returning `None`
//!   for anything else (a flow, empty or indentless list, no list, a value
//!   that would need quotes, a blank line or comment next to a removed pin,
//!   a multi-line scalar, ...); the caller then takes the general path of [`super`].
//!   When it does handle an edit, the bytes are exactly those the general
//!   path writes (the golden and property tests compare both): an operator
//!   keeps its quote style, a new pin is a block mapping indented like its
//!   siblings after the last one, a removed pin takes its whole lines.
//! - The result is checked before it is returned, given that the manifest
//!   before the edit is valid: the changed part of the list (the touched pins
//!   and their neighbours, whole lines) is parsed again on its own and must
//!   give exactly the expected pins; the line after it must close that part
//!   (a sibling or a dedent); the whole expected spec goes through
//!   [`validate`]. Any doubt, or any error (whose message the general
//!   path words with its positions), returns `None`.
//! - The returned [`Manifest`]'s tree is the old one with the re-parsed part
//!   put in and every later position shifted, equal to a parse of the new
//!   text.

use std::ops::Range;

use crate::api::{OperatorAssignmentSpec, OperatorId, Pin};
use crate::camel_k::CamelKind;
use crate::manifest::tree::{Entry, FieldPath, Node, Style, Tree, Value};
use crate::manifest::{Diagnostic, Manifest, Severity, validate};

/// One change to the pin list; indices are those of the manifest before the
/// edit.
#[derive(Clone, Debug)]
pub(super) enum PinEdit {
    /// The pin at `index` gets operator `to`.
    Set { index: usize, to: OperatorId },
    /// A new pin after the last one.
    Append(Pin),
    /// The pin at `index` goes away.
    Remove { index: usize },
}

/// The edited manifest, or `None` when the splice cannot (or should not)
/// make this edit.
///
/// Stages: the list's shape ([`block_pins`]); the byte ranges to replace
/// ([`Splices::plan`]); the new text, and the changed part of the list
/// re-parsed on its own ([`reparse_window`]); the whole spec validated; the
/// tree patched ([`spliced_tree`]).
pub(super) fn pins(
    manifest: &Manifest,
    edits: &[PinEdit],
    expected: &OperatorAssignmentSpec,
) -> Option<Manifest> {
    let text = manifest.text.as_str();
    let (items, dash) = block_pins(manifest)?;
    let planned = Splices::plan(text, items, dash, edits)?;

    // The changed part of the list, whole lines: the touched pins and one
    // neighbour on each side.
    let last = items.len() - 1;
    let first = planned.touched.iter().min()?.saturating_sub(1);
    let upto = (planned.touched.iter().max()? + 1).min(last);
    let window = item_lines(text, &items[first])?.start..item_lines(text, &items[upto])?.end;
    let new_text = planned.apply(text, &window)?;
    let delta = new_text.len() as isize - text.len() as isize;
    let new_window = window.start..(window.end as isize + delta) as usize;

    // Check the changed part on its own, and that what follows closes it.
    let keep = (upto + 1 - first) - planned.removed + planned.appended;
    let wanted = expected.pins.get(first..first + keep)?;
    let part = reparse_window(text, &new_text, &window, &new_window, wanted)?;
    if !closes(&new_text[new_window.end..], dash) {
        return None;
    }

    let findings = validate::validate(expected);
    if findings.iter().any(|f| f.severity == Severity::Error) {
        return None;
    }
    let tree = spliced_tree(
        manifest,
        &new_text,
        (&window, &new_window),
        first..=upto,
        part,
    )?;
    Some(edited(manifest, expected, new_text, tree, findings))
}

/// The pin list's items and the column of their dashes, when it is a
/// non-empty block list, indented under its key, every item's dash at one
/// column and every block pin's keys two columns after it.
fn block_pins(manifest: &Manifest) -> Option<(&[Node], usize)> {
    let text = manifest.text.as_str();
    let list = manifest.tree.get(&FieldPath::parse("spec.pins"))?;
    let Value::Sequence(items) = &list.value else {
        return None;
    };
    if list.style != Style::Block || items.is_empty() {
        return None;
    }
    let dash = dash_column(text, &items[0])?;
    // An indentless list (`- ` under the key, at its column) parses
    // differently on its own: the general path handles it.
    let key_column = manifest
        .tree
        .locate_key(&FieldPath::parse("spec.pins"))
        .column;
    if dash < key_column {
        return None;
    }
    for item in items {
        if dash_column(text, item)? != dash {
            return None;
        }
        if item.style == Style::Block
            && let Value::Mapping(entries) = &item.value
            && entries.iter().any(|e| e.key_at.column != dash + 3)
        {
            return None;
        }
    }
    Some((items, dash))
}

/// The byte ranges an edit replaces, in order and disjoint.
struct Splices {
    /// Range of the old text, and its replacement.
    ranges: Vec<(Range<usize>, String)>,
    /// Indices of the pins changed, removed, or appended after.
    touched: Vec<usize>,
    removed: usize,
    appended: usize,
}

impl Splices {
    fn plan(text: &str, items: &[Node], dash: usize, edits: &[PinEdit]) -> Option<Splices> {
        let pad = " ".repeat(dash);
        let mut out = Splices {
            ranges: Vec::new(),
            touched: Vec::new(),
            removed: 0,
            appended: 0,
        };
        let mut appended = String::new();
        for edit in edits {
            match edit {
                PinEdit::Set { index, to } => {
                    let item = items.get(*index)?;
                    out.ranges.push(set_operator(text, item, to)?);
                    out.touched.push(*index);
                }
                PinEdit::Remove { index } => {
                    let item = items.get(*index)?;
                    out.ranges.push((removed_lines(text, item)?, String::new()));
                    out.touched.push(*index);
                    out.removed += 1;
                }
                PinEdit::Append(pin) => {
                    appended.push_str(&pin_lines(&pad, pin)?);
                    out.appended += 1;
                }
            }
        }
        if out.removed >= items.len() {
            return None;
        }
        let last = items.len() - 1;
        if out.appended > 0 {
            let at = item_lines(text, &items[last])?.end;
            out.ranges.push((at..at, appended));
            out.touched.push(last);
        }
        if out.touched.is_empty() {
            return None;
        }
        out.ranges
            .sort_by_key(|(range, _)| (range.start, range.end));
        if out.ranges.windows(2).any(|w| w[0].0.end > w[1].0.start) {
            return None;
        }
        Some(out)
    }

    /// The new text, when every splice lies inside `window`.
    fn apply(&self, text: &str, window: &Range<usize>) -> Option<String> {
        if self
            .ranges
            .iter()
            .any(|(r, _)| r.start < window.start || r.end > window.end)
        {
            return None;
        }
        let mut new_text = String::with_capacity(text.len() + 256);
        let mut at = 0;
        for (range, replacement) in &self.ranges {
            new_text.push_str(&text[at..range.start]);
            new_text.push_str(replacement);
            at = range.end;
        }
        new_text.push_str(&text[at..]);
        Some(new_text)
    }
}

/// The operator value of `item` replaced by `to`, in the same quote style.
fn set_operator(text: &str, item: &Node, to: &OperatorId) -> Option<(Range<usize>, String)> {
    let value = entry(item, "operator")?;
    let old = &text[value.start..value.end];
    if !plain_safe(to.as_str()) || old.contains('\n') {
        return None;
    }
    let new = match value.style {
        Style::Plain => to.to_string(),
        Style::SingleQuoted => format!("'{to}'"),
        Style::DoubleQuoted => format!("\"{to}\""),
        _ => return None,
    };
    Some((value.start..value.end, new))
}

/// The whole lines of `item`, unless a blank line or comment is next to it.
fn removed_lines(text: &str, item: &Node) -> Option<Range<usize>> {
    let lines = item_lines(text, item)?;
    // Blank lines and comments around a pin (which may be about it): the
    // general path decides what becomes of them.
    let trivia = |line: &str| {
        let line = line.trim_start();
        line.is_empty() || line.starts_with('#')
    };
    if previous_line(text, lines.start).is_some_and(trivia)
        || text[lines.end..].lines().next().is_some_and(trivia)
    {
        return None;
    }
    Some(lines)
}

/// A new pin as a block mapping whose dash is at `pad`'s width.
fn pin_lines(pad: &str, pin: &Pin) -> Option<String> {
    for value in [
        pin.namespace.as_str(),
        pin.name.as_str(),
        pin.operator.as_str(),
    ] {
        if !plain_safe(value) {
            return None;
        }
    }
    Some(format!(
        "{pad}- kind: {}\n{pad}  namespace: {}\n{pad}  name: {}\n{pad}  operator: {}\n",
        pin.kind.kind(),
        pin.namespace,
        pin.name,
        pin.operator
    ))
}

/// The changed part of the list, re-parsed on its own and positioned as in
/// the new text, when it holds exactly the `wanted` pins.
fn reparse_window(
    text: &str,
    new_text: &str,
    window: &Range<usize>,
    new_window: &Range<usize>,
    wanted: &[Pin],
) -> Option<Node> {
    let mut part = Tree::parse(&new_text[new_window.clone()]).ok()?.root;
    let first_line = line_of(text, window.start);
    rebase(&mut part, window.start, first_line - 1);
    let Value::Sequence(new_items) = &part.value else {
        return None;
    };
    if new_items.len() != wanted.len()
        || new_items
            .iter()
            .zip(wanted)
            .any(|(node, pin)| read_pin(node).as_ref() != Some(pin))
    {
        return None;
    }
    Some(part)
}

/// The old tree with the re-parsed `part` in place of the pins `replaced`,
/// and every later position shifted.
fn spliced_tree(
    manifest: &Manifest,
    new_text: &str,
    (window, new_window): (&Range<usize>, &Range<usize>),
    replaced: std::ops::RangeInclusive<usize>,
    part: Node,
) -> Option<Tree> {
    let text = manifest.text.as_str();
    let delta = new_text.len() as isize - text.len() as isize;
    let line_delta = new_text[new_window.clone()].matches('\n').count() as isize
        - text[window.clone()].matches('\n').count() as isize;
    let mut tree = manifest.tree.clone();
    shift(
        &mut tree.root,
        window.end,
        line_of(text, window.end),
        delta,
        line_delta,
    );
    let (part_start, part_at) = (part.start, part.at);
    let Value::Sequence(new_items) = part.value else {
        return None;
    };
    let list = pins_mut(&mut tree.root)?;
    if *replaced.start() == 0 {
        // The list starts at its first item's dash.
        list.start = part_start;
        list.at = part_at;
    }
    let Value::Sequence(items) = &mut list.value else {
        return None;
    };
    items.splice(replaced, new_items);
    fix_ends(&mut tree.root);
    Some(tree)
}

/// The manifest after the edit, its warnings placed in the new tree.
fn edited(
    manifest: &Manifest,
    expected: &OperatorAssignmentSpec,
    text: String,
    tree: Tree,
    findings: Vec<validate::Finding>,
) -> Manifest {
    let mut warnings: Vec<Diagnostic> = findings
        .into_iter()
        .map(|f| Diagnostic {
            severity: f.severity,
            file: manifest.file.clone(),
            at: tree.locate(&f.path),
            message: f.message,
        })
        .collect();
    warnings.sort_by_key(|d| (d.at, d.severity));
    let mut assignment = manifest.assignment.clone();
    assignment.spec = expected.clone();
    Manifest {
        file: manifest.file.clone(),
        text,
        tree,
        assignment,
        warnings,
    }
}

/// Whether `value` is written the same plain or quoted, so no style choice
/// is involved: letters, digits, `-`, `_`, `.`, starting with a letter, and
/// not a word YAML reads as a boolean or null.
fn plain_safe(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphabetic)
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !matches!(
            lower.as_str(),
            "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
        )
}

/// The value of `key` in a mapping node.
fn entry<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.value {
        Value::Mapping(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
        _ => None,
    }
}

/// A pin read back from a re-parsed item: exactly the four keys, plain
/// scalars.
fn read_pin(node: &Node) -> Option<Pin> {
    let Value::Mapping(entries) = &node.value else {
        return None;
    };
    let mut keys: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    if keys != ["kind", "name", "namespace", "operator"] {
        return None;
    }
    let scalar = |key| match &entry(node, key)?.value {
        Value::Scalar(s) => Some(s.as_str()),
        _ => None,
    };
    let kind = scalar("kind")?;
    Some(Pin {
        kind: CamelKind::ALL.into_iter().find(|k| k.kind() == kind)?,
        namespace: scalar("namespace")?.to_string(),
        name: scalar("name")?.to_string(),
        operator: OperatorId::new(scalar("operator")?).ok()?,
    })
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// 1-based line of byte `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// The column of the `- ` that starts `item`, when that is the only thing
/// before the item on its line.
fn dash_column(text: &str, item: &Node) -> Option<usize> {
    let before = &text[line_start(text, item.start)..item.start];
    let indent = before.len() - before.trim_start_matches(' ').len();
    let rest = &before[indent..];
    (rest.starts_with('-') && rest.len() >= 2 && rest[1..].bytes().all(|b| b == b' '))
        .then_some(indent)
}

/// The whole lines of a list item: from its line's start to after the line
/// where it ends, provided only a comment follows it on that line.
fn item_lines(text: &str, item: &Node) -> Option<Range<usize>> {
    let newline = item.end + text[item.end..].find('\n')?;
    let rest = text[item.end..newline].trim_start_matches([' ', '\t']);
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    Some(line_start(text, item.start)..newline + 1)
}

/// The line before the one starting at `at`, without its newline.
fn previous_line(text: &str, at: usize) -> Option<&str> {
    let before = text[..at].strip_suffix('\n')?;
    Some(&before[line_start(before, before.len())..])
}

/// Whether the text after a list part cannot continue its last item: the
/// next line with content (comments aside) is a sibling item or less
/// indented, or there is none.
fn closes(after: &str, dash: usize) -> bool {
    for line in after.lines() {
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        return indent < dash || (indent == dash && content.starts_with("- "));
    }
    true
}

fn pins_mut(root: &mut Node) -> Option<&mut Node> {
    let Value::Mapping(entries) = &mut root.value else {
        return None;
    };
    let spec = entries.iter_mut().find(|e| e.key == "spec")?;
    let Value::Mapping(entries) = &mut spec.value.value else {
        return None;
    };
    Some(&mut entries.iter_mut().find(|e| e.key == "pins")?.value)
}

fn offset(value: usize, by: isize) -> usize {
    (value as isize + by) as usize
}

/// Moves every position at or after byte `from`, the start of line
/// `from_line`, by `delta` bytes and `lines` lines.
fn shift(node: &mut Node, from: usize, from_line: usize, delta: isize, lines: isize) {
    if node.start >= from {
        node.start = offset(node.start, delta);
        node.at.line = offset(node.at.line, lines);
    }
    if node.end >= from {
        node.end = offset(node.end, delta);
    }
    match &mut node.value {
        Value::Sequence(items) => items
            .iter_mut()
            .for_each(|n| shift(n, from, from_line, delta, lines)),
        Value::Mapping(entries) => {
            for Entry { key_at, value, .. } in entries {
                if key_at.line >= from_line {
                    key_at.line = offset(key_at.line, lines);
                }
                shift(value, from, from_line, delta, lines);
            }
        }
        Value::Scalar(_) | Value::Alias => {}
    }
}

/// Positions of a node parsed from a part starting at byte `start`, line
/// `lines + 1`, moved to the whole text.
fn rebase(node: &mut Node, start: usize, lines: usize) {
    node.start += start;
    node.end += start;
    node.at.line += lines;
    match &mut node.value {
        Value::Sequence(items) => items.iter_mut().for_each(|n| rebase(n, start, lines)),
        Value::Mapping(entries) => {
            for entry in entries {
                entry.key_at.line += lines;
                rebase(&mut entry.value, start, lines);
            }
        }
        Value::Scalar(_) | Value::Alias => {}
    }
}

/// The end of each block collection is the end of its last item.
fn fix_ends(node: &mut Node) {
    let last = match &mut node.value {
        Value::Sequence(items) => {
            items.iter_mut().for_each(fix_ends);
            items.last().map(|n| n.end)
        }
        Value::Mapping(entries) => {
            entries.iter_mut().for_each(|e| fix_ends(&mut e.value));
            entries.last().map(|e| e.value.end)
        }
        Value::Scalar(_) | Value::Alias => None,
    };
    if node.style == Style::Block
        && let Some(end) = last
    {
        node.end = end;
    }
}
