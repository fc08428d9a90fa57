//! Progressive delivery with real upstream operators: a step that waits for
//! a person's approval (`rollout.approval`), approved with `kubectl camelk
//! approve` under the shipped approver role and admission policy, and a
//! health gate that soaks (`healthGate.soak`).

use std::sync::Mutex;
use std::time::Duration;

use crate::NAME;
use crate::adoption::{fleet, kamel_run, manifest, setup, wait_ready_under};
use crate::support::*;
use camelk_reconciler::api::{RolloutApproval, RolloutApprovalSpec, RolloutState};
use camelk_reconciler::camel_k::{CamelKind, owner_id};
use camelk_testkit::manifest::Rollout;
use camelk_testkit::receiver::{Receiver, Request};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, PostParams};

/// Who approves: a user granted the shipped approver role, nothing more.
const APPROVER: &str = "developer";

/// The Integrations of these tests, created as `kamel run -x` creates them,
/// once running under operator-1.
async fn running_under_operator_1(admin: &kube::Client, ns: &str) -> [&'static str; 2] {
    let names = ["it-a", "it-b"];
    for name in names {
        kamel_run(admin, ns, name, Some("operator-1"), true).await;
    }
    for name in names {
        wait_ready_under(admin, ns, name, "operator-1").await;
    }
    names
}

/// The `notifications` of the manifest: a webhook, Slack, GitHub and GitLab
/// commit statuses, all at `receiver`.
fn notifications(receiver: &Receiver) -> String {
    format!(
        "  notifications:
  - {{name: hook, webhook: {{url: \"{}\"}}}}
  - {{name: chat, slack: {{urlSecretRef: {{name: slack, key: url}}}}}}
  - {{name: github, gitHubStatus: {{api: \"{}\", repository: org/gitops, tokenSecretRef: {{name: gh, key: token}}}}}}
  - {{name: gitlab, gitLabStatus: {{api: \"{}\", repository: \"42\", tokenSecretRef: {{name: gl, key: token}}}}}}
",
        receiver.url("/hook"),
        receiver.url("/github"),
        receiver.url("/gitlab")
    )
}

/// What each receiver of [`notifications`] got for a rollout of `rev` in
/// two steps, the second approved.
fn notified_of_each_moment(receiver: &Receiver, rev: &str) {
    let kinds = |seen: &[Request]| -> Vec<String> {
        seen.iter()
            .filter(|r| r.path == "/hook" && r.json()["revision"] == rev)
            .map(|r| r.json()["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let seen = receiver.wait_for(Duration::from_secs(30), "Applied webhook", |seen| {
        kinds(seen).last().map(String::as_str) == Some("Applied")
    });
    assert_eq!(
        kinds(&seen),
        [
            "Started",
            "StepDone",
            "WaitingForApproval",
            "StepDone",
            "Applied"
        ],
        "the webhook, in order"
    );
    let applied = seen
        .iter()
        .rfind(|r| r.path == "/hook")
        .map(Request::json)
        .unwrap();
    assert_eq!(
        (
            applied["step"].as_u64(),
            applied["totalSteps"].as_u64(),
            applied["moved"].as_u64()
        ),
        (Some(2), Some(2), Some(2)),
        "{applied:#}"
    );
    assert!(
        applied["assignment"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{NAME}"))
    );
    let slack: Vec<String> = seen
        .iter()
        .filter(|r| r.path == "/slack")
        .filter_map(|r| r.json()["text"].as_str().map(String::from))
        .collect();
    assert!(
        slack
            .iter()
            .any(|t| t.contains(&rev[..12]) && t.contains("applied")),
        "Slack, from the URL in the mounted Secret: {slack:#?}"
    );
    let statuses = |path: &str, token: (&str, &str)| -> Vec<String> {
        seen.iter()
            .filter(|r| r.path == path)
            .inspect(|r| assert_eq!(r.headers.get(token.0).map(String::as_str), Some(token.1)))
            .map(|r| r.json()["state"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let github = statuses(
        &format!("/github/repos/org/gitops/statuses/{rev}"),
        ("authorization", "Bearer gh-token"),
    );
    assert_eq!(
        github.last().map(String::as_str),
        Some("success"),
        "{github:?}"
    );
    assert!(github.len() >= 2 && github[..github.len() - 1].iter().all(|s| s == "pending"));
    let gitlab = statuses(
        &format!("/gitlab/projects/42/statuses/{rev}"),
        ("private-token", "gl-token"),
    );
    assert_eq!(
        gitlab.last().map(String::as_str),
        Some("success"),
        "{gitlab:?}"
    );
}

/// Condition `type_` of `status` (the test fails without it).
fn condition_in<'a>(
    status: &'a camelk_reconciler::api::OperatorAssignmentStatus,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition: {:#?}", status.conditions))
}

/// The notes of the Events with `reason` in `ns`.
async fn notes_of(admin: &kube::Client, ns: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(admin.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

/// Ready required within 3 minutes of a step, as the rest of this binary.
fn gated() -> Rollout {
    Rollout::new().require_ready(true).gate_timeout("3m")
}

/// The assignment that hands everything from operator-1 to operator-2 in
/// two steps (half, then all), by `rollout`.
fn two_steps(ns: &str, rollout: Rollout) -> String {
    fleet(ns)
        .default_operator("operator-1")
        .staged_move("operator-1", "operator-2", &["50%", "100%"])
        .rollout(rollout)
        .render()
}

/// `kubectl camelk approve` in `ns` as `user`, with `args`.
fn approve(
    cluster: &camelk_testkit::TestCluster,
    user: &str,
    ns: &str,
    args: &[&str],
) -> std::process::Output {
    std::process::Command::new(camelk_testkit::workspace_binary(
        "kubectl-camelk",
        "kubectl-camelk",
    ))
    .arg("--kubeconfig")
    .arg(cluster.kubeconfig())
    .args(["--context", user, "-n", ns, "approve", NAME])
    .args(args)
    .env("NO_COLOR", "1")
    .output()
    .unwrap()
}

fn refused(out: &std::process::Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(says),
        "expected a refusal saying {says:?}; exit {:?}, stderr: {stderr}",
        out.status.code()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_waits_for_its_approval_and_goes_on_once_approved() {
    let (cluster, ns, admin) = setup("up-approve").await;
    camelk_testkit::approvals::enforce_policy(&admin, &ns.name)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    camelk_testkit::approvals::grant_approver(&admin, &ns.name, APPROVER)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let names = running_under_operator_1(&admin, &ns.name).await;
    // Every kind of receiver, on loopback; their secrets mounted as files.
    let receiver = Receiver::start().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    for (secret, key, value) in [
        ("slack", "url", receiver.url("/slack")),
        ("gh", "token", "gh-token".to_string()),
        ("gl", "token", "gl-token".to_string()),
    ] {
        std::fs::create_dir_all(secrets.path().join(secret)).unwrap();
        std::fs::write(secrets.path().join(secret).join(key), value + "\n").unwrap();
    }
    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, "operator-1"), "operators");
    let secrets_dir = secrets.path().to_str().unwrap();
    let sync = start_sync(
        cluster,
        &ns.name,
        &git,
        "reconciler",
        &["--notification-secrets-dir", secrets_dir],
    );
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(120, "applied", applied(&rev1)).await;

    // Two steps, each soaking 5 s once healthy; the second waits for approval.
    let rollout = gated().soak("5s").approval_steps(&[2]);
    let rev2 = git.push(
        &(two_steps(&ns.name, rollout) + &notifications(&receiver)),
        "operator-2 takes over, the second half once approved",
    );
    let messages = Mutex::new(Vec::<String>::new());
    let waiting = assignment
        .wait(300, "waiting for approval of step 2", |s| {
            let ro = s.rollout.as_ref();
            if let Some(ro) = ro {
                let mut seen = messages.lock().unwrap();
                if seen.last() != Some(&ro.message) {
                    seen.push(ro.message.clone());
                }
            }
            ro.is_some_and(|r| r.revision == rev2 && r.state == RolloutState::WaitingForApproval)
        })
        .await;
    let ro = waiting.rollout.as_ref().unwrap();
    assert_eq!(
        (ro.current_step, ro.completed_steps, ro.total_steps),
        (2, 1, 2)
    );
    let condition = condition_in(&waiting, "WaitingForApproval");
    assert_eq!(condition.status, "True");
    for says in [
        &rev2[..12],
        "step 2 of 2",
        &format!("kubectl camelk approve {NAME} --step 2"),
    ] {
        assert!(condition.message.contains(says), "{}", condition.message);
    }
    let soaked = messages.lock().unwrap().clone();
    assert!(
        soaked
            .iter()
            .any(|m| m.contains("step 1 of 2: all moved resources healthy; soaking")),
        "step 1 soaked before it was done: {soaked:#?}"
    );
    let api = camel_api(admin.clone(), CamelKind::Integration, &ns.name);
    let owners = |objects: Vec<DynamicObject>| -> Vec<String> {
        let mut o: Vec<String> = objects
            .iter()
            .filter_map(|o| owner_id(&o.metadata))
            .collect();
        o.sort();
        o
    };
    let listed = api.list(&Default::default()).await.unwrap().items;
    assert_eq!(
        owners(listed),
        ["operator-1", "operator-2"],
        "step 1 moved one, step 2 none yet"
    );

    // What is refused: another step, an older revision, and an approval
    // that names someone else than its creator (the admission policy).
    refused(
        &approve(cluster, APPROVER, &ns.name, &["--step", "1"]),
        "step 1 does not wait for approval",
    );
    refused(
        &approve(
            cluster,
            APPROVER,
            &ns.name,
            &["--step", "2", "--revision", &rev1[..10]],
        ),
        "is not the one rolling out",
    );
    let as_approver = cluster.client_as(APPROVER).await;
    let forged = RolloutApproval::new(
        "forged",
        RolloutApprovalSpec {
            assignment: NAME.into(),
            revision: rev2.clone(),
            step: 2,
            approver: "release-manager".into(),
        },
    );
    let forged = Api::<RolloutApproval>::namespaced(as_approver, &ns.name)
        .create(&PostParams::default(), &forged)
        .await;
    assert!(
        matches!(&forged, Err(kube::Error::Api(e)) if e.message.contains("spec.approver must be the user who approves")),
        "{forged:?}"
    );
    // None of that let the step start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = assignment.wait(5, "still waiting", |_| true).await;
    assert_eq!(
        still.rollout.as_ref().map(|r| r.state),
        Some(RolloutState::WaitingForApproval)
    );

    let out = approve(cluster, APPROVER, &ns.name, &["--step", "2"]);
    camelk_testkit::assert_success(&out, "kubectl camelk approve");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("approved by {APPROVER}")), "{said}");

    let done = assignment.wait(300, "applied", applied(&rev2)).await;
    let row = done.history.iter().find(|r| r.revision == rev2).unwrap();
    let approvals: Vec<(u32, &str)> = row
        .approvals
        .iter()
        .map(|a| (a.step, a.approver.as_str()))
        .collect();
    assert_eq!(
        approvals,
        [(2, APPROVER)],
        "the approver, as the API server named them"
    );
    let condition = condition_in(&done, "WaitingForApproval");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Approved")
    );
    for name in names {
        wait_ready_under(&admin, &ns.name, name, "operator-2").await;
    }
    let approved = notes_of(&admin, &ns.name, "Approved").await;
    notified_of_each_moment(&receiver, &rev2);
    assert!(
        approved.len() == 1 && approved[0].contains(&format!("approved by {APPROVER}")),
        "one Approved Event naming the approver: {approved:?}"
    );
    assert_single_owner(cluster, &ns.name);
}

/// The status of the assignment once `check` holds (`timeout` at most).
async fn status_until(
    admin: &kube::Client,
    ns: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&camelk_reconciler::api::OperatorAssignmentStatus) -> bool,
) -> camelk_reconciler::api::OperatorAssignmentStatus {
    let api: Api<camelk_reconciler::api::OperatorAssignment> = Api::namespaced(admin.clone(), ns);
    let read = || {
        let api = api.clone();
        async move {
            api.get_opt(NAME)
                .await
                .ok()
                .flatten()
                .and_then(|o| o.status)
        }
    };
    camelk_testkit::poll::until(timeout, read, check)
        .await
        .unwrap_or_else(|last| panic!("{ns}/{NAME}: not {what} after {timeout:?}; last: {last:#?}"))
}

/// Asks the sync for a round now, as `kubectl camelk sync` does.
async fn request_sync(admin: &kube::Client, ns: &str) {
    let api: Api<camelk_reconciler::api::OperatorAssignment> = Api::namespaced(admin.clone(), ns);
    let patch = serde_json::json!({ "metadata": { "annotations": {
        camelk_reconciler::api::RECONCILE_REQUEST_ANNOTATION: jiff::Timestamp::now().to_string()
    } } });
    api.patch(NAME, &Default::default(), &kube::api::Patch::Merge(patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deny_window_holds_the_rollout_until_it_ends_by_the_sync_clock() {
    let (cluster, ns, admin) = setup("up-window").await;
    let names = running_under_operator_1(&admin, &ns.name).await;
    // The sync's clock reads 22:30 in Berlin on a Monday: inside the nightly
    // freeze from 22:00 to 00:00 (21:00 to 23:00 UTC).
    let now = std::sync::Arc::new(Mutex::new(
        "2026-12-07T21:30:00Z".parse::<jiff::Timestamp>().unwrap(),
    ));
    let clock = {
        let now = now.clone();
        camelk_reconciler::sync::Clock::from_fn(move || *now.lock().unwrap())
    };
    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, "operator-1"), "operators");
    let stop = tokio_util::sync::CancellationToken::new();
    let url = format!("file://{}", git.url().display());
    let options = camelk_testkit::in_process_sync::Options {
        clock,
        ..Default::default()
    };
    let sync = camelk_testkit::in_process_sync::start(
        cluster,
        &ns.name,
        &url,
        &git.cache("in-process"),
        options,
        &stop,
    )
    .await;
    status_until(
        &admin,
        &ns.name,
        "applied",
        Duration::from_secs(120),
        applied(&rev1),
    )
    .await;

    let rev2 = git.push(
        &two_steps(
            &ns.name,
            gated().window("Deny", "0 22 * * *", "2h", "Europe/Berlin"),
        ),
        "operator-2 takes over, outside the nightly freeze",
    );
    request_sync(&admin, &ns.name).await;
    let held = status_until(
        &admin,
        &ns.name,
        "waiting for the window",
        Duration::from_secs(60),
        |s| {
            s.rollout
                .as_ref()
                .is_some_and(|r| r.revision == rev2 && r.state == RolloutState::WaitingForWindow)
        },
    )
    .await;
    let ro = held.rollout.as_ref().unwrap();
    assert_eq!((ro.current_step, ro.completed_steps), (1, 0));
    assert_eq!(ro.next_step_at.as_deref(), Some("2026-12-07T23:00:00Z"));
    assert!(
        ro.message.contains("deny window `0 22 * * *` (2h, Europe/Berlin) is active until 2026-12-08T00:00:00+01:00[Europe/Berlin]"),
        "{}",
        ro.message
    );
    let status = std::process::Command::new(camelk_testkit::workspace_binary(
        "kubectl-camelk",
        "kubectl-camelk",
    ))
    .arg("--kubeconfig")
    .arg(cluster.kubeconfig())
    .args(["--context", "reconciler", "-n", &ns.name, "status", NAME])
    .env("NO_COLOR", "1")
    .output()
    .unwrap();
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains("next step at:    2026-12-07T23:00:00Z"),
        "{said}"
    );

    // The clock moves on, within the window: still held, nothing moved.
    *now.lock().unwrap() = "2026-12-07T22:59:00Z".parse().unwrap();
    request_sync(&admin, &ns.name).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = status_until(
        &admin,
        &ns.name,
        "still held",
        Duration::from_secs(5),
        |_| true,
    )
    .await;
    assert_eq!(
        still.rollout.as_ref().map(|r| r.state),
        Some(RolloutState::WaitingForWindow)
    );
    let api = camel_api(admin.clone(), CamelKind::Integration, &ns.name);
    for o in api.list(&Default::default()).await.unwrap().items {
        assert_eq!(
            owner_id(&o.metadata).as_deref(),
            Some("operator-1"),
            "nothing moves in the freeze"
        );
    }

    // The window ends: the rollout goes on to its end.
    *now.lock().unwrap() = "2026-12-07T23:00:00Z".parse().unwrap();
    request_sync(&admin, &ns.name).await;
    let done = status_until(
        &admin,
        &ns.name,
        "applied",
        Duration::from_secs(300),
        applied(&rev2),
    )
    .await;
    assert_eq!(
        done.rollout.as_ref().and_then(|r| r.next_step_at.clone()),
        None
    );
    for name in names {
        wait_ready_under(&admin, &ns.name, name, "operator-2").await;
    }
    assert_single_owner(cluster, &ns.name);
    stop.cancel();
    sync.join().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_metric_analysis_moves_the_step_back_and_a_good_one_goes_on() {
    let (cluster, ns, admin) = setup("up-analysis").await;
    let names = running_under_operator_1(&admin, &ns.name).await;
    // A real Prometheus scrapes an exporter whose error ratio the test sets:
    // bad for every Integration at first.
    let exporter = camelk_testkit::prometheus::Exporter::start().unwrap();
    let ratio = |value: f64| -> Vec<(String, f64)> {
        names
            .iter()
            .map(|n| {
                (
                    format!("integration=\"{n}\",namespace=\"{}\"", ns.name),
                    value,
                )
            })
            .collect()
    };
    let set = |value: f64| {
        let samples = ratio(value);
        let samples: Vec<(&str, f64)> = samples.iter().map(|(l, v)| (l.as_str(), *v)).collect();
        exporter.set("canary_error_ratio", &samples);
    };
    set(0.5);
    let prometheus = camelk_testkit::prometheus::Prometheus::start(&exporter)
        .unwrap_or_else(|e| panic!("{e:#}"));

    let receiver = Receiver::start().unwrap();
    let git = GitRemote::new();
    let rev1 = git.push(&manifest(&ns.name, "operator-1"), "operators");
    let sync = start_sync(cluster, &ns.name, &git, "reconciler", &[]);
    let assignment = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    assignment.wait(120, "applied", applied(&rev1)).await;

    let query = "max(canary_error_ratio{namespace=~\"{{namespaces}}\",integration=~\"{{names}}\"})";
    let moving = |message: &str| {
        git.push(
            &(two_steps(
                &ns.name,
                gated().analysis(
                    &prometheus.url(),
                    "1s",
                    3,
                    0,
                    &[("canary-errors", query, "result < 0.1")],
                ),
            ) + &format!(
                "  notifications:\n  - {{name: hook, webhook: {{url: \"{}\"}}}}\n",
                receiver.url("/hook")
            )),
            message,
        )
    };
    let rev2 = moving("operator-2 takes over, judged by the canary's error ratio");
    let rolled_back = assignment
        .wait(300, "rolled back by the analysis", |s| {
            s.rollout
                .as_ref()
                .is_some_and(|r| r.revision == rev2 && r.state == RolloutState::RolledBack)
        })
        .await;
    let stalled = condition_in(&rolled_back, "Stalled");
    assert_eq!(
        (stalled.status.as_str(), stalled.reason.as_str()),
        ("True", "AnalysisFailed")
    );
    for says in [
        "step 1 of 2: the metric analysis failed",
        "query canary-errors (result < 0.1) gave 0.5",
        "1 resources handed back",
    ] {
        assert!(
            stalled.message.contains(says),
            "{says:?} in {}",
            stalled.message
        );
    }
    let analysis = rolled_back
        .rollout
        .as_ref()
        .and_then(|r| r.analysis.clone())
        .unwrap();
    assert_eq!(
        (analysis.measurements, analysis.failures),
        (1, 1),
        "{analysis:?}"
    );
    // Every resource is back with its former owner, and runs there.
    for name in names {
        wait_ready_under(&admin, &ns.name, name, "operator-1").await;
    }
    assert_eq!(
        notes_of(&admin, &ns.name, "AnalysisFailed").await.len(),
        1,
        "one AnalysisFailed Event"
    );
    let seen = receiver.wait_for(Duration::from_secs(30), "RolledBack webhook", |seen| {
        seen.iter().any(|r| r.json()["kind"] == "RolledBack")
    });
    let rolled_back = seen
        .iter()
        .map(Request::json)
        .find(|j| j["kind"] == "RolledBack")
        .unwrap();
    assert_eq!(rolled_back["revision"], rev2.as_str());
    assert!(
        rolled_back["message"]
            .as_str()
            .unwrap()
            .contains("the metric analysis failed"),
        "{rolled_back:#}"
    );

    // The canary is good now: a new revision goes through both analyses.
    set(0.0);
    let rev3 = moving("operator-2 takes over, the canary fixed");
    let done = assignment.wait(300, "applied", applied(&rev3)).await;
    assert_eq!(done.rollout.as_ref().map(|r| r.total_steps), Some(2));
    for name in names {
        wait_ready_under(&admin, &ns.name, name, "operator-2").await;
    }
    assert_single_owner(cluster, &ns.name);
}
