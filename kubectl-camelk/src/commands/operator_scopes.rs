//! The part of `kubectl camelk check` that looks for upstream operators whose
//! scopes overlap: two operators that both reconcile a Camel K resource with
//! no owner key write it unfenced, each from its own cache.
//!
//! Read here: every Deployment that runs `kamel operator` (its environment:
//! `WATCH_NAMESPACE`, `NAMESPACE`, `KAMEL_OPERATOR_ID` / `OPERATOR_ID`, and
//! the release its image tag names), the locks a global operator yields to
//! (Leases beside IntegrationPlatforms), and, only when a pair overlaps, the
//! resources with no owner key. Judged in `camel_k::scopes` (pure): each
//! operator by the rules of the release it runs, then every one by 2.11's,
//! where any operator takes a resource with no owner key.

use std::collections::BTreeSet;

use anyhow::Context;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_from_keys};
use camelk_reconciler::camel_k::{
    DEFAULT_LOCK, Judged, Locks, Namespaces, OperatorScope, Overlap, UnownedRules, Watch, overlaps,
};
use camelk_reconciler::fleet;
use camelk_reconciler::inventory::{self, Resource};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::render::Finding;

const PART: &str = "operator scopes";
/// The resources a finding of `check` names, at most this many.
const NAMED: usize = 5;
/// Kinds upstream reads as static (no controller since v2.2 and v2.7): no
/// operator writes them, owner key or not.
const STATIC_KINDS: [CamelKind; 2] = [CamelKind::Kamelet, CamelKind::IntegrationProfile];

/// The findings, and the same facts for `-o json`.
pub struct ScopeReport {
    pub findings: Vec<Finding>,
    pub json: Value,
}

/// Reads and judges the operators' scopes; `kinds` are the Camel K kinds
/// the cluster serves.
pub async fn check(client: &Client, kinds: &[CamelKind]) -> anyhow::Result<ScopeReport> {
    let deployments = match Api::<Deployment>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Ok(not_checked(
                "not allowed to list Deployments in every namespace".into(),
            ));
        }
        Err(e) => return Err(e).context("listing Deployments in every namespace"),
    };
    let mut findings = Vec::new();
    let mut operators = Vec::new();
    for read in deployments
        .iter()
        .filter_map(|d| OperatorScope::of_deployment(d, fleet::image_version))
    {
        match read {
            Ok(scope) => operators.push(scope),
            Err(unread) => findings.push(Finding::warn(
                PART,
                format!("{unread}: that operator's scope is not checked"),
            )),
        }
    }
    let locks = match locks(client, kinds).await {
        Ok(locks) => locks,
        Err(e) if is_forbidden(&e) => return Ok(not_checked(format!("{e:#}"))),
        Err(e) => return Err(e),
    };
    let now = overlaps(&operators, &locks, Judged::AsRunning);
    let after_upgrade: Vec<Overlap> =
        overlaps(&operators, &locks, Judged::All(UnownedRules::AnyWatcher))
            .into_iter()
            .filter(|o| !now.iter().any(|n| n.pair == o.pair))
            .collect();

    let unowned = if now.is_empty() && after_upgrade.is_empty() {
        Ok(Vec::new())
    } else {
        let reconciled: Vec<CamelKind> = kinds
            .iter()
            .copied()
            .filter(|k| !STATIC_KINDS.contains(k))
            .collect();
        // One who may not list them all still learns which operators overlap.
        inventory::read(client, &reconciled, None)
            .await
            .map(|live| {
                live.inventory
                    .resources
                    .into_iter()
                    .filter(|r| {
                        let label = r.labels.get(OPERATOR_ID_KEY).map(String::as_str);
                        owner_from_keys(label, r.owner_annotation.as_deref()).is_none()
                    })
                    .collect::<Vec<Resource>>()
            })
            .map_err(|e| e.to_string())
    };

    let mut json_overlaps = Vec::new();
    for (overlap, upgraded) in now
        .iter()
        .map(|o| (o, false))
        .chain(after_upgrade.iter().map(|o| (o, true)))
    {
        let at_risk: Result<Vec<&Resource>, &str> = match &unowned {
            Ok(unowned) => Ok(unowned
                .iter()
                .filter(|r| overlap.namespaces.contains(&r.id.namespace))
                .collect()),
            Err(e) => Err(e.as_str()),
        };
        let at_risk = at_risk.as_deref().map_err(|e| *e);
        findings.push(judge(&operators, overlap, upgraded, at_risk));
        json_overlaps.push(overlap_json(
            &operators,
            overlap,
            upgraded,
            at_risk.unwrap_or_default(),
        ));
    }
    if now.is_empty() && after_upgrade.is_empty() {
        findings.push(Finding::pass(
            PART,
            match operators.len() {
                0 => "no Deployment runs an upstream Camel K operator (one run another way, \
                      as a process, is not checked)"
                    .to_string(),
                n => format!(
                    "{n} upstream operator Deployments: no two reconcile resources with no owner \
                     key in one namespace, under the rules they run or under 2.11's"
                ),
            },
        ));
    }
    let json_operators: Vec<Value> = operators
        .iter()
        .map(|o| {
            json!({
                "deployment": format!("{}/{}", o.deployment.0, o.deployment.1),
                "id": o.id, "namespace": o.namespace,
                "watchNamespaces": match &o.watch {
                    Watch::Global => Value::Null,
                    Watch::Namespaces(n) => json!(n),
                },
                "version": o.version, "rules": o.rules().name(),
            })
        })
        .collect();
    Ok(ScopeReport {
        findings,
        json: json!({ "operators": json_operators, "overlaps": json_overlaps }),
    })
}

fn is_forbidden(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == 403)
}

/// The report when what it needs may not be read.
fn not_checked(why: String) -> ScopeReport {
    ScopeReport {
        findings: vec![Finding::warn(
            PART,
            format!("operator scopes not checked: {why}"),
        )],
        json: Value::Null,
    }
}

/// Namespaces where a global operator yields: the v2.10 lock (a Lease named
/// after an IntegrationPlatform of that namespace, plus `-lock`) and 2.11's
/// (a Lease `camel-k-lock`).
async fn locks(client: &Client, kinds: &[CamelKind]) -> anyhow::Result<Locks> {
    let leases: BTreeSet<(String, String)> = Api::<Lease>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .context("listing Leases")?
        .items
        .into_iter()
        .filter_map(|l| Some((l.metadata.namespace?, l.metadata.name?)))
        .collect();
    let mut locks = Locks::default();
    if kinds.contains(&CamelKind::IntegrationPlatform) {
        let platforms = Api::<DynamicObject>::all_with(
            client.clone(),
            &CamelKind::IntegrationPlatform.api_resource(),
        )
        .list_metadata(&ListParams::default())
        .await
        .context("listing IntegrationPlatforms")?;
        for p in platforms.items {
            let (Some(ns), Some(name)) = (p.metadata.namespace, p.metadata.name) else {
                continue;
            };
            if leases.contains(&(ns.clone(), format!("{name}-lock"))) {
                locks.by_platform.insert(ns);
            }
        }
    }
    locks.by_default_lock = leases
        .into_iter()
        .filter(|(_, name)| name == DEFAULT_LOCK)
        .map(|(ns, _)| ns)
        .collect();
    Ok(locks)
}

/// One overlapping pair as a finding: a warning when it holds now, or when
/// an upgrade would bring it and resources with no owner key are there.
fn judge(
    operators: &[OperatorScope],
    overlap: &Overlap,
    upgraded: bool,
    at_risk: Result<&[&Resource], &str>,
) -> Finding {
    let (a, b) = (&operators[overlap.pair.0], &operators[overlap.pair.1]);
    let pair = format!(
        "{} and {}",
        a.describe(overlap.rules.0),
        b.describe(overlap.rules.1)
    );
    let risk = match at_risk {
        Ok([]) => "none has no owner key now; any created without one will".to_string(),
        Ok(at_risk) => format!("{} have no owner key: {}", at_risk.len(), named(at_risk)),
        Err(e) => format!("the resources there could not be read ({e})"),
    };
    let fix = format!(
        "give each resource there an owner before an operator acts on it: list one of the two \
         in an OperatorAssignment with handlesUnowned: true and let `reconciler sync` assign \
         each new resource as it appears, name that operator as unownedHandler in the admission \
         identities so the other's writes are refused, or change WATCH_NAMESPACE so the two no \
         longer meet (namespaces: {})",
        overlap.namespaces
    );
    if upgraded {
        let message = format!(
            "after an upgrade to Camel K 2.11, where every operator takes resources with no owner \
             key, {pair} would both reconcile those in {}: {risk}",
            overlap.namespaces
        );
        return if at_risk.is_ok_and(|r| r.is_empty()) {
            Finding::pass(PART, message)
        } else {
            Finding::warn(PART, message).with_fix(fix)
        };
    }
    Finding::warn(
        PART,
        format!(
            "{pair} both reconcile Camel K resources with no owner key in {}, each writing them \
             unfenced: {risk}",
            overlap.namespaces
        ),
    )
    .with_fix(fix)
}

/// The resources a finding names: the first [`NAMED`], then how many more.
pub(super) fn named(resources: &[&Resource]) -> String {
    let mut names: Vec<String> = resources
        .iter()
        .take(NAMED)
        .map(|r| format!("{} {}/{}", r.id.kind, r.id.namespace, r.id.name))
        .collect();
    if resources.len() > NAMED {
        names.push(format!("{} more", resources.len() - NAMED));
    }
    names.join(", ")
}

fn overlap_json(
    operators: &[OperatorScope],
    overlap: &Overlap,
    upgraded: bool,
    at_risk: &[&Resource],
) -> Value {
    let name = |i: usize| {
        let o = &operators[i];
        format!("{}/{}", o.deployment.0, o.deployment.1)
    };
    let namespaces = match &overlap.namespaces {
        Namespaces::AllExcept(except) => json!({ "all": true, "except": except }),
        Namespaces::Only(only) => json!({ "all": false, "only": only }),
    };
    json!({
        "deployments": [name(overlap.pair.0), name(overlap.pair.1)],
        "rules": [overlap.rules.0.name(), overlap.rules.1.name()],
        "when": if upgraded { "after an upgrade to 2.11" } else { "now" },
        "namespaces": namespaces,
        "unownedResources": at_risk.len(),
        "resources": at_risk.iter().take(NAMED).map(|r| json!({
            "kind": r.id.kind.kind(), "namespace": r.id.namespace, "name": r.id.name,
        })).collect::<Vec<_>>(),
    })
}
