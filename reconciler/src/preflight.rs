//! Before a command talks to the cluster: are the CustomResourceDefinitions
//! it needs installed?
//!
//! Without this check a missing CRD surfaces deep inside a command as the API
//! server's bare `404 page not found` (which kube reports as "Failed to parse
//! error data"), sometimes after the command already wrote something (a Lease,
//! an Event). [`check_crds`] runs first and names what is missing and how to
//! install it ([`MissingCrd`]).
//!
//! How it looks: through API discovery, `GET /apis/GROUP/VERSION`, once per
//! group-version (two requests for everything this project uses), and a kind
//! counts as installed when that list names its plural. Not by reading the
//! `CustomResourceDefinition` objects: users of the plugin and the
//! reconciler's service account (`examples/deploy/reconciler/rbac.yaml`) are
//! not granted `apiextensions.k8s.io`, and should not need it. Not by listing
//! each resource with `limit=1` either: that needs `list` on it in the
//! namespace asked about, and a 403 would hide whether the CRD exists.
//! Discovery is open to every authenticated user (the built-in
//! `system:discovery` role), so no RBAC has to be added for it, and it also
//! tells whether the version a client speaks is served, not just whether some
//! CRD of that name exists. A group-version the server does not serve answers
//! 404 with a plain-text body; that is the "missing" answer.

use std::collections::BTreeMap;

use kube::Client;

use crate::camel_k::{CamelKind, GROUP as CAMEL_GROUP};

/// The Camel K release whose CRD install command the hint quotes: the one
/// the tests run, pinned in `tests/camel-k/versions.env`.
pub(crate) const CAMEL_K_RELEASE: &str = pinned(
    include_str!("../../tests/camel-k/versions.env"),
    "CAMEL_K_VERSION",
);

/// The value of the `KEY=VALUE` line of `env` naming `key`, at compile time
/// (a key that is missing fails the build): how the workspace reads the
/// `versions.env` files that pin its releases (the test kit too).
pub const fn pinned(env: &'static str, key: &str) -> &'static str {
    let (mut rest, key) = (env.as_bytes(), key.as_bytes());
    while !rest.is_empty() {
        let mut end = 0;
        while end < rest.len() && rest[end] != b'\n' {
            end += 1;
        }
        let (line, after) = rest.split_at(end);
        let mut named = line.len() > key.len() && line[key.len()] == b'=';
        let mut i = 0;
        while named && i < key.len() {
            named = line[i] == key[i];
            i += 1;
        }
        if named {
            let (_, value) = line.split_at(key.len() + 1);
            match std::str::from_utf8(value) {
                Ok(value) => return value.trim_ascii(),
                Err(_) => panic!("a pinned value is not UTF-8"),
            }
        }
        rest = match after.split_first() {
            Some((_, next)) => next,
            None => after,
        };
    }
    panic!("a pinned key is missing from its versions.env")
}

/// A CustomResourceDefinition a command may need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Crd {
    /// The project's own `OperatorAssignment`.
    OperatorAssignment,
    /// An upstream Camel K kind.
    Camel(CamelKind),
}

impl Crd {
    /// Integration: the Camel K CRD every command that talks to the cluster needs.
    pub const INTEGRATION: Crd = Crd::Camel(CamelKind::Integration);

    /// The CRD's API group.
    pub fn group(self) -> &'static str {
        match self {
            Crd::OperatorAssignment => crate::api::GROUP,
            Crd::Camel(_) => CAMEL_GROUP,
        }
    }

    /// The API version the tool uses.
    pub fn version(self) -> &'static str {
        match self {
            Crd::OperatorAssignment => crate::api::VERSION,
            Crd::Camel(kind) => kind.version(),
        }
    }

    /// The plural resource name, as in URLs.
    pub fn plural(self) -> &'static str {
        match self {
            Crd::OperatorAssignment => "operatorassignments",
            Crd::Camel(kind) => kind.plural(),
        }
    }

    /// The kind, as in `kind:`.
    pub fn kind(self) -> &'static str {
        match self {
            Crd::OperatorAssignment => crate::api::KIND,
            Crd::Camel(kind) => kind.kind(),
        }
    }

    /// `plural.group`: the name of the CustomResourceDefinition.
    pub fn name(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// `group/version`, as discovery serves it.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group(), self.version())
    }

    /// How to install it, as a sentence for people.
    pub fn install_hint(self) -> String {
        match self {
            Crd::OperatorAssignment => format!(
                "install {} with `reconciler crds | kubectl apply --server-side -f -` \
                 (or `kubectl apply --server-side -f examples/deploy/crds/` in a checkout of this project)",
                self.name()
            ),
            Crd::Camel(_) => format!(
                "install the CRDs of your Camel K release, for example \
                 `kubectl apply --server-side -k 'github.com/apache/camel-k/v2/pkg/resources/config/crd?ref={CAMEL_K_RELEASE}'`, \
                 or the crds/ folder of the Camel K Helm chart"
            ),
        }
    }

    /// The one line a command prints when it skips an optional kind that is
    /// not installed (the same in `get`, `plan` and the reconciler's log).
    pub fn skipped_note(self) -> String {
        format!(
            "note: the {} CustomResourceDefinition ({}) is not installed; skipped",
            self.kind(),
            self.name()
        )
    }
}

impl std::fmt::Display for Crd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Required CustomResourceDefinitions that are not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingCrd {
    /// In the order they were asked for; never empty.
    pub(crate) missing: Vec<Crd>,
}

impl MissingCrd {
    /// The missing CRDs, in the order they were asked for.
    pub fn crds(&self) -> &[Crd] {
        &self.missing
    }

    /// One sentence per way to install what is missing (the Camel K kinds
    /// share one).
    pub fn hints(&self) -> Vec<String> {
        let mut hints: Vec<String> = Vec::new();
        for crd in &self.missing {
            let hint = crd.install_hint();
            if !hints.contains(&hint) {
                hints.push(hint);
            }
        }
        hints
    }
}

impl std::fmt::Display for MissingCrd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.missing.as_slice() {
            [one] => write!(
                f,
                "the CustomResourceDefinition {one} is not installed in this cluster"
            ),
            many => {
                let names: Vec<String> = many.iter().map(|c| c.name()).collect();
                write!(
                    f,
                    "these CustomResourceDefinitions are not installed in this cluster: {}",
                    names.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for MissingCrd {}

/// Why the check did not pass.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// Required CRDs are not installed.
    #[error(transparent)]
    Missing(#[from] MissingCrd),
    /// Discovery of an API group version failed.
    #[error("asking the API server which {api_version} resources it serves: {source}")]
    Discovery {
        /// The `group/version` asked about.
        api_version: String,
        /// The API server's error.
        #[source]
        source: kube::Error,
    },
}

/// Checks that every CRD of `required` is installed and served at the version
/// this project speaks; returns the CRDs of `optional` that are not (a
/// command skips those with [`Crd::skipped_note`]).
///
/// Fails with [`PreflightError::Missing`] naming every missing required CRD.
pub async fn check_crds(
    client: &Client,
    required: &[Crd],
    optional: &[Crd],
) -> Result<Vec<Crd>, PreflightError> {
    let mut served: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    for crd in required.iter().chain(optional) {
        let api_version = crd.api_version();
        if served.contains_key(&api_version) {
            continue;
        }
        let plurals = match client.list_api_group_resources(&api_version).await {
            Ok(list) => Some(list.resources.into_iter().map(|r| r.name).collect()),
            // The group-version is not served at all (the body is the plain
            // text `404 page not found`, hence no parsed Status).
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(source) => {
                return Err(PreflightError::Discovery {
                    api_version,
                    source,
                });
            }
        };
        served.insert(api_version, plurals);
    }
    let installed = |crd: &Crd| {
        served
            .get(&crd.api_version())
            .and_then(Option::as_ref)
            .is_some_and(|plurals| plurals.iter().any(|p| p == crd.plural()))
    };
    let mut missing: Vec<Crd> = Vec::new();
    for crd in required {
        if !installed(crd) && !missing.contains(crd) {
            missing.push(*crd);
        }
    }
    if !missing.is_empty() {
        return Err(MissingCrd { missing }.into());
    }
    Ok(optional
        .iter()
        .filter(|crd| !installed(crd) && !required.contains(crd))
        .copied()
        .collect())
}

/// The CRDs of these Camel K kinds.
pub fn camel_kinds(kinds: &[CamelKind]) -> Vec<Crd> {
    kinds.iter().map(|k| Crd::Camel(*k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_versions_match_the_crds_the_project_installs() {
        let ours = crate::api::crd();
        assert_eq!(
            Crd::OperatorAssignment.name(),
            ours.metadata.name.clone().unwrap()
        );
        assert_eq!(Crd::OperatorAssignment.plural(), ours.spec.names.plural);
        assert_eq!(Crd::INTEGRATION.name(), CamelKind::Integration.crd_name());
        assert_eq!(
            Crd::Camel(CamelKind::KameletBinding).api_version(),
            "camel.apache.org/v1alpha1"
        );
    }

    #[test]
    fn the_message_names_each_missing_crd_and_each_fix_once() {
        let one = MissingCrd {
            missing: vec![Crd::OperatorAssignment],
        };
        assert_eq!(
            one.to_string(),
            "the CustomResourceDefinition operatorassignments.camelk.dev is not installed in this cluster"
        );
        assert!(one.hints()[0].contains("reconciler crds | kubectl apply --server-side -f -"));
        let three = MissingCrd {
            missing: vec![
                Crd::OperatorAssignment,
                Crd::INTEGRATION,
                Crd::Camel(CamelKind::Pipe),
            ],
        };
        assert!(
            three
                .to_string()
                .ends_with("operatorassignments.camelk.dev, integrations.camel.apache.org, pipes.camel.apache.org"),
            "{three}"
        );
        assert_eq!(three.hints().len(), 2);
        assert!(three.hints()[1].contains(&format!(
            "camel-k/v2/pkg/resources/config/crd?ref={CAMEL_K_RELEASE}"
        )));
    }

    /// The release is the one the shell scripts and the Makefile read.
    #[test]
    fn the_release_is_the_pinned_one() {
        let env = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/camel-k/versions.env");
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                ". \"$1\" && printf %s \"$CAMEL_K_VERSION\"",
                "bash",
                env,
            ])
            .output()
            .expect("run bash");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(CAMEL_K_RELEASE, String::from_utf8_lossy(&out.stdout));
        assert!(CAMEL_K_RELEASE.starts_with("v2."), "{CAMEL_K_RELEASE}");
        assert_eq!(pinned("A=1\nAB=2 \n# AB=3\n", "AB"), "2");
        assert_eq!(pinned("AB=2\nA=1", "A"), "1");
    }
}
