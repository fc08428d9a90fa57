//! The `OperatorAssignment` manifest as a file: parsing with positions,
//! validation, and format-preserving edits (and undoing a commit's edit,
//! [`revert`]).
//!
//! Flow of [`Manifest::parse`]:
//! 0. the size ([`api::MAX_MANIFEST_BYTES`]; [`Manifest::read`] checks it
//!    before reading the file) and UTF-8 ([`Manifest::from_bytes`]);
//! 1. YAML syntax (`tree`), one document, within the tree's limits of
//!    nesting and alias expansion (`tree::MAX_DEPTH`,
//!    `tree::MAX_ALIAS_NODES`);
//! 2. `apiVersion` and `kind`;
//! 3. unknown fields against the generated CRD schema (`fields`), each with
//!    a "did you mean";
//! 4. typed deserialization (wrong types, invalid operator ids, bad steps),
//!    from the tree of stage 1 when that is unambiguous (`typed`), else
//!    from the text by `serde-saphyr`, which words every error;
//! 5. the checks of `validate` (unknown operators, duplicate pins, scope, ...).
//!
//! Guarantees: every error names `file:line:column`; parsing never writes
//! anything; a [`Manifest`] exists only when there is no error (warnings are
//! kept on it). Stages 1, 2 and 4 stop at their first error; stages 3 and 5
//! report everything they find.
//!
//! YAML engines (issue 29's decision): one reader, `tree` (on
//! `serde-saphyr`'s parser), gives every position, byte range and style;
//! one editing interface, [`edit`], writes through `yaml-edit`, and for pin
//! edits first through a splice private to it. `yaml-edit` alone was
//! benchmarked on the P7 case (`assign` on 10,000 pins, target 100 ms): its
//! edit alone took 599 ms (median of 21 runs; 253 ms at best) against 25 ms
//! (16 ms) for the splice, and its lossless parse of that file costs more
//! than `tree`'s (`docs/performance.md`, P7). So the splice stays behind
//! [`edit`], and `tree` stays the source of positions.

// The meaning of a step's metric analysis (`healthGate.analysis`):
// validation parses it in every build, only the sync runs it.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) mod analysis;
pub(crate) mod desired;
pub(crate) mod diagnostic;
pub mod edit;
pub(crate) mod fields;
pub mod owner_keys;
pub(crate) mod revert;
pub(crate) mod template;
pub(crate) mod tree;
pub(crate) mod typed;
pub(crate) mod validate;
// The meaning of freeze windows (`rollout.windows`): validation compiles
// them in every build, only the sync judges them.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) mod windows;

use std::io::Read;
use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

pub(crate) use desired::Desired;
pub use diagnostic::{Diagnostic, Severity};
pub use revert::{Conflict, RevertError, Reverted, Revision, revert};
pub use template::starter;
pub use tree::{FieldPath, Location, Tree};
pub use typed::{Unsupported, from_tree};
pub use validate::{is_dns_label, is_dns_subdomain};

use crate::api::{self, OperatorAssignment};

/// A valid manifest, with its source text.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The file as the user named it, for messages.
    pub file: String,
    /// The text as read.
    pub text: String,
    /// Its YAML tree, with positions for messages.
    pub tree: Tree,
    /// The typed manifest.
    pub assignment: OperatorAssignment,
    /// Warnings validation found (no errors: then there is no `Manifest`).
    pub warnings: Vec<Diagnostic>,
}

/// Why a manifest could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file's path.
        file: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not valid; every error and warning found, in file order.
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

impl ManifestError {
    /// The diagnostics of an invalid manifest (errors and warnings).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ManifestError::Invalid(diagnostics) => diagnostics,
            ManifestError::Read { .. } => &[],
        }
    }
}

fn render(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let mut out: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    out.push(format!(
        "{errors} error{} in {}",
        if errors == 1 { "" } else { "s" },
        diagnostics
            .first()
            .map(|d| d.file.as_str())
            .unwrap_or("the manifest")
    ));
    out.join("\n")
}

impl Manifest {
    /// Reads and checks the manifest at `path`, naming it `file` in messages.
    /// A file over [`api::MAX_MANIFEST_BYTES`] is refused from its size,
    /// without reading it (and a pipe or device is read no further than the
    /// limit).
    pub fn read(path: &Path, file: &str) -> Result<Manifest, ManifestError> {
        let read_err = |source| ManifestError::Read {
            file: file.to_string(),
            source,
        };
        let handle = std::fs::File::open(path).map_err(read_err)?;
        let size = handle.metadata().map_err(read_err)?.len();
        if size > api::MAX_MANIFEST_BYTES as u64 {
            return Err(too_large(file, size));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        handle
            .take(api::MAX_MANIFEST_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        Manifest::from_bytes(file, bytes)
    }

    /// Checks a manifest given as bytes: they must be UTF-8 (the error
    /// names the line and column of the first byte that is not).
    pub fn from_bytes(file: &str, bytes: Vec<u8>) -> Result<Manifest, ManifestError> {
        if bytes.len() > api::MAX_MANIFEST_BYTES {
            return Err(too_large(file, bytes.len() as u64));
        }
        match String::from_utf8(bytes) {
            Ok(text) => Manifest::parse(file, text),
            Err(e)
                if e.as_bytes().starts_with(&[0xff, 0xfe])
                    || e.as_bytes().starts_with(&[0xfe, 0xff]) =>
            {
                Err(ManifestError::Invalid(vec![Diagnostic {
                    severity: Severity::Error,
                    file: file.to_string(),
                    at: Location { line: 1, column: 1 },
                    message: "the file is UTF-16 (it starts with a UTF-16 byte-order mark); \
                              YAML manifests are UTF-8: save it as UTF-8"
                        .into(),
                }]))
            }
            Err(e) => {
                let bytes = e.as_bytes();
                let good = e.utf8_error().valid_up_to();
                Err(ManifestError::Invalid(vec![Diagnostic {
                    severity: Severity::Error,
                    file: file.to_string(),
                    at: position(bytes, good),
                    message: format!(
                        "the file is not UTF-8 (byte 0x{:02x} here); YAML manifests are \
                         UTF-8: save it as UTF-8",
                        bytes[good]
                    ),
                }]))
            }
        }
    }

    /// Checks `text` (see the module documentation for the stages).
    pub fn parse(file: &str, text: String) -> Result<Manifest, ManifestError> {
        let diagnostic = |severity, at, message: String| Diagnostic {
            severity,
            file: file.to_string(),
            at,
            message,
        };
        let error = |at, message: String| {
            ManifestError::Invalid(vec![diagnostic(Severity::Error, at, message)])
        };

        if text.len() > api::MAX_MANIFEST_BYTES {
            return Err(too_large(file, text.len() as u64));
        }
        let tree = Tree::parse(&text)
            .map_err(|e| error(e.at, format!("YAML syntax error: {}", e.message)))?;
        if !matches!(tree.root.value, tree::Value::Mapping(_)) {
            return Err(error(
                tree.root.at,
                format!(
                    "expected an {} manifest (a mapping), found something else",
                    api::KIND
                ),
            ));
        }
        check_header(&tree).map_err(|(at, message)| error(at, message))?;

        let unknown = fields::check(&tree.root, &document_schema());
        if !unknown.is_empty() {
            return Err(ManifestError::Invalid(
                unknown
                    .into_iter()
                    .map(|u| diagnostic(Severity::Error, u.at, u.message))
                    .collect(),
            ));
        }

        // One parse: the typed value from the tree when it is unambiguous;
        // otherwise (and for every error message) from the text.
        let from_tree = if tree.plain {
            typed::from_tree::<OperatorAssignment>(&tree.root).ok()
        } else {
            None
        };
        let assignment: OperatorAssignment = match from_tree {
            Some(assignment) => assignment,
            None => serde_saphyr::from_str(&text).map_err(|e| {
                let at = e
                    .location()
                    .filter(|l| l.line() > 0)
                    .map(|l| Location {
                        line: l.line() as usize,
                        column: l.column() as usize,
                    })
                    .unwrap_or(tree.root.at);
                error(at, serde_message(&e))
            })?,
        };
        check_metadata(&assignment.metadata)
            .map_err(|(path, message)| error(tree.locate(&FieldPath::parse(path)), message))?;

        let mut findings: Vec<Diagnostic> = validate::validate(&assignment.spec)
            .into_iter()
            .map(|f| diagnostic(f.severity, tree.locate(&f.path), f.message))
            .collect();
        findings.sort_by_key(|d| (d.at, d.severity));
        if findings.iter().any(|d| d.severity == Severity::Error) {
            return Err(ManifestError::Invalid(findings));
        }
        Ok(Manifest {
            file: file.to_string(),
            text,
            tree,
            assignment,
            warnings: findings,
        })
    }
}

/// A manifest over [`api::MAX_MANIFEST_BYTES`], said at its first line.
fn too_large(file: &str, size: u64) -> ManifestError {
    ManifestError::Invalid(vec![Diagnostic {
        severity: Severity::Error,
        file: file.to_string(),
        at: Location { line: 1, column: 1 },
        message: format!(
            "the manifest is {size} bytes, over the limit of {} bytes (1.5 MiB, the most \
             etcd stores in one object by default); split the assignment, or pin fewer \
             resources and use rules",
            api::MAX_MANIFEST_BYTES
        ),
    }])
}

/// Line and column (from 1, in characters) of byte `offset` of `bytes`,
/// whose first `offset` bytes are UTF-8.
fn position(bytes: &[u8], offset: usize) -> Location {
    let before = &bytes[..offset];
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = std::str::from_utf8(&before[line_start..]).map_or(0, |s| s.chars().count()) + 1;
    Location { line, column }
}

/// The CRD's schema plus the fields the API server adds to every object
/// (`apiVersion`, `kind`, and `metadata`, which it checks itself).
fn document_schema() -> JSONSchemaProps {
    let crd = api::crd();
    let mut schema = crd
        .spec
        .versions
        .into_iter()
        .next()
        .and_then(|v| v.schema)
        .and_then(|s| s.open_api_v3_schema)
        .expect("the generated CRD has a schema");
    let properties = schema.properties.get_or_insert_with(Default::default);
    for key in ["apiVersion", "kind"] {
        properties.entry(key.to_string()).or_default();
    }
    // The CRD leaves `metadata` to the API server, but a manifest in Git is
    // read here first: name its fields so that `lables:` is not silently ignored.
    let metadata = properties.entry("metadata".to_string()).or_default();
    metadata.properties = Some(
        OBJECT_META_FIELDS
            .iter()
            .map(|key| (key.to_string(), JSONSchemaProps::default()))
            .collect(),
    );
    schema
}

/// The fields of a Kubernetes `ObjectMeta`.
const OBJECT_META_FIELDS: [&str; 15] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// The name and namespace the API server would refuse, refused here first.
fn check_metadata(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<(), (&'static str, String)> {
    let name = metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(("metadata.name", "`metadata.name` is required".into()));
    }
    if !validate::is_dns_subdomain(name) {
        return Err((
            "metadata.name",
            format!(
                "`metadata.name` `{name}` is not a valid name: use lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit"
            ),
        ));
    }
    if let Some(namespace) = metadata.namespace.as_deref()
        && !validate::is_dns_label(namespace)
    {
        return Err((
            "metadata.namespace",
            format!(
                "`metadata.namespace` `{namespace}` is not a valid namespace name: use at most 63 lowercase letters, digits and `-`, starting and ending with a letter or digit"
            ),
        ));
    }
    Ok(())
}

fn check_header(tree: &Tree) -> Result<(), (Location, String)> {
    let expected_api = format!("{}/{}", api::GROUP, api::VERSION);
    for (key, expected) in [("apiVersion", expected_api.as_str()), ("kind", api::KIND)] {
        let path = FieldPath::root().key(key);
        match tree.get(&path).map(|n| &n.value) {
            None => {
                return Err((
                    tree.root.at,
                    format!("`{key}` is missing; expected `{key}: {expected}`"),
                ));
            }
            Some(tree::Value::Scalar(value)) if value == expected => {}
            Some(_) => {
                return Err((
                    tree.locate(&path),
                    format!("`{key}` must be `{expected}` for an {} manifest", api::KIND),
                ));
            }
        }
    }
    Ok(())
}

/// The message of a deserialization error without its position or snippet
/// (the caller prints the position in the common `file:line:column` form).
fn serde_message(error: &serde_saphyr::Error) -> String {
    let text = error.without_snippet().to_string();
    let text = text.lines().next().unwrap_or_default().trim();
    let text = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => text,
    };
    let text = text.trim_start_matches("error: ");
    // Say it in the manifest's terms rather than the parser's.
    if let Some(key) = text.strip_prefix("duplicate mapping key: ") {
        let key = key.split(',').next().unwrap_or(key);
        return format!("duplicate key `{key}`: a key may appear once in a mapping");
    }
    match text {
        "expected sequence start" => "expected a list here".into(),
        "expected mapping start" => "expected a mapping (key: value pairs) here".into(),
        "invalid boolean" => "expected `true` or `false`".into(),
        other => other.to_string(),
    }
}
