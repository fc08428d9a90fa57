//! The live fleet: which operators exist (their `<id>-lock` Leases), whether
//! they are seen renewing, and which Camel K resources each owns. Read-only;
//! every list is paged (`PAGE` objects per response). Owner counts come
//! from metadata-only lists; the resource view lists whole objects, because
//! it shows each one's `status.phase`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Container;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use crate::camel_k::status::phase;
use crate::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_from_keys, owner_id};
use crate::inventory::KeyManagers;

/// Whether an operator's lock was seen renewing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Its resourceVersion changed while we watched.
    Seen,
    /// It has no holder: the operator released it (stopped cleanly).
    Released,
    /// Not renewed while we watched (a short window cannot tell dead from slow).
    NotSeen,
}

/// One operator as its lock shows it.
#[derive(Clone, Debug)]
pub struct OperatorView {
    /// The operator id (the lock's name without `-lock`).
    pub id: String,
    /// The namespace of its lock Lease.
    pub namespace: String,
    /// `spec.holderIdentity`: the replica holding the lock; none if released.
    pub holder: Option<String>,
    /// `spec.renewTime` as the holder wrote it (its clock, not ours).
    pub renew_time: Option<String>,
    /// `spec.leaseDurationSeconds`: how long the holder's claim lasts without a renewal.
    pub lease_duration_seconds: Option<i32>,
    /// Whether the holder was seen renewing during the observation.
    pub renewal: Renewal,
}

/// Whether `deployment` runs operator `id`: upstream Camel K reads its id from
/// the environment variable `OPERATOR_ID` (as Helm, OLM and kustomize install
/// it), `reconciler operator` from `--id`.
pub fn runs_operator(deployment: &Deployment, id: &str) -> bool {
    operator_container(deployment, id).is_some()
}

/// The image of the container of `deployment` that runs operator `id`.
fn operator_image<'a>(deployment: &'a Deployment, id: &str) -> Option<&'a str> {
    operator_container(deployment, id)?.image.as_deref()
}

fn operator_container<'a>(deployment: &'a Deployment, id: &str) -> Option<&'a Container> {
    let pod = deployment.spec.template.spec.as_ref()?;
    pod.containers.iter().find(|c| {
        let by_env = c
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "OPERATOR_ID" && e.value.as_deref() == Some(id));
        let args: Vec<&str> = c.args.iter().flatten().map(String::as_str).collect();
        let by_flag = args.contains(&format!("--id={id}").as_str())
            || args.windows(2).any(|w| w == ["--id", id]);
        by_env || by_flag
    })
}

/// The version an image reference names: its tag
/// (`docker.io/apache/camel-k:2.10.1` gives `2.10.1`); none for an image
/// pinned by digest only or without a tag.
pub fn image_version(image: &str) -> Option<&str> {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split_once(':').map(|(_, tag)| tag)
}

/// Where an operator's version was read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "from", rename_all = "camelCase")]
pub enum VersionSource {
    /// The tag of the image of the container that runs it, in this
    /// Deployment of its lock's namespace.
    Image {
        /// The Deployment's name.
        deployment: String,
        /// The image reference.
        image: String,
    },
    /// `status.version` of the IntegrationPlatform named after it in its
    /// lock's namespace: upstream Camel K writes its own version there when
    /// it reconciles the platform.
    IntegrationPlatform {
        /// The platform's name (the operator id).
        name: String,
    },
}

/// An operator's version and where it was read, or why it is not known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperatorVersion {
    /// Read from `source`.
    Known {
        /// The version (an image tag, or what the operator reports).
        version: String,
        /// Where it was read.
        source: VersionSource,
    },
    /// Neither source gave one; a sentence saying what was looked at.
    Unknown(String),
}

/// What was found about one operator in its lock's namespace.
#[derive(Clone, Debug, Default)]
pub(crate) struct VersionClues<'a> {
    /// The Deployments of the namespace, or none when they may not be listed.
    pub deployments: Option<&'a [Deployment]>,
    /// The IntegrationPlatform named after the operator: its owner (the one
    /// owner rule) and `status.version`; `None` when there is none (or it
    /// may not be read).
    pub platform: Option<(Option<String>, Option<String>)>,
}

/// The version of operator `id` whose lock is in `namespace`: the image tag
/// of the Deployment that runs it, else what its IntegrationPlatform reports
/// (an operator not run by a Deployment: `kamel operator` as a process, a
/// bare Pod), else why neither says.
pub(crate) fn version_of(id: &str, namespace: &str, clues: &VersionClues) -> OperatorVersion {
    let running = clues.deployments.and_then(|deployments| {
        let d = deployments.iter().find(|d| runs_operator(d, id))?;
        let image = operator_image(d, id).unwrap_or_default().to_string();
        Some((d.metadata.name.clone().unwrap_or_default(), image))
    });
    if let Some((deployment, image)) = &running
        && let Some(version) = image_version(image)
    {
        return OperatorVersion::Known {
            version: version.to_string(),
            source: VersionSource::Image {
                deployment: deployment.clone(),
                image: image.clone(),
            },
        };
    }
    // A platform another operator owns reports that operator's version.
    let own_platform = match &clues.platform {
        Some((owner, version)) if owner.as_deref().is_none_or(|o| o == id) => {
            Some(version.as_deref().filter(|v| !v.is_empty()))
        }
        _ => None,
    };
    if let Some(Some(version)) = own_platform {
        return OperatorVersion::Known {
            version: version.to_string(),
            source: VersionSource::IntegrationPlatform {
                name: id.to_string(),
            },
        };
    }
    let deployment = match (&running, clues.deployments) {
        (Some((name, image)), _) if image.is_empty() => {
            format!("Deployment {namespace}/{name} runs it from no image")
        }
        (Some((name, image)), _) => {
            format!("Deployment {namespace}/{name} runs it from {image}, which has no version tag")
        }
        (None, Some(_)) => format!(
            "no Deployment in {namespace} runs it (started some other way: a process, a bare Pod)"
        ),
        (None, None) => format!("the Deployments of {namespace} may not be listed"),
    };
    let platform = match own_platform {
        Some(_) => format!("its IntegrationPlatform {namespace}/{id} reports no status.version"),
        None => format!("no IntegrationPlatform {namespace}/{id} of its own reports a version"),
    };
    OperatorVersion::Unknown(format!("{deployment}, and {platform}"))
}

/// The version of each operator (id, lock namespace): `version_of`, from
/// the Deployments of its lock namespace and its IntegrationPlatform there.
/// What may not be read (403) or is not there (404) counts as not found.
pub async fn operator_versions(
    client: &Client,
    operators: &[(String, String)],
) -> Result<BTreeMap<(String, String), OperatorVersion>, kube::Error> {
    let mut versions = BTreeMap::new();
    let namespaces: std::collections::BTreeSet<&str> =
        operators.iter().map(|(_, ns)| ns.as_str()).collect();
    for ns in namespaces {
        let deployments = match Api::<Deployment>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => Some(list.items),
            Err(kube::Error::Api(status)) if status.code == 403 => None,
            Err(e) => return Err(e),
        };
        let platforms: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            ns,
            &CamelKind::IntegrationPlatform.api_resource(),
        );
        for (id, _) in operators.iter().filter(|(_, at)| at == ns) {
            let platform = match platforms.get_opt(id).await {
                Ok(found) => found.map(|p| {
                    let version = p
                        .data
                        .get("status")
                        .and_then(|s| s.get("version"))
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                    (owner_id(&p.metadata), version)
                }),
                Err(kube::Error::Api(status)) if [403, 404].contains(&status.code) => None,
                Err(e) => return Err(e),
            };
            let clues = VersionClues {
                deployments: deployments.as_deref(),
                platform,
            };
            versions.insert((id.clone(), ns.to_string()), version_of(id, ns, &clues));
        }
    }
    Ok(versions)
}

/// Namespace of the lock of operator `id`, if one exists anywhere.
pub async fn find_lock(client: &Client, id: &str) -> Result<Option<String>, kube::Error> {
    let name = crate::lock::lock_name(id);
    let leases: Api<Lease> = Api::all(client.clone());
    let list = leases
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await?;
    Ok(list.items.into_iter().find_map(|l| l.metadata.namespace))
}

/// Every operator with a lock, watched for `observe` to see which renew
/// (what each owns is [`owned_counts`], a list of every Camel K resource:
/// only the callers that show it pay for it).
pub async fn locks(client: &Client, observe: Duration) -> Result<Vec<OperatorView>, kube::Error> {
    let leases: Api<Lease> = Api::all(client.clone());
    let locks = |list: Vec<Lease>| -> BTreeMap<(String, String), Lease> {
        list.into_iter()
            .filter_map(|l| {
                let name = l.metadata.name.clone()?;
                let id = name.strip_suffix("-lock")?.to_string();
                Some(((id, l.metadata.namespace.clone().unwrap_or_default()), l))
            })
            .collect()
    };
    let before = locks(leases.list(&ListParams::default()).await?.items);
    tokio::time::sleep(observe).await;
    let after = locks(leases.list(&ListParams::default()).await?.items);
    Ok(after
        .into_iter()
        .map(|((id, namespace), lease)| {
            let spec = lease.spec.clone().unwrap_or_default();
            let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
            let changed = before
                .get(&(id.clone(), namespace.clone()))
                .is_none_or(|b| b.metadata.resource_version != lease.metadata.resource_version);
            let renewal = match (&holder, changed) {
                (None, _) => Renewal::Released,
                (Some(_), true) => Renewal::Seen,
                (Some(_), false) => Renewal::NotSeen,
            };
            OperatorView {
                id,
                namespace,
                holder,
                renew_time: spec.renew_time.map(|t| t.0.to_string()),
                lease_duration_seconds: spec.lease_duration_seconds,
                renewal,
            }
        })
        .collect())
}

/// Owned resources per operator id ([`owner_id`]: the one owner rule),
/// from metadata-only lists of every kind.
pub async fn owned_counts(client: &Client) -> Result<BTreeMap<String, usize>, kube::Error> {
    let mut counts = BTreeMap::new();
    for kind in CamelKind::ALL {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = match api.list_metadata(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(s)) if s.code == 404 => break,
                Err(e) => return Err(e),
            };
            for item in page.items {
                if let Some(id) = owner_id(&item.metadata) {
                    *counts.entry(id).or_default() += 1;
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(counts)
}

/// Objects per list page: bounds what one response holds in memory.
const PAGE: u32 = 500;

/// One Camel K resource and its owner keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceView {
    /// The resource's kind.
    pub kind: CamelKind,
    /// The resource's namespace.
    pub namespace: String,
    /// The resource's name.
    pub name: String,
    /// Value of the owner label, if any.
    pub label: Option<String>,
    /// Value of the owner annotation, if any.
    pub annotation: Option<String>,
    /// `status.phase`, if any.
    pub phase: Option<String>,
    /// Who else manages its owner keys (a GitOps tool that applies them).
    pub key_managers: KeyManagers,
}

impl ResourceView {
    /// The row of `obj`, a resource of `kind`.
    pub fn of(kind: CamelKind, obj: &DynamicObject) -> ResourceView {
        let key = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().and_then(|m| m.get(OPERATOR_ID_KEY)).cloned()
        };
        ResourceView {
            kind,
            namespace: obj.metadata.namespace.clone().unwrap_or_default(),
            name: obj.metadata.name.clone().unwrap_or_default(),
            label: key(&obj.metadata.labels),
            annotation: key(&obj.metadata.annotations),
            phase: phase(obj).map(str::to_string),
            key_managers: KeyManagers::of(&obj.metadata),
        }
    }
}

impl ResourceView {
    /// Its owner by the one rule: the label, else the annotation, and the
    /// annotation when they disagree.
    pub fn owner(&self) -> Option<String> {
        owner_from_keys(self.label.as_deref(), self.annotation.as_deref()).map(|o| o.id)
    }

    /// The label's value when it disagrees with the annotation.
    pub fn disagreeing_label(&self) -> Option<String> {
        owner_from_keys(self.label.as_deref(), self.annotation.as_deref())
            .and_then(|o| o.disagreeing_label)
    }
}

/// Resources of `kinds` in `namespace` (all when `None`), owned by `operator`
/// when given; kinds whose CRD is missing are skipped and returned apart.
pub async fn resources(
    client: &Client,
    kinds: &[CamelKind],
    namespace: Option<&str>,
    operator: Option<&str>,
) -> Result<(Vec<ResourceView>, Vec<CamelKind>), kube::Error> {
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for kind in kinds {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.api_resource()),
            None => Api::all_with(client.clone(), &kind.api_resource()),
        };
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    missing.push(*kind);
                    break;
                }
                Err(e) => return Err(e),
            };
            for obj in page.items {
                // The annotation alone may name the owner, so no label selector.
                if operator.is_some() && owner_id(&obj.metadata).as_deref() != operator {
                    continue;
                }
                rows.push(ResourceView::of(*kind, &obj));
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    rows.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    Ok((rows, missing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(container: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "d", "namespace": "camel-k" },
            "spec": { "selector": {}, "template": { "spec": { "containers": [container] } } }
        }))
        .unwrap()
    }

    #[test]
    fn an_operator_is_found_by_its_environment_or_its_flag() {
        let upstream = deployment(json!({ "name": "operator",
            "image": "docker.io/apache/camel-k:2.10.1",
            "env": [{ "name": "OPERATOR_ID", "value": "operator-1" }] }));
        let reference = deployment(json!({ "name": "operator",
            "image": "ghcr.io/camelk-gitops/reconciler:v0.1.0",
            "args": ["operator", "--id", "operator-2"] }));
        assert!(runs_operator(&upstream, "operator-1"));
        assert!(!runs_operator(&upstream, "operator-2"));
        assert!(runs_operator(&reference, "operator-2"));
        let no_image = deployment(json!({ "name": "operator",
            "env": [{ "name": "OPERATOR_ID", "value": "operator-3" }] }));
        assert!(
            runs_operator(&no_image, "operator-3"),
            "found without an image"
        );
        assert_eq!(operator_image(&no_image, "operator-3"), None);
        assert_eq!(
            operator_image(&upstream, "operator-1").and_then(image_version),
            Some("2.10.1")
        );
    }

    #[test]
    fn the_version_comes_from_the_image_else_the_own_platform_else_a_reason() {
        let tagged = deployment(json!({ "name": "operator",
            "image": "docker.io/apache/camel-k:2.10.1",
            "env": [{ "name": "OPERATOR_ID", "value": "operator-1" }] }));
        let by_digest = deployment(json!({ "name": "operator",
            "image": "docker.io/apache/camel-k@sha256:abcd",
            "env": [{ "name": "OPERATOR_ID", "value": "operator-1" }] }));
        let own = Some((Some("operator-1".to_string()), Some("2.8.0".to_string())));
        let clues = |deployments: &'static [Deployment], platform| VersionClues {
            deployments: Some(deployments),
            platform,
        };
        let leak = |d: Deployment| -> &'static [Deployment] { Box::leak(Box::new([d])) };

        assert_eq!(
            version_of("operator-1", "camel-k", &clues(leak(tagged), own.clone())),
            OperatorVersion::Known {
                version: "2.10.1".into(),
                source: VersionSource::Image {
                    deployment: "d".into(),
                    image: "docker.io/apache/camel-k:2.10.1".into()
                }
            },
            "the image wins over the platform"
        );
        let from_platform = OperatorVersion::Known {
            version: "2.8.0".into(),
            source: VersionSource::IntegrationPlatform {
                name: "operator-1".into(),
            },
        };
        assert_eq!(
            version_of("operator-1", "camel-k", &clues(&[], own.clone())),
            from_platform,
            "no Deployment: a process"
        );
        assert_eq!(
            version_of(
                "operator-1",
                "camel-k",
                &clues(leak(by_digest.clone()), own.clone())
            ),
            from_platform,
            "an image by digest has no tag"
        );

        let why = |clues: &VersionClues| match version_of("operator-1", "camel-k", clues) {
            OperatorVersion::Unknown(why) => why,
            known => panic!("{known:?}"),
        };
        let another_operators = Some((Some("operator-2".to_string()), Some("2.10.1".into())));
        assert_eq!(
            why(&clues(&[], another_operators)),
            "no Deployment in camel-k runs it (started some other way: a process, a bare Pod), \
             and no IntegrationPlatform camel-k/operator-1 of its own reports a version"
        );
        assert_eq!(
            why(&clues(leak(by_digest), Some((None, None)))),
            "Deployment camel-k/d runs it from docker.io/apache/camel-k@sha256:abcd, which has \
             no version tag, and its IntegrationPlatform camel-k/operator-1 reports no status.version"
        );
        let forbidden = VersionClues {
            deployments: None,
            platform: None,
        };
        assert!(
            why(&forbidden).starts_with("the Deployments of camel-k may not be listed"),
            "{}",
            why(&forbidden)
        );
    }

    #[test]
    fn the_version_is_the_images_tag() {
        assert_eq!(
            image_version("docker.io/apache/camel-k:2.10.1"),
            Some("2.10.1")
        );
        assert_eq!(image_version("localhost:5000/camel-k:v2"), Some("v2"));
        assert_eq!(image_version("localhost:5000/camel-k"), None);
        assert_eq!(image_version("camel-k@sha256:abcd"), None);
        assert_eq!(image_version("camel-k:2.9@sha256:abcd"), Some("2.9"));
    }
}
