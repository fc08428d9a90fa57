//! `kubectl camelk check`: is the installation whole? As `flux check`, each
//! part is read from the cluster, judged, and printed with the command that
//! fixes it. Reading is done here; judging is pure (the `judge_*` functions),
//! so the rules are unit-tested without a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use anyhow::Context;
use camelk_reconciler::api::OperatorAssignment;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::fleet::{self, OperatorView, Renewal};
use camelk_reconciler::inventory::{self, Inventory, Resource};
use camelk_reconciler::lock::RECONCILER_ID;
use camelk_reconciler::preflight::{self, Crd};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::cli::{CheckArgs, Cli};
use crate::render::{self, Finding, Verdict};

/// The shipped admission policy (`examples/deploy/admission/policy.yaml`).
const POLICY: &str = "camelk-operator-id";
/// Where a fix installs the policy from.
const APPLY_ADMISSION: &str = "kubectl apply --server-side -k examples/deploy/admission";

/// Camel K kinds a cluster may lack without harm: `get` and `plan` skip them.
const OPTIONAL_KINDS: [CamelKind; 4] = [
    CamelKind::IntegrationProfile,
    CamelKind::KameletBinding,
    CamelKind::CamelCatalog,
    CamelKind::Kamelet,
];

pub async fn run(cli: &Cli, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let (client, default_ns) = super::cluster(cli).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);

    let crds: Vec<Crd> = std::iter::once(Crd::OperatorAssignment)
        .chain(CamelKind::ALL.map(Crd::Camel))
        .collect();
    let absent = preflight::check_crds(&client, &[], &crds)
        .await
        .context("reading the served APIs")?;

    let assignments = if absent.contains(&Crd::OperatorAssignment) {
        Vec::new()
    } else {
        Api::<OperatorAssignment>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing OperatorAssignments in {ns}"))?
            .items
    };
    let mut findings = judge_crds(&crds, &absent, &kinds_named(&assignments));

    let locks = fleet::locks(&client, args.observe)
        .await
        .context("reading the lock Leases")?;
    findings.push(judge_reconciler(&ns, &locks));
    findings.extend(judge_operators(&ns, &assignments, &locks));
    findings.extend(admission(&client, &ns, &assignments).await?);
    findings.extend(olm(&client, &assignments).await?);
    let kinds: Vec<CamelKind> = CamelKind::ALL
        .into_iter()
        .filter(|k| !absent.contains(&Crd::Camel(*k)))
        .collect();
    // A user who may not list every namespace still gets the rest.
    match inventory::read(&client, &kinds, None).await {
        Ok(live) => findings.extend(judge_owner_keys(&live.inventory)),
        Err(e) => findings.push(Finding::warn(
            "Owner keys",
            format!("could not read the owner keys of Camel K resources: {e}"),
        )),
    }
    let scopes = super::operator_scopes::check(&client, &kinds).await?;
    findings.extend(scopes.findings);

    let failed = findings
        .iter()
        .filter(|f| f.verdict == Verdict::Fail)
        .count();
    if cli.output.is_structured() {
        let report =
            json!({ "findings": findings, "failed": failed, "operatorScopes": scopes.json });
        print!("{}", render::structured(&report, cli.output));
    } else {
        render::print_styled(&render::check_report(&findings));
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Where the owner-keys policy comes from.
const APPLY_OWNER_KEYS: &str = "kubectl apply --server-side -k examples/deploy/owner-keys";

/// Owner keys that other tools apply (per tool: how many resources, whether
/// the owner-keys policy keeps their moves, whether the reconciler co-owns
/// the keys yet), and keys that disagree.
fn judge_owner_keys(inventory: &Inventory) -> Vec<Finding> {
    use super::operator_scopes::named;
    const PART: &str = "Owner keys";
    let mut by_applier: BTreeMap<&str, Vec<&Resource>> = BTreeMap::new();
    for r in &inventory.resources {
        if let Some(tool) = r.key_managers.applier() {
            by_applier.entry(tool).or_default().push(r);
        }
    }
    let mut findings = Vec::new();
    for (tool, resources) in &by_applier {
        let co_owned = resources.iter().filter(|r| r.key_managers.co_owned).count();
        let message = format!(
            "{} resources have owner keys applied by {tool} ({co_owned} co-owned by the reconciler, \
             so they stay when removed from {tool}'s manifests): {}",
            resources.len(),
            named(resources)
        );
        findings.push(if inventory.keys_guarded {
            Finding::pass(
                PART,
                format!("{message}; the owner-keys policy keeps moves against its applies"),
            )
        } else {
            Finding::warn(
                PART,
                format!("{message}; their moves are blocked: {tool} would undo them"),
            )
            .with_fix(format!(
                "remove the keys from the manifests {tool} applies (`kubectl camelk \
                 strip-owner-keys PATH` in that repository), or install the owner-keys policy \
                 (Kubernetes 1.36+): {APPLY_OWNER_KEYS}"
            ))
        });
    }
    let torn: Vec<&Resource> = inventory
        .resources
        .iter()
        .filter(|r| r.disagreeing_label().is_some())
        .collect();
    if !torn.is_empty() {
        findings.push(Finding::warn(
            PART,
            format!(
                "{} resources have a label and an annotation naming different operators (the \
                 annotation, which upstream obeys, owns them; `reconciler sync` sets the label \
                 right unless a tool applies it): {}",
                torn.len(),
                named(&torn)
            ),
        ));
    }
    if findings.is_empty() {
        findings.push(Finding::pass(
            PART,
            format!(
                "{} resources: no owner key applied by another tool, none disagreeing",
                inventory.resources.len()
            ),
        ));
    }
    findings
}

fn judge_crds(
    crds: &[Crd],
    absent: &[Crd],
    named: &BTreeMap<CamelKind, Vec<String>>,
) -> Vec<Finding> {
    const PART: &str = "CRDs";
    crds.iter()
        .filter_map(|crd| {
            let optional = matches!(crd, Crd::Camel(kind) if OPTIONAL_KINDS.contains(kind));
            let naming = match crd {
                Crd::Camel(kind) => named.get(kind),
                Crd::OperatorAssignment => None,
            };
            match (absent.contains(crd), optional, naming) {
                (false, _, _) => Some(Finding::pass(
                    PART,
                    format!("{} served at {}", crd.name(), crd.api_version()),
                )),
                // Releases differ in which optional kinds they ship (v2
                // has no KameletBinding): one nothing names is no finding.
                (true, true, None) => None,
                (true, true, Some(assignments)) => Some(
                    Finding::warn(
                        PART,
                        format!(
                            "{} is not installed, but OperatorAssignment {} names {}: \
                             its resources are skipped",
                            crd.name(),
                            assignments.join(", "),
                            crd.kind()
                        ),
                    )
                    .with_fix(crd.install_hint()),
                ),
                (true, false, _) => Some(Finding::fail(
                    PART,
                    format!("{} is not served at {}", crd.name(), crd.api_version()),
                    crd.install_hint(),
                )),
            }
        })
        .collect()
}

/// The kinds the assignments name themselves, each with the names of the
/// assignments that do.
fn kinds_named(assignments: &[OperatorAssignment]) -> BTreeMap<CamelKind, Vec<String>> {
    let mut named: BTreeMap<CamelKind, Vec<String>> = BTreeMap::new();
    for a in assignments {
        for kind in super::kinds_named_by(&a.spec) {
            named
                .entry(kind)
                .or_default()
                .push(a.metadata.name.clone().unwrap_or_default());
        }
    }
    named
}

/// One lock as a finding: renewing passes, anything else fails with `fix`.
fn judge_lock(
    part: &str,
    what: &str,
    (id, ns): (&str, &str),
    locks: &[OperatorView],
    fix: String,
) -> Finding {
    let lease = format!("{id}-lock");
    let Some(view) = locks.iter().find(|v| v.id == id && v.namespace == ns) else {
        let elsewhere: Vec<&str> = locks
            .iter()
            .filter(|v| v.id == id)
            .map(|v| v.namespace.as_str())
            .collect();
        let found = match elsewhere.as_slice() {
            [] => String::new(),
            others => format!(" (there is one in {})", others.join(", ")),
        };
        return Finding::fail(
            part,
            format!("{what}: no Lease {lease} in {ns}{found}"),
            fix,
        );
    };
    let holder = view.holder.as_deref().unwrap_or("nobody");
    match view.renewal {
        Renewal::Seen => {
            Finding::pass(part, format!("{what}: {lease} in {ns} renewed by {holder}"))
        }
        Renewal::Released => Finding::fail(
            part,
            format!("{what}: {lease} in {ns} was released; nothing holds it"),
            fix,
        ),
        Renewal::NotSeen => Finding::fail(
            part,
            format!(
                "{what}: {lease} in {ns} is held by {holder} but was not renewed while watched"
            ),
            fix,
        ),
    }
}

fn judge_reconciler(ns: &str, locks: &[OperatorView]) -> Finding {
    judge_lock(
        "reconciler",
        "reconciler",
        (RECONCILER_ID, ns),
        locks,
        format!(
            "run the reconciler in {ns} (`kubectl apply -k examples/deploy`), then read \
             `kubectl -n {ns} logs deployment/camelk-reconciler`"
        ),
    )
}

fn judge_operators(
    ns: &str,
    assignments: &[OperatorAssignment],
    locks: &[OperatorView],
) -> Vec<Finding> {
    const PART: &str = "operators";
    if assignments.is_empty() {
        return vec![Finding::fail(
            PART,
            format!("no OperatorAssignment in {ns}: the reconciler has not applied one here"),
            "find it with `kubectl get operatorassignments -A` and pass its namespace with -n",
        )];
    }
    manifest_operators(assignments)
        .iter()
        .map(|(id, op_ns)| {
            judge_lock(
                PART,
                id,
                (id, op_ns),
                locks,
                format!(
                    "start operator {id} in {op_ns} with OPERATOR_ID={id} \
                     (`kubectl -n {op_ns} get pods`, then its logs)"
                ),
            )
        })
        .collect()
}

/// Every operator the manifests name, with the namespace of its lock.
fn manifest_operators(assignments: &[OperatorAssignment]) -> BTreeSet<(String, String)> {
    assignments
        .iter()
        .flat_map(|a| &a.spec.operators)
        .map(|o| (o.id.to_string(), o.namespace.clone()))
        .collect()
}

/// What the admission checks read: the policy, its bindings, and the
/// identities ConfigMap of the binding that takes them from `ns`.
struct Admission {
    policy: bool,
    bindings: Vec<ValidatingAdmissionPolicyBinding>,
    identities: Option<ConfigMap>,
}

async fn admission(
    client: &Client,
    ns: &str,
    assignments: &[OperatorAssignment],
) -> anyhow::Result<Vec<Finding>> {
    const PART: &str = "admission";
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let policy = match policies.get_opt(POLICY).await {
        Ok(found) => found.is_some(),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Ok(vec![Finding::warn(
                PART,
                "not allowed to read validatingadmissionpolicies: admission not checked",
            )]);
        }
        Err(e) => return Err(e).context("reading the admission policy"),
    };
    let bindings: Vec<ValidatingAdmissionPolicyBinding> =
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .list(&ListParams::default())
            .await
            .context("listing admission policy bindings")?
            .items
            .into_iter()
            .filter(|b| b.spec.policy_name == POLICY)
            .collect();
    let identities = match identities_name(&bindings, ns) {
        Some(name) => Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt(&name)
            .await
            .with_context(|| format!("reading ConfigMap {ns}/{name}"))?,
        None => None,
    };
    let facts = Admission {
        policy,
        bindings,
        identities,
    };
    Ok(judge_admission(ns, assignments, &facts))
}

/// The identities ConfigMap a binding of the policy reads from `ns`.
fn identities_name(bindings: &[ValidatingAdmissionPolicyBinding], ns: &str) -> Option<String> {
    bindings.iter().find_map(|b| {
        let param = b.spec.param_ref.as_ref()?;
        (param.namespace.as_deref() == Some(ns))
            .then(|| param.name.clone())
            .flatten()
    })
}

fn judge_admission(
    ns: &str,
    assignments: &[OperatorAssignment],
    facts: &Admission,
) -> Vec<Finding> {
    const PART: &str = "admission";
    if !facts.policy {
        return vec![Finding::fail(
            PART,
            format!(
                "the policy {POLICY} is not installed: nothing refuses a former owner's late writes"
            ),
            APPLY_ADMISSION,
        )];
    }
    let mut findings = vec![Finding::pass(PART, format!("policy {POLICY} installed"))];
    let Some(name) = identities_name(&facts.bindings, ns) else {
        let bound = match facts.bindings.len() {
            0 => "it has no binding".to_string(),
            n => format!("none of its {n} bindings takes its identities from {ns}"),
        };
        findings.push(Finding::fail(
            PART,
            format!("{POLICY} is not in force for {ns}: {bound}"),
            APPLY_ADMISSION,
        ));
        return findings;
    };
    findings.push(Finding::pass(
        PART,
        format!("{POLICY} bound, identities from {ns}/{name}"),
    ));
    let Some(data) = facts
        .identities
        .as_ref()
        .map(|c| c.data.clone().unwrap_or_default())
    else {
        findings.push(Finding::fail(
            PART,
            format!("the identities ConfigMap {ns}/{name} does not exist: the policy refuses every write it guards"),
            format!("edit examples/deploy/admission/identities.yaml for your operators, then `{APPLY_ADMISSION}`"),
        ));
        return findings;
    };
    findings.extend(judge_identities((ns, &name), assignments, &data));
    findings
}

/// The identities ConfigMap against the operators the manifests name.
fn judge_identities(
    (namespace, name): (&str, &str),
    assignments: &[OperatorAssignment],
    data: &BTreeMap<String, String>,
) -> Vec<Finding> {
    const PART: &str = "admission";
    let configmap = format!("{namespace}/{name}");
    let mut findings = Vec::new();
    if !data.contains_key("coordinators") && !data.contains_key("coordinatorGroups") {
        findings.push(Finding::fail(
            PART,
            format!("{configmap} names no coordinator: the reconciler's handoffs are refused"),
            format!(
                "kubectl -n {namespace} patch configmap {name} --type merge -p \
                 '{{\"data\":{{\"coordinators\":\"system:serviceaccount:{namespace}:camelk-reconciler\"}}}}'"
            ),
        ));
    }
    let operators = assignments.iter().flat_map(|a| &a.spec.operators);
    let wanted: BTreeSet<String> = operators.clone().map(|o| o.id.to_string()).collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|id| !data.contains_key(&format!("operator.{id}")))
        .collect();
    for id in &missing {
        findings.push(Finding::fail(
            PART,
            format!("{configmap} has no identity for operator {id}: the policy refuses its writes"),
            format!(
                "kubectl -n {namespace} patch configmap {name} --type merge -p \
                 '{{\"data\":{{\"operator.{id}\":\"system:serviceaccount:NAMESPACE:SERVICEACCOUNT\"}}}}' \
                 (the identity operator {id} runs as)"
            ),
        ));
    }
    if missing.is_empty() && !wanted.is_empty() {
        let ids: Vec<&str> = wanted.iter().map(String::as_str).collect();
        findings.push(Finding::pass(
            PART,
            format!("{configmap} names every operator: {}", ids.join(", ")),
        ));
    }
    for id in data.keys().filter_map(|k| k.strip_prefix("operator.")) {
        if !wanted.contains(id) {
            findings.push(Finding::warn(
                PART,
                format!("{configmap} names operator {id}, which no OperatorAssignment lists"),
            ));
        }
    }
    let handler = operators
        .filter(|o| o.handles_unowned)
        .map(|o| o.id.to_string())
        .next();
    let configured = data.get("unownedHandler").filter(|h| !h.is_empty());
    if handler.as_ref() != configured {
        let said = |v: Option<&String>| v.map_or("none".to_string(), |id| id.clone());
        findings.push(Finding::fail(
            PART,
            format!(
                "{configmap} names {} as the unowned handler, the manifest {}",
                said(configured),
                said(handler.as_ref())
            ),
            format!(
                "set unownedHandler in {configmap} to the operator whose entry says \
                 handlesUnowned (`kubectl -n {namespace} edit configmap {name}`)"
            ),
        ));
    }
    findings
}

/// Operators whose Deployment OLM installed: OLM runs one Camel K operator
/// per namespace, which a second operator in that namespace breaks.
async fn olm(client: &Client, assignments: &[OperatorAssignment]) -> anyhow::Result<Vec<Finding>> {
    const PART: &str = "installation";
    let operators = manifest_operators(assignments);
    let namespaces: BTreeSet<&str> = operators.iter().map(|(_, ns)| ns.as_str()).collect();
    let mut deployments = Vec::new();
    for ns in namespaces {
        match Api::<Deployment>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => deployments.extend(list.items),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                return Ok(vec![Finding::warn(
                    PART,
                    format!("not allowed to list Deployments in {ns}: OLM installs not checked"),
                )]);
            }
            Err(e) => return Err(e).with_context(|| format!("listing Deployments in {ns}")),
        }
    }
    Ok(judge_olm(&operators, &deployments))
}

fn judge_olm(operators: &BTreeSet<(String, String)>, deployments: &[Deployment]) -> Vec<Finding> {
    const PART: &str = "installation";
    let mut findings = Vec::new();
    for (id, ns) in operators {
        let Some(deployment) = deployments
            .iter()
            .find(|d| d.metadata.namespace.as_deref() == Some(ns) && fleet::runs_operator(d, id))
        else {
            continue;
        };
        let name = deployment.metadata.name.as_deref().unwrap_or_default();
        let csv = deployment
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.kind == "ClusterServiceVersion")
            .map(|r| r.name.clone())
            .or_else(|| {
                let labels = deployment.metadata.labels.as_ref()?;
                labels.get("olm.owner").cloned()
            });
        match csv {
            Some(csv) => findings.push(Finding::warn(
                PART,
                format!(
                    "operator {id} (deployment {ns}/{name}) is installed by OLM \
                     (ClusterServiceVersion {csv}): OLM runs one Camel K operator per \
                     namespace, so give each other operator a namespace of its own"
                ),
            )),
            None => findings.push(Finding::pass(
                PART,
                format!("operator {id}: deployment {ns}/{name}, not managed by OLM"),
            )),
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_optional_crd_is_a_finding_only_when_an_assignment_names_its_kind() {
        let binding = Crd::Camel(CamelKind::KameletBinding);
        let crds = [Crd::INTEGRATION, binding, Crd::Camel(CamelKind::Pipe)];
        let absent = [binding, Crd::Camel(CamelKind::Pipe)];
        let unnamed = judge_crds(&crds, &absent, &BTreeMap::new());
        assert_eq!(unnamed.len(), 2, "{unnamed:?}");
        assert_eq!(unnamed[0].verdict, Verdict::Pass);
        assert_eq!(unnamed[1].verdict, Verdict::Fail, "Pipe is not optional");

        let named = BTreeMap::from([(CamelKind::KameletBinding, vec!["shop".to_string()])]);
        let findings = judge_crds(&crds, &absent, &named);
        assert_eq!(findings.len(), 3, "{findings:?}");
        assert_eq!(findings[1].verdict, Verdict::Warn);
        assert_eq!(
            findings[1].message,
            "kameletbindings.camel.apache.org is not installed, but OperatorAssignment shop \
             names KameletBinding: its resources are skipped"
        );
        assert_eq!(findings[1].fix, Some(binding.install_hint()));
    }
    use camelk_reconciler::camel_k::OPERATOR_ID_KEY;
    use camelk_reconciler::inventory::ResourceRef;

    fn resource(name: &str, label: &str, annotation: &str, applier: Option<&str>) -> Resource {
        let mut r = Resource {
            id: ResourceRef {
                kind: CamelKind::Integration,
                namespace: "shop".into(),
                name: name.into(),
            },
            labels: [(OPERATOR_ID_KEY.to_string(), label.to_string())]
                .into_iter()
                .collect(),
            owner_annotation: Some(annotation.into()),
            phase: None,
            in_flight: None,
            created_by: None,
            key_managers: Default::default(),
        };
        r.key_managers.annotation_applier = applier.map(str::to_string);
        r
    }

    #[test]
    fn owner_keys_another_tool_applies_are_counted_with_their_tool_and_the_fix() {
        let mut inventory = Inventory::from(vec![
            resource(
                "a-1",
                "operator-1",
                "operator-1",
                Some("kustomize-controller"),
            ),
            resource(
                "a-2",
                "operator-2",
                "operator-1",
                Some("kustomize-controller"),
            ),
            resource("b-1", "operator-1", "operator-1", None),
        ]);
        inventory.resources[0].key_managers.co_owned = true;
        let findings = judge_owner_keys(&inventory);
        assert_eq!(findings.len(), 2, "{findings:?}");
        let applied = &findings[0];
        assert_eq!(applied.verdict, Verdict::Warn);
        assert!(
            applied.message.starts_with(
                "2 resources have owner keys applied by kustomize-controller (1 co-owned"
            ) && applied
                .message
                .contains("Integration shop/a-1, Integration shop/a-2")
                && applied.message.contains("their moves are blocked"),
            "{}",
            applied.message
        );
        assert!(applied.fix.as_deref().unwrap().contains("strip-owner-keys"));
        assert!(
            findings[1]
                .message
                .starts_with("1 resources have a label and an annotation")
        );

        inventory.keys_guarded = true;
        let findings = judge_owner_keys(&inventory);
        assert_eq!(findings[0].verdict, Verdict::Pass);
        assert!(
            findings[0]
                .message
                .ends_with("the owner-keys policy keeps moves against its applies")
        );

        let calm = Inventory::from(vec![resource("b-1", "operator-1", "operator-1", None)]);
        let findings = judge_owner_keys(&calm);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].verdict, Verdict::Pass);
    }

    fn view(id: &str, ns: &str, renewal: Renewal) -> OperatorView {
        OperatorView {
            id: id.into(),
            namespace: ns.into(),
            holder: (renewal != Renewal::Released).then(|| format!("{id}-pod")),
            renew_time: None,
            lease_duration_seconds: Some(15),
            renewal,
        }
    }

    fn assignment(operators: &[(&str, &str, bool)]) -> OperatorAssignment {
        let ops: Vec<_> = operators
            .iter()
            .map(
                |(id, ns, unowned)| json!({ "id": id, "namespace": ns, "handlesUnowned": unowned }),
            )
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "camelk.dev/v1alpha1", "kind": "OperatorAssignment",
            "metadata": { "name": "camel-k", "namespace": "camelk-system" },
            "spec": { "operators": ops, "defaultOperator": operators[0].0 }
        }))
        .unwrap()
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_lock_passes_only_when_seen_renewing_where_the_manifest_says() {
        let locks = [
            view("camelk-reconciler", "camelk-system", Renewal::Seen),
            view("operator-1", "camel-k", Renewal::Seen),
            view("operator-2", "camel-k", Renewal::NotSeen),
            view("operator-3", "camel-k", Renewal::Released),
            view("operator-4", "elsewhere", Renewal::Seen),
        ];
        assert_eq!(
            judge_reconciler("camelk-system", &locks).verdict,
            Verdict::Pass
        );
        let wrong_ns = judge_reconciler("other", &locks);
        assert_eq!(wrong_ns.verdict, Verdict::Fail);
        assert!(wrong_ns.message.contains("there is one in camelk-system"));

        let a = assignment(&[
            ("operator-1", "camel-k", false),
            ("operator-2", "camel-k", false),
            ("operator-3", "camel-k", false),
            ("operator-4", "camel-k", false),
        ]);
        let verdicts: Vec<(Verdict, bool)> = judge_operators("camelk-system", &[a], &locks)
            .into_iter()
            .map(|f| (f.verdict, f.fix.is_some()))
            .collect();
        assert_eq!(
            verdicts,
            [
                (Verdict::Pass, false),
                (Verdict::Fail, true),
                (Verdict::Fail, true),
                (Verdict::Fail, true),
            ]
        );
        assert_eq!(
            judge_operators("camelk-system", &[], &locks)[0].verdict,
            Verdict::Fail
        );
    }

    #[test]
    fn identities_must_name_every_operator_and_the_unowned_handler() {
        let a = assignment(&[("operator-1", "a", true), ("operator-2", "b", false)]);
        let complete = data(&[
            (
                "coordinators",
                "system:serviceaccount:camelk-system:camelk-reconciler",
            ),
            ("operator.operator-1", "u1"),
            ("operator.operator-2", "u2"),
            ("unownedHandler", "operator-1"),
        ]);
        let findings = judge_identities(("ns", "ids"), std::slice::from_ref(&a), &complete);
        assert!(
            findings.iter().all(|f| f.verdict == Verdict::Pass),
            "{findings:?}"
        );

        let mut broken = complete.clone();
        broken.remove("operator.operator-2");
        broken.remove("unownedHandler");
        broken.insert("operator.operator-9".into(), "u9".into());
        let findings = judge_identities(("ns", "ids"), &[a], &broken);
        let failed: Vec<&str> = findings
            .iter()
            .filter(|f| f.verdict == Verdict::Fail)
            .map(|f| f.message.as_str())
            .collect();
        assert_eq!(failed.len(), 2, "{findings:?}");
        assert!(failed[0].contains("no identity for operator operator-2"));
        assert!(failed[1].contains("names none as the unowned handler, the manifest operator-1"));
        assert!(
            findings
                .iter()
                .any(|f| f.verdict == Verdict::Warn && f.message.contains("operator-9"))
        );
    }

    #[test]
    fn a_binding_counts_only_when_it_reads_identities_from_the_namespace() {
        let binding = |ns: &str| -> ValidatingAdmissionPolicyBinding {
            serde_json::from_value(json!({
                "metadata": { "name": format!("b-{ns}") },
                "spec": { "policyName": POLICY, "paramRef": { "name": "ids", "namespace": ns } }
            }))
            .unwrap()
        };
        let facts = Admission {
            policy: true,
            bindings: vec![binding("team-a")],
            identities: None,
        };
        let findings = judge_admission("camelk-system", &[], &facts);
        assert_eq!(findings[1].verdict, Verdict::Fail);
        assert!(findings[1].message.contains("none of its 1 bindings"));

        let facts = Admission {
            bindings: vec![binding("team-a"), binding("camelk-system")],
            ..facts
        };
        let findings = judge_admission("camelk-system", &[], &facts);
        assert_eq!(findings[1].verdict, Verdict::Pass);
        assert_eq!(findings[2].verdict, Verdict::Fail, "no ConfigMap");

        let facts = Admission {
            policy: false,
            ..facts
        };
        assert_eq!(
            judge_admission("camelk-system", &[], &facts)[0]
                .fix
                .as_deref(),
            Some(APPLY_ADMISSION)
        );
    }

    #[test]
    fn an_operator_deployed_by_olm_is_flagged() {
        let deployment = |name: &str, id: &str, owner: Option<&str>| -> Deployment {
            let owners: Vec<_> = owner
                .map(|csv| {
                    json!({ "apiVersion": "operators.coreos.com/v1alpha1",
                    "kind": "ClusterServiceVersion", "name": csv, "uid": "u" })
                })
                .into_iter()
                .collect();
            serde_json::from_value(json!({
                "metadata": { "name": name, "namespace": "camel-k", "ownerReferences": owners },
                "spec": { "selector": {}, "template": { "spec": { "containers": [
                    { "name": "operator", "env": [{ "name": "OPERATOR_ID", "value": id }] }
                ] } } }
            }))
            .unwrap()
        };
        let operators: BTreeSet<(String, String)> = [
            ("operator-1".to_string(), "camel-k".to_string()),
            ("operator-2".to_string(), "camel-k".to_string()),
            ("operator-3".to_string(), "camel-k".to_string()),
        ]
        .into();
        let deployments = [
            deployment("camel-k-operator", "operator-1", Some("camel-k.v2.10.1")),
            deployment("second", "operator-2", None),
        ];
        let findings = judge_olm(&operators, &deployments);
        assert_eq!(
            findings.len(),
            2,
            "no Deployment runs operator-3: {findings:?}"
        );
        assert_eq!(findings[0].verdict, Verdict::Warn);
        assert!(
            findings[0]
                .message
                .contains("ClusterServiceVersion camel-k.v2.10.1")
        );
        assert_eq!(findings[1].verdict, Verdict::Pass);
    }
}
