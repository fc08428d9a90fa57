//! The upstream Apache Camel K kinds this project assigns to operators, and the
//! key that names a resource's operator.
//!
//! Upstream Camel K reads only the annotation [`OPERATOR_ID_KEY`]; this project
//! also sets a label with the same key and value so operators can filter their
//! watches on the server. The two are always written together, and read
//! through one rule, [`owner_of`]: the label, else the annotation, and the
//! annotation when they disagree. `appliers` says which other tools
//! write them.

pub(crate) mod appliers;
mod crd;
mod owner;
pub(crate) mod release;
pub(crate) mod scopes;
pub(crate) mod status;

pub use appliers::{CO_OWNER, keys_co_owned};
pub use crd::generated_crd;
pub use owner::{OwnerKey, ReadOwner, owner_from_keys, owner_id, owner_of, owner_of_meta};
pub use scopes::{
    DEFAULT_LOCK, Judged, Locks, Namespaces, OperatorScope, Overlap, UnownedRules, UnreadableScope,
    Watch, overlaps,
};
pub use status::{condition, kit_name, phase};

/// Label and annotation key naming the operator that owns a Camel K resource.
pub const OPERATOR_ID_KEY: &str = "camel.apache.org/operator.id";

/// API group of every Camel K kind.
pub const GROUP: &str = "camel.apache.org";

/// One Camel K custom resource kind, as upstream defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CamelKind {
    /// A Camel route the operator builds and runs.
    Integration,
    /// The image an Integration runs on, built once and shared.
    IntegrationKit,
    /// An operator's configuration for its namespace or the cluster.
    IntegrationPlatform,
    /// Settings an Integration can name to override the platform's.
    IntegrationProfile,
    /// One image build of a kit.
    Build,
    /// Binds a source to a sink through Kamelets; creates an Integration.
    Pipe,
    /// The `v1alpha1` predecessor of `Pipe`.
    KameletBinding,
    /// The Camel version and its artifacts a runtime provides.
    CamelCatalog,
    /// A reusable route template (read only, never owned).
    Kamelet,
}

impl CamelKind {
    /// Every kind, in a stable order.
    pub const ALL: [CamelKind; 9] = [
        CamelKind::Integration,
        CamelKind::IntegrationKit,
        CamelKind::IntegrationPlatform,
        CamelKind::IntegrationProfile,
        CamelKind::Build,
        CamelKind::Pipe,
        CamelKind::KameletBinding,
        CamelKind::CamelCatalog,
        CamelKind::Kamelet,
    ];

    /// The kind's name, as in `kind:` (`Integration`).
    pub fn kind(self) -> &'static str {
        match self {
            CamelKind::Integration => "Integration",
            CamelKind::IntegrationKit => "IntegrationKit",
            CamelKind::IntegrationPlatform => "IntegrationPlatform",
            CamelKind::IntegrationProfile => "IntegrationProfile",
            CamelKind::Build => "Build",
            CamelKind::Pipe => "Pipe",
            CamelKind::KameletBinding => "KameletBinding",
            CamelKind::CamelCatalog => "CamelCatalog",
            CamelKind::Kamelet => "Kamelet",
        }
    }

    /// Served version; KameletBinding was only ever `v1alpha1` and is gone upstream.
    pub fn version(self) -> &'static str {
        match self {
            CamelKind::KameletBinding => "v1alpha1",
            _ => "v1",
        }
    }

    /// The kind's plural resource name, as in URLs (`integrations`).
    pub fn plural(self) -> &'static str {
        match self {
            CamelKind::Integration => "integrations",
            CamelKind::IntegrationKit => "integrationkits",
            CamelKind::IntegrationPlatform => "integrationplatforms",
            CamelKind::IntegrationProfile => "integrationprofiles",
            CamelKind::Build => "builds",
            CamelKind::Pipe => "pipes",
            CamelKind::KameletBinding => "kameletbindings",
            CamelKind::CamelCatalog => "camelcatalogs",
            CamelKind::Kamelet => "kamelets",
        }
    }

    /// Short name as in the upstream CRDs (`kubectl get it`).
    pub(crate) fn short_name(self) -> &'static str {
        match self {
            CamelKind::Integration => "it",
            CamelKind::IntegrationKit => "ik",
            CamelKind::IntegrationPlatform => "itp",
            CamelKind::IntegrationProfile => "ipr",
            CamelKind::Build => "ikb",
            CamelKind::Pipe => "pp",
            CamelKind::KameletBinding => "klb",
            CamelKind::CamelCatalog => "cc",
            CamelKind::Kamelet => "kl",
        }
    }

    /// `plural.group`, the name of the kind's CustomResourceDefinition.
    pub(crate) fn crd_name(self) -> String {
        format!("{}.{}", self.plural(), GROUP)
    }

    /// `group/version` of the kind (`camel.apache.org/v1`).
    pub fn api_version(self) -> String {
        format!("{}/{}", GROUP, self.version())
    }

    /// The dynamic API resource for clients of this kind.
    pub fn api_resource(self) -> kube::api::ApiResource {
        kube::api::ApiResource {
            group: GROUP.into(),
            version: self.version().into(),
            api_version: self.api_version(),
            kind: self.kind().into(),
            plural: self.plural().into(),
        }
    }

    /// Finds a kind by its name, plural, singular or short name, ignoring case,
    /// as `kubectl get` does.
    pub fn parse(name: &str) -> Option<CamelKind> {
        let name = name.to_ascii_lowercase();
        CamelKind::ALL.into_iter().find(|k| {
            k.kind().eq_ignore_ascii_case(&name) || k.plural() == name || k.short_name() == name
        })
    }
}

/// Manifests name kinds exactly as upstream does (`Integration`, `Pipe`, ...).
impl serde::Serialize for CamelKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.kind())
    }
}

impl<'de> serde::Deserialize<'de> for CamelKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if let Some(kind) = CamelKind::ALL.into_iter().find(|k| k.kind() == name) {
            return Ok(kind);
        }
        let hint = match CamelKind::parse(&name) {
            Some(kind) => format!("; did you mean `{kind}`?"),
            None => CamelKind::closest(&name)
                .map(|kind| format!("; did you mean `{kind}`?"))
                .unwrap_or_default(),
        };
        Err(serde::de::Error::custom(format!(
            "unknown Camel K kind `{name}`{hint} (kinds: {})",
            CamelKind::ALL.map(CamelKind::kind).join(", ")
        )))
    }
}

impl schemars::JsonSchema for CamelKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CamelKind".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": CamelKind::ALL.map(CamelKind::kind),
        })
    }
}

impl CamelKind {
    /// The kind whose name is closest to a misspelt `name`, if any is close.
    pub fn closest(name: &str) -> Option<CamelKind> {
        CamelKind::ALL
            .into_iter()
            .map(|k| {
                (
                    strsim::jaro_winkler(
                        &name.to_ascii_lowercase(),
                        &k.kind().to_ascii_lowercase(),
                    ),
                    k,
                )
            })
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| k)
    }
}

impl std::fmt::Display for CamelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_kubectl_spellings() {
        assert_eq!(
            CamelKind::parse("integration"),
            Some(CamelKind::Integration)
        );
        assert_eq!(
            CamelKind::parse("Integrations"),
            Some(CamelKind::Integration)
        );
        assert_eq!(CamelKind::parse("it"), Some(CamelKind::Integration));
        assert_eq!(CamelKind::parse("ikb"), Some(CamelKind::Build));
        assert_eq!(CamelKind::parse("pipe"), Some(CamelKind::Pipe));
        assert_eq!(CamelKind::parse("deployment"), None);
    }

    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in CamelKind::ALL {
            assert!(seen.insert(k.plural()));
            assert!(seen.insert(k.short_name()));
        }
    }
}
