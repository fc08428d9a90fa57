//! Which upstream Camel K operators handle resources that carry no owner key,
//! in which namespaces, and which pairs of them overlap: two operators that
//! both reconcile one unowned resource write it unfenced, each on its own
//! cache, and upstream calls the result undefined.
//!
//! Pure: the caller reads each operator's Deployment ([`OperatorScope::of_deployment`])
//! and the namespaces' locks ([`Locks`]); nothing here does I/O.
//!
//! The rules, from upstream's `pkg/platform/operator.go`:
//! - An operator's cache holds its `WATCH_NAMESPACE` (unset or empty: every
//!   namespace; a comma-separated list from 2.11 on) and its own
//!   `NAMESPACE`, which is always added.
//! - v1.10 to v2.10 ([`UnownedRules::IdOrLocal`]): it handles a resource with
//!   no owner key when its id is `camel-k` (the default of every install) or
//!   empty (an empty id equals the resource's empty one), or when it is
//!   namespaced (local).
//! - 2.11 on ([`UnownedRules::AnyWatcher`]): every operator that watches the
//!   resource handles it.
//! - Either way a global operator yields, outside its own namespace, in a
//!   namespace that is locked: by a Lease `<platform>-lock` beside an
//!   IntegrationPlatform of that name (v2.10), by a Lease `camel-k-lock`
//!   (2.11). A local operator never yields.
//!
//! Assumptions: the id is `KAMEL_OPERATOR_ID`, else `OPERATOR_ID` (the first
//! non-empty); two Deployments of one id and namespace share one lock, so
//! only one of them acts and they are no pair.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar};

/// The id every standard Camel K install gives its operator.
pub(crate) const DEFAULT_OPERATOR_ID: &str = "camel-k";
/// The lock a 2.11 operator reads as "this namespace has a local operator".
pub const DEFAULT_LOCK: &str = "camel-k-lock";

/// Which operators take a resource with no owner key, by Camel K release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnownedRules {
    /// v1.10 to v2.10: an operator with the default (or no) id, or a local one.
    IdOrLocal,
    /// 2.11 on: every operator that watches the resource.
    AnyWatcher,
}

impl UnownedRules {
    /// The rules of the release an image tag names (`2.10.1`, `v2.11.0`,
    /// `2.11.0-SNAPSHOT`); a tag that names no version counts as v2.10.
    pub fn of_version(version: Option<&str>) -> UnownedRules {
        let parsed = version.and_then(|v| {
            let mut parts = v.trim_start_matches('v').split(['.', '-']);
            let major: u32 = parts.next()?.parse().ok()?;
            let minor: u32 = parts.next()?.parse().ok()?;
            Some((major, minor))
        });
        match parsed {
            Some(release) if release >= (2, 11) => UnownedRules::AnyWatcher,
            _ => UnownedRules::IdOrLocal,
        }
    }

    /// How a report names them.
    pub fn name(self) -> &'static str {
        match self {
            UnownedRules::IdOrLocal => "v2.10",
            UnownedRules::AnyWatcher => "2.11",
        }
    }
}

/// The namespaces an operator's cache holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watch {
    /// `WATCH_NAMESPACE` unset or empty.
    Global,
    /// `WATCH_NAMESPACE`'s namespaces (plus, in the cache, its own).
    Namespaces(BTreeSet<String>),
}

/// One running upstream operator, as its Deployment's environment sets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorScope {
    /// The Deployment that runs it: namespace and name.
    pub deployment: (String, String),
    /// `KAMEL_OPERATOR_ID`, else `OPERATOR_ID`; empty when neither is set.
    pub id: String,
    /// `NAMESPACE`: its own namespace (lock, platform), else the Deployment's.
    pub namespace: String,
    /// `WATCH_NAMESPACE`.
    pub watch: Watch,
    /// The Camel K release its image tag names, when it names one.
    pub version: Option<String>,
}

/// Why an operator's scope could not be read from its Deployment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Deployment {namespace}/{name} sets {variable} from {source_kind}, which is not read")]
pub struct UnreadableScope {
    /// The Deployment's namespace.
    pub namespace: String,
    /// The Deployment's name.
    pub name: String,
    /// The environment variable not read.
    pub variable: String,
    /// Where the value comes from (`a ConfigMap`, `a Secret`, `field spec.nodeName`).
    pub source_kind: String,
}

/// Namespaces where a lock makes a global operator yield.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Locks {
    /// Namespaces holding an IntegrationPlatform `P` and a Lease `P-lock` (v2.10).
    pub by_platform: BTreeSet<String>,
    /// Namespaces holding a Lease [`DEFAULT_LOCK`] (2.11).
    pub by_default_lock: BTreeSet<String>,
}

/// A set of namespaces that may be "all of them but a few".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// Every namespace except these.
    AllExcept(BTreeSet<String>),
    /// Only these.
    Only(BTreeSet<String>),
}

impl Namespaces {
    /// Whether `namespace` is one of them.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::AllExcept(except) => !except.contains(namespace),
            Namespaces::Only(only) => only.contains(namespace),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        matches!(self, Namespaces::Only(only) if only.is_empty())
    }

    /// The namespaces in both.
    pub fn intersect(&self, other: &Namespaces) -> Namespaces {
        use Namespaces::{AllExcept, Only};
        match (self, other) {
            (Only(a), Only(b)) => Only(a.intersection(b).cloned().collect()),
            (Only(a), AllExcept(e)) | (AllExcept(e), Only(a)) => {
                Only(a.difference(e).cloned().collect())
            }
            (AllExcept(a), AllExcept(b)) => AllExcept(a.union(b).cloned().collect()),
        }
    }
}

impl fmt::Display for Namespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
        match self {
            Namespaces::AllExcept(except) if except.is_empty() => f.write_str("every namespace"),
            Namespaces::AllExcept(except) => write!(f, "every namespace but {}", list(except)),
            Namespaces::Only(only) if only.is_empty() => f.write_str("no namespace"),
            Namespaces::Only(only) => f.write_str(&list(only)),
        }
    }
}

/// The value of an environment variable as the Pod would see it.
enum EnvValue {
    Unset,
    Value(String),
    Unreadable(String),
}

fn env_value(container: &Container, deployment_namespace: &str, name: &str) -> EnvValue {
    let Some(var) = container
        .env
        .iter()
        .flatten()
        .rev() // the last definition of a name wins, as in a Pod
        .find(|e| e.name == name)
    else {
        return EnvValue::Unset;
    };
    from_var(var, deployment_namespace)
}

fn from_var(var: &EnvVar, deployment_namespace: &str) -> EnvValue {
    let Some(from) = &var.value_from else {
        return EnvValue::Value(var.value.clone().unwrap_or_default());
    };
    match (
        &from.field_ref,
        &from.config_map_key_ref,
        &from.secret_key_ref,
    ) {
        // The downward API: what namespaced and OLM installs set.
        (Some(field), _, _) if field.field_path == "metadata.namespace" => {
            EnvValue::Value(deployment_namespace.to_string())
        }
        (Some(field), _, _) => EnvValue::Unreadable(format!("field {}", field.field_path)),
        (_, Some(_), _) => EnvValue::Unreadable("a ConfigMap".into()),
        (_, _, Some(_)) => EnvValue::Unreadable("a Secret".into()),
        _ => EnvValue::Unreadable("a resource field".into()),
    }
}

/// Whether `container` runs an upstream Camel K operator: `kamel operator`,
/// or (an image that wraps it) the variables only it reads together.
fn is_camel_k_operator(container: &Container) -> bool {
    let words: Vec<&str> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(String::as_str)
        .collect();
    let runs_kamel = words
        .windows(2)
        .any(|w| w[0].rsplit('/').next() == Some("kamel") && w[1] == "operator");
    let has = |name: &str| container.env.iter().flatten().any(|e| e.name == name);
    runs_kamel
        || has("KAMEL_OPERATOR_ID")
        || (has("OPERATOR_ID") && has("WATCH_NAMESPACE") && has("NAMESPACE"))
}

impl OperatorScope {
    /// The upstream operator `deployment` runs, if it runs one and is not
    /// scaled to zero; its version is what `image_version` reads from its
    /// image (`fleet::image_version`, a layer above this one).
    pub fn of_deployment(
        deployment: &Deployment,
        image_version: fn(&str) -> Option<&str>,
    ) -> Option<Result<OperatorScope, UnreadableScope>> {
        let spec = &deployment.spec;
        if spec.replicas == Some(0) {
            return None;
        }
        let container = spec
            .template
            .spec
            .as_ref()?
            .containers
            .iter()
            .find(|c| is_camel_k_operator(c))?;
        let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
        let name = deployment.metadata.name.clone().unwrap_or_default();
        let read = |variable: &str| match env_value(container, &namespace, variable) {
            EnvValue::Unset => Ok(None),
            EnvValue::Value(v) => Ok(Some(v.trim().to_string())),
            EnvValue::Unreadable(source_kind) => Err(UnreadableScope {
                namespace: namespace.clone(),
                name: name.clone(),
                variable: variable.into(),
                source_kind,
            }),
        };
        let scope = (|| {
            let id = match read("KAMEL_OPERATOR_ID")?.filter(|v| !v.is_empty()) {
                Some(id) => id,
                None => read("OPERATOR_ID")?.unwrap_or_default(),
            };
            let own = read("NAMESPACE")?
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| namespace.clone());
            let watched: BTreeSet<String> = read("WATCH_NAMESPACE")?
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            let watch = if watched.is_empty() {
                Watch::Global
            } else {
                Watch::Namespaces(watched)
            };
            let version = container
                .image
                .as_deref()
                .and_then(image_version)
                .map(str::to_string);
            Ok(OperatorScope {
                deployment: (namespace.clone(), name.clone()),
                id,
                namespace: own,
                watch,
                version,
            })
        })();
        Some(scope)
    }

    /// The rules of the release it runs.
    pub fn rules(&self) -> UnownedRules {
        UnownedRules::of_version(self.version.as_deref())
    }

    /// Whether it watches some namespaces only (`WATCH_NAMESPACE` set).
    pub fn is_local(&self) -> bool {
        matches!(self.watch, Watch::Namespaces(_))
    }

    /// Where it reconciles resources that have no owner key, under `rules`.
    pub fn handles_unowned(&self, rules: UnownedRules, locks: &Locks) -> Namespaces {
        if let Watch::Namespaces(watched) = &self.watch {
            // Local: its cache is all it sees, and it never yields to a lock.
            // Both rule sets let a local operator take unowned resources.
            let mut seen = watched.clone();
            seen.insert(self.namespace.clone());
            return Namespaces::Only(seen);
        }
        let (takes_unowned, locked) = match rules {
            UnownedRules::IdOrLocal => (
                self.id.is_empty() || self.id == DEFAULT_OPERATOR_ID,
                &locks.by_platform,
            ),
            UnownedRules::AnyWatcher => (true, &locks.by_default_lock),
        };
        if !takes_unowned {
            return Namespaces::Only(BTreeSet::new());
        }
        // A global operator keeps its own namespace even when it is locked.
        let mut yields = locked.clone();
        yields.remove(&self.namespace);
        Namespaces::AllExcept(yields)
    }

    /// How a report names it: `camel-k (camel-k/camel-k-operator, global, v2.10)`.
    pub fn describe(&self, rules: UnownedRules) -> String {
        let id = if self.id.is_empty() {
            "<no id>"
        } else {
            &self.id
        };
        let watch = match &self.watch {
            Watch::Global => "global".to_string(),
            Watch::Namespaces(n) => format!(
                "watching {}",
                n.iter().cloned().collect::<Vec<_>>().join(",")
            ),
        };
        format!(
            "{id} ({}/{}, {watch}, {} rules)",
            self.deployment.0,
            self.deployment.1,
            rules.name()
        )
    }
}

/// Which rules each operator is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Each by the rules of the release it runs.
    AsRunning,
    /// Every one by these rules: what an upgrade to that release brings.
    All(UnownedRules),
}

/// Two operators that both handle resources with no owner key somewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// Indexes into the operators given to [`overlaps`], the first lower.
    pub pair: (usize, usize),
    /// The rules each of the two was judged by.
    pub rules: (UnownedRules, UnownedRules),
    /// Where both handle unowned resources.
    pub namespaces: Namespaces,
}

/// Every pair of `operators` whose unowned scopes meet, judged as `judged`
/// says, in the order of the operators.
pub fn overlaps(operators: &[OperatorScope], locks: &Locks, judged: Judged) -> Vec<Overlap> {
    let rules = |o: &OperatorScope| match judged {
        Judged::AsRunning => o.rules(),
        Judged::All(rules) => rules,
    };
    let mut found = Vec::new();
    for (i, a) in operators.iter().enumerate() {
        for (j, b) in operators.iter().enumerate().skip(i + 1) {
            // One id in one namespace is one lock: only its holder acts.
            if a.id == b.id && a.namespace == b.namespace {
                continue;
            }
            let (ra, rb) = (rules(a), rules(b));
            let namespaces = a
                .handles_unowned(ra, locks)
                .intersect(&b.handles_unowned(rb, locks));
            if !namespaces.is_empty() {
                found.push(Overlap {
                    pair: (i, j),
                    rules: (ra, rb),
                    namespaces,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn operator(id: &str, namespace: &str, watch: &[&str], version: &str) -> OperatorScope {
        OperatorScope {
            deployment: (namespace.into(), "camel-k-operator".into()),
            id: id.into(),
            namespace: namespace.into(),
            watch: if watch.is_empty() {
                Watch::Global
            } else {
                Watch::Namespaces(set(watch))
            },
            version: Some(version.into()),
        }
    }

    /// The tag of an image, as the fleet reads it (enough for these images).
    fn tag(image: &str) -> Option<&str> {
        image.rsplit_once(':').map(|(_, tag)| tag)
    }

    fn deployment(container: serde_json::Value, replicas: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "camel-k-operator", "namespace": "team-a" },
            "spec": { "replicas": replicas, "selector": {}, "template": { "spec": {
                "containers": [ { "name": "sidecar", "image": "busybox" }, container ] } } }
        }))
        .unwrap()
    }

    #[test]
    fn the_scope_is_read_from_the_environment_as_upstream_reads_it() {
        // As the release's kustomize manifest sets it: all from the downward API.
        let namespaced = deployment(
            json!({ "name": "operator", "image": "docker.io/apache/camel-k:2.10.1",
                "command": ["kamel", "operator"],
                "env": [
                    { "name": "WATCH_NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                    { "name": "OPERATOR_ID", "value": "camel-k" },
                    { "name": "NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                ] }),
            1,
        );
        let scope = OperatorScope::of_deployment(&namespaced, tag)
            .unwrap()
            .unwrap();
        assert_eq!(scope, {
            let mut o = operator("camel-k", "team-a", &["team-a"], "2.10.1");
            o.deployment = ("team-a".into(), "camel-k-operator".into());
            o
        });

        // KAMEL_OPERATOR_ID wins over OPERATOR_ID; a list is read as a list;
        // no NAMESPACE: the Deployment's.
        let listed = deployment(
            json!({ "name": "operator", "image": "quay.io/x/camel-k:2.11.0-SNAPSHOT",
                "env": [
                    { "name": "OPERATOR_ID", "value": "camel-k" },
                    { "name": "KAMEL_OPERATOR_ID", "value": "team-a" },
                    { "name": "WATCH_NAMESPACE", "value": "a, b" },
                ] }),
            1,
        );
        let scope = OperatorScope::of_deployment(&listed, tag).unwrap().unwrap();
        assert_eq!(scope.id, "team-a");
        assert_eq!(scope.namespace, "team-a");
        assert_eq!(scope.watch, Watch::Namespaces(set(&["a", "b"])));
        assert_eq!(scope.rules(), UnownedRules::AnyWatcher);

        // Empty WATCH_NAMESPACE and no id: global, id empty.
        let global = deployment(
            json!({ "name": "operator", "image": "camel-k:2.10.1", "command": ["/usr/local/bin/kamel"],
                "args": ["operator"], "env": [{ "name": "WATCH_NAMESPACE", "value": "" }] }),
            2,
        );
        let scope = OperatorScope::of_deployment(&global, tag).unwrap().unwrap();
        assert_eq!((scope.id.as_str(), &scope.watch), ("", &Watch::Global));

        // A value from a ConfigMap cannot be read here: said, not guessed.
        let hidden = deployment(
            json!({ "name": "operator", "command": ["kamel", "operator"], "env": [
                { "name": "WATCH_NAMESPACE", "valueFrom": { "configMapKeyRef": { "name": "c", "key": "k" } } }] }),
            1,
        );
        let err = OperatorScope::of_deployment(&hidden, tag)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Deployment team-a/camel-k-operator sets WATCH_NAMESPACE from a ConfigMap, which is not read"
        );

        // Not an operator, or scaled to zero: nothing.
        let other = deployment(
            json!({ "name": "app", "env": [{ "name": "WATCH_NAMESPACE", "value": "" }] }),
            1,
        );
        assert!(OperatorScope::of_deployment(&other, tag).is_none());
        let mut stopped = namespaced.clone();
        stopped.spec.replicas = Some(0);
        assert!(OperatorScope::of_deployment(&stopped, tag).is_none());
    }

    #[test]
    fn releases_are_told_apart_by_their_tag() {
        for (tag, rules) in [
            (Some("2.10.1"), UnownedRules::IdOrLocal),
            (Some("v2.11.0"), UnownedRules::AnyWatcher),
            (Some("2.11.0-SNAPSHOT"), UnownedRules::AnyWatcher),
            (Some("3.0"), UnownedRules::AnyWatcher),
            (Some("1.12.3"), UnownedRules::IdOrLocal),
            (Some("latest"), UnownedRules::IdOrLocal),
            (None, UnownedRules::IdOrLocal),
        ] {
            assert_eq!(UnownedRules::of_version(tag), rules, "{tag:?}");
        }
    }

    #[test]
    fn under_v2_10_only_the_default_id_an_empty_one_or_a_local_operator_takes_unowned_resources() {
        let locks = Locks::default();
        let rules = UnownedRules::IdOrLocal;
        let all = Namespaces::AllExcept(BTreeSet::new());
        assert_eq!(
            operator("camel-k", "camel-k", &[], "2.10.1").handles_unowned(rules, &locks),
            all
        );
        assert_eq!(
            operator("", "camel-k", &[], "2.10.1").handles_unowned(rules, &locks),
            all
        );
        assert!(
            operator("operator-1", "camel-k-op1", &[], "2.10.1")
                .handles_unowned(rules, &locks)
                .is_empty()
        );
        // A local operator: what it watches, and its own namespace.
        assert_eq!(
            operator("team-a", "ops", &["apps"], "2.10.1").handles_unowned(rules, &locks),
            Namespaces::Only(set(&["apps", "ops"]))
        );
        // Under 2.11 the global operator with its own id takes them all.
        assert_eq!(
            operator("operator-1", "camel-k-op1", &[], "2.10.1")
                .handles_unowned(UnownedRules::AnyWatcher, &locks),
            all
        );
    }

    #[test]
    fn a_global_operator_yields_to_a_lock_outside_its_own_namespace() {
        let locks = Locks {
            by_platform: set(&["apps", "camel-k"]),
            by_default_lock: set(&["other"]),
        };
        let global = operator("camel-k", "camel-k", &[], "2.10.1");
        assert_eq!(
            global.handles_unowned(UnownedRules::IdOrLocal, &locks),
            Namespaces::AllExcept(set(&["apps"]))
        );
        assert_eq!(
            global.handles_unowned(UnownedRules::AnyWatcher, &locks),
            Namespaces::AllExcept(set(&["other"]))
        );
    }

    #[test]
    fn pairs_overlap_where_both_take_unowned_resources() {
        let operators = [
            operator("camel-k", "camel-k", &[], "2.10.1"),
            operator("team-a", "apps", &["apps"], "2.10.1"),
            operator("team-b", "ops-b", &["apps", "billing"], "2.10.1"),
            operator("operator-2", "camel-k-op2", &[], "2.10.1"),
            // A second replica set of team-a, same lock: no pair with it.
            operator("team-a", "apps", &["apps"], "2.10.1"),
        ];
        // team-a's platform and lock are in apps: the default operator yields there.
        let locks = Locks {
            by_platform: set(&["apps"]),
            by_default_lock: BTreeSet::new(),
        };
        let now = overlaps(&operators, &locks, Judged::AsRunning);
        let pairs: Vec<_> = now
            .iter()
            .map(|o| (o.pair, o.namespaces.to_string()))
            .collect();
        assert_eq!(
            pairs,
            [
                ((0, 2), "billing, ops-b".to_string()),
                ((1, 2), "apps".to_string()),
                ((2, 4), "apps".to_string()),
            ]
        );

        // After an upgrade to 2.11, operator-2 takes unowned resources too,
        // and a lock is only a camel-k-lock.
        let later = overlaps(&operators, &locks, Judged::All(UnownedRules::AnyWatcher));
        let pairs: Vec<_> = later
            .iter()
            .map(|o| (o.pair, o.namespaces.to_string()))
            .collect();
        assert_eq!(
            pairs,
            [
                ((0, 1), "apps".to_string()),
                ((0, 2), "apps, billing, ops-b".to_string()),
                ((0, 3), "every namespace".to_string()),
                ((0, 4), "apps".to_string()),
                ((1, 2), "apps".to_string()),
                ((1, 3), "apps".to_string()),
                ((2, 3), "apps, billing, ops-b".to_string()),
                ((2, 4), "apps".to_string()),
                ((3, 4), "apps".to_string()),
            ]
        );
    }

    #[test]
    fn each_operator_is_judged_by_its_own_release() {
        let operators = [
            operator("operator-1", "camel-k-op1", &[], "2.10.1"),
            operator("operator-2", "camel-k-op2", &[], "2.11.0"),
            operator("operator-3", "camel-k-op3", &[], "2.11.0"),
        ];
        let now = overlaps(&operators, &Locks::default(), Judged::AsRunning);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_eq!(now[0].pair, (1, 2));
        assert_eq!(
            now[0].rules,
            (UnownedRules::AnyWatcher, UnownedRules::AnyWatcher)
        );
    }
}
