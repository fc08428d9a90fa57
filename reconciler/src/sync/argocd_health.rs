//! The Argo CD health check of `docs/argocd/health.lua`, run by a real Lua
//! interpreter (Debian's `lua5.4`) on `OperatorAssignment` objects built
//! with the library's own types, in each shape `reconciler sync` writes.
//!
//! The script runs as Argo CD runs it: a chunk that reads the global `obj`
//! and returns `{status, message}`. Lua has no JSON reader, so the object,
//! serialized with serde_json, is written as a Lua table literal; every
//! number as a float, as Argo CD's gopher-lua holds it.
//!
//! The conditions are set by the sync's own outcomes ([`super::progress`]),
//! so the shapes are the ones the sync writes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::progress as outcome;
use crate::api::{
    DriftPolicy, HandoffSettings, Operator, OperatorAssignment, OperatorAssignmentSpec,
    OperatorAssignmentStatus, OperatorId, Protocol, RolloutSettings, RolloutState, RolloutStatus,
    SUSPEND_ANNOTATION, Scope,
};
use crate::source::short_sha;

/// The interpreter, and the Debian package that has it.
const LUA: &str = "lua5.4";

/// The revision applied, and the one rolled out after it.
const APPLIED: &str = "9f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c";
const NEXT: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/argocd/health.lua")
}

/// What the script returned.
#[derive(Debug, PartialEq)]
struct Health {
    status: String,
    message: String,
}

/// Runs the health script on `object` as Argo CD does.
fn health(object: &OperatorAssignment) -> Health {
    let value = serde_json::to_value(object).expect("an OperatorAssignment serializes");
    let mut obj = String::new();
    lua_value(&value, &mut obj);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let driver = dir.path().join("driver.lua");
    let mut path = String::new();
    lua_string(&script().to_string_lossy(), &mut path);
    let text = format!(
        "obj = {obj}\n\
         local check = assert(loadfile({path}))\n\
         local hs = check()\n\
         assert(type(hs) == \"table\", \"the script returned \" .. type(hs))\n\
         assert(type(hs.status) == \"string\", \"status is \" .. type(hs.status))\n\
         assert(type(hs.message) == \"string\", \"message is \" .. type(hs.message))\n\
         io.write(hs.status, \"\\0\", hs.message)\n"
    );
    std::fs::write(&driver, text).expect("write the driver");
    let out = match Command::new(LUA).arg(&driver).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "{LUA} is not on PATH: install Debian's package `{LUA}` (apt-get install -y {LUA}); \
             .ci/run installs it"
        ),
        Err(e) => panic!("running {LUA}: {e}"),
    };
    assert!(
        out.status.success(),
        "{LUA} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("the script answers in UTF-8");
    let (status, message) = stdout
        .split_once('\0')
        .unwrap_or_else(|| panic!("no status and message in {stdout:?}"));
    let health = Health {
        status: status.to_string(),
        message: message.to_string(),
    };
    // The statuses Argo CD knows (Missing and Unknown are its own to give).
    assert!(
        ["Healthy", "Progressing", "Degraded", "Suspended"].contains(&status),
        "{health:?}"
    );
    health
}

/// `value` as a Lua expression, as Argo CD hands JSON to Lua: objects and
/// arrays as tables (arrays from 1), numbers as floats, null as nil.
fn lua_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("nil"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let n = n.as_f64().expect("a JSON number is a float");
            out.push_str(&format!("{n:?}"));
        }
        Value::String(s) => lua_string(s, out),
        Value::Array(items) => {
            out.push('{');
            for item in items {
                lua_value(item, out);
                out.push_str(", ");
            }
            out.push('}');
        }
        Value::Object(fields) => {
            out.push('{');
            for (key, item) in fields {
                out.push('[');
                lua_string(key, out);
                out.push_str("] = ");
                lua_value(item, out);
                out.push_str(", ");
            }
            out.push('}');
        }
    }
}

/// `s` as a Lua string literal: printable ASCII as is, every other byte as
/// a three-digit decimal escape (so a digit after it is never read into it).
fn lua_string(s: &str, out: &mut String) {
    out.push('"');
    for b in s.bytes() {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
    out.push('"');
}

/// An assignment of generation `generation` with no status yet: two
/// upstream operators, everything to operator-2.
fn assignment(generation: i64) -> OperatorAssignment {
    let operator = |id: &str, namespace: &str| Operator {
        id: OperatorId::new(id).expect("a valid id"),
        namespace: namespace.into(),
        protocol: Protocol::Upstream,
        handles_unowned: false,
    };
    let spec = OperatorAssignmentSpec {
        operators: vec![
            operator("operator-1", "camel-k-op1"),
            operator("operator-2", "camel-k-op2"),
        ],
        scope: Scope::default(),
        default_operator: OperatorId::new("operator-2").expect("a valid id"),
        rules: Vec::new(),
        pins: Vec::new(),
        staged_moves: Vec::new(),
        rollout: RolloutSettings::default(),
        handoff: HandoffSettings::default(),
        drift_policy: DriftPolicy::Revert,
        notifications: Vec::new(),
    };
    let mut object = OperatorAssignment::new("camel-k", spec);
    object.metadata.namespace = Some("camel-k".into());
    object.metadata.generation = Some(generation);
    object
}

/// Generation 2 with revision [`APPLIED`] applied in 3 steps, as the last
/// round of its rollout leaves it (`progress::applied`, `progress::succeeded`).
fn applied() -> OperatorAssignment {
    let mut object = assignment(2);
    let mut status = OperatorAssignmentStatus {
        observed_generation: Some(2),
        last_applied_revision: Some(APPLIED.into()),
        last_attempted_revision: Some(APPLIED.into()),
        rollout: Some(RolloutStatus {
            revision: APPLIED.into(),
            total_steps: 3,
            current_step: 3,
            completed_steps: 3,
            state: RolloutState::Complete,
            message: format!("revision {} applied", short_sha(APPLIED)),
            ..Default::default()
        }),
        ..Default::default()
    };
    status.counts.insert("operator-2".into(), 42);
    let message = format!("applied revision {}", short_sha(APPLIED));
    outcome::succeeded(&mut status, &message, Some(2));
    object.status = Some(status);
    object
}

/// [`applied`], then revision [`NEXT`] (generation 3) rolled out in 3
/// steps: its step 2 handed over and its health gate waiting.
fn waiting_for_health_at_step_2_of_3() -> OperatorAssignment {
    let mut object = applied();
    object.metadata.generation = Some(3);
    let status = object.status.as_mut().expect("a status");
    status.observed_generation = Some(3);
    status.last_attempted_revision = Some(NEXT.into());
    outcome::progressing(status, "step 2 of 3: moving 14 resources", Some(3));
    status.rollout = Some(RolloutStatus {
        revision: NEXT.into(),
        total_steps: 3,
        current_step: 2,
        completed_steps: 1,
        state: RolloutState::WaitingForHealth,
        message: "step 2 of 3: waiting for 14 moved resources to be healthy".into(),
        step_started_at: Some("2026-12-02T18:20:01Z".into()),
        health_check_started_at: Some("2026-12-02T18:20:09Z".into()),
        ..Default::default()
    });
    object
}

/// [`waiting_for_health_at_step_2_of_3`] once its gate's timeout passed
/// (`Syncer::on_unhealthy`, then `Syncer::pause`).
fn gate_failed(state: RolloutState, summary: &str, reason: &str) -> OperatorAssignment {
    let mut object = waiting_for_health_at_step_2_of_3();
    let status = object.status.as_mut().expect("a status");
    let failing = "Integration shop/orders: not Ready; Pipe shop/audit: not Ready";
    outcome::stalled(status, reason, &format!("{summary}: {failing}"), Some(3));
    let rollout = status.rollout.as_mut().expect("a rollout");
    rollout.state = state;
    rollout.message = summary.into();
    rollout.failing = failing.split("; ").map(str::to_string).collect();
    object
}

#[test]
fn no_status_yet_is_progressing() {
    assert_eq!(
        health(&assignment(1)),
        Health {
            status: "Progressing".into(),
            message: "waiting for reconciler sync to report status".into(),
        }
    );
    // As the API server serves a new object: the CRD's status default.
    let mut fresh = assignment(1);
    fresh.status = Some(OperatorAssignmentStatus {
        observed_generation: Some(crate::api::NOT_OBSERVED),
        ..Default::default()
    });
    assert_eq!(health(&fresh).status, "Progressing");
}

#[test]
fn ready_at_the_current_generation_is_healthy() {
    assert_eq!(
        health(&applied()),
        Health {
            status: "Healthy".into(),
            message: "applied revision 9f1c2d3e4f5a".into(),
        }
    );
}

#[test]
fn a_generation_not_yet_observed_is_progressing_even_when_ready() {
    let mut object = applied();
    object.metadata.generation = Some(3);
    assert_eq!(
        health(&object),
        Health {
            status: "Progressing".into(),
            message: "waiting for reconciler sync to observe generation 3 (last observed: 2)"
                .into(),
        }
    );
}

/// The rollout `object` records.
fn rollout_of(object: &mut OperatorAssignment) -> &mut RolloutStatus {
    object
        .status
        .as_mut()
        .and_then(|s| s.rollout.as_mut())
        .expect("a rollout")
}

#[test]
fn a_step_waiting_for_health_is_progressing_and_names_the_step() {
    assert_eq!(
        health(&waiting_for_health_at_step_2_of_3()),
        Health {
            status: "Progressing".into(),
            message: "step 2 of 3: waiting for 14 moved resources to be healthy \
                      (rollout WaitingForHealth, step 2/3)"
                .into(),
        }
    );
}

#[test]
fn a_pause_between_steps_is_progressing() {
    let mut object = waiting_for_health_at_step_2_of_3();
    let rollout = rollout_of(&mut object);
    rollout.completed_steps = 2;
    rollout.state = RolloutState::Pausing;
    rollout.message = "pause of 5m before step 3".into();
    assert_eq!(
        health(&object),
        Health {
            status: "Progressing".into(),
            message: "pause of 5m before step 3 (rollout Pausing, step 2/3)".into(),
        }
    );
}

#[test]
fn a_step_waiting_for_approval_is_suspended_and_says_how_to_approve() {
    let mut object = waiting_for_health_at_step_2_of_3();
    let rollout = rollout_of(&mut object);
    rollout.completed_steps = 1;
    rollout.state = RolloutState::WaitingForApproval;
    rollout.message = "step 2 of 3 of revision 0a1b2c3d4e5f waits for approval: \
                       kubectl camelk approve fleet --step 2 -n camelk-system"
        .into();
    assert_eq!(
        health(&object),
        Health {
            status: "Suspended".into(),
            message: "step 2 of 3 of revision 0a1b2c3d4e5f waits for approval: \
                      kubectl camelk approve fleet --step 2 -n camelk-system \
                      (rollout WaitingForApproval, step 2/3)"
                .into(),
        }
    );
}

#[test]
fn a_new_revision_whose_earlier_steps_are_checked_again_is_progressing_though_ready() {
    // A round of revision NEXT found steps 1 and 2 moved (by a rollout it
    // superseded) and waits on their gate: it writes only the rollout, so
    // Ready still speaks of APPLIED.
    let mut object = applied();
    object.metadata.generation = Some(3);
    let status = object.status.as_mut().expect("a status");
    status.observed_generation = Some(3);
    status.last_attempted_revision = Some(NEXT.into());
    status.rollout = Some(RolloutStatus {
        revision: NEXT.into(),
        total_steps: 3,
        current_step: 2,
        state: RolloutState::WaitingForHealth,
        message: "checking the health of 20 moved resources".into(),
        ..Default::default()
    });
    assert_eq!(
        health(&object),
        Health {
            status: "Progressing".into(),
            message: "checking the health of 20 moved resources \
                      (rollout WaitingForHealth, step 2/3)"
                .into(),
        }
    );
}

#[test]
fn a_failed_health_gate_is_degraded_with_the_stalled_message_and_the_step() {
    let summary = "step 2 of 3: 2 moved resources not healthy within 600s; rollout paused";
    let object = gate_failed(RolloutState::Paused, summary, "HealthCheckFailed");
    assert_eq!(
        health(&object),
        Health {
            status: "Degraded".into(),
            message: format!(
                "HealthCheckFailed: {summary}: Integration shop/orders: not Ready; \
                 Pipe shop/audit: not Ready (rollout Paused, step 2/3)"
            ),
        }
    );
}

#[test]
fn a_rolled_back_step_is_degraded() {
    let summary = "step 2 of 3: 2 moved resources not healthy within 600s; \
                   14 resources handed back; the rollout waits for a new revision";
    let object = gate_failed(RolloutState::RolledBack, summary, "RolledBack");
    let health = health(&object);
    assert_eq!(health.status, "Degraded");
    assert!(
        health
            .message
            .starts_with(&format!("RolledBack: {summary}: Integration shop/orders")),
        "{health:?}"
    );
    assert!(
        health.message.ends_with("(rollout RolledBack, step 2/3)"),
        "{health:?}"
    );
}

#[test]
fn a_target_not_alive_is_degraded() {
    let mut object = waiting_for_health_at_step_2_of_3();
    let status = object.status.as_mut().expect("a status");
    let message = "step 2 of 3: target operator operator-2 is not alive: its lock \
                   camel-k-op2/operator-2-lock was not seen renewing within the lease duration";
    outcome::stalled(status, "TargetNotAlive", message, Some(3));
    let rollout = status.rollout.as_mut().expect("a rollout");
    rollout.state = RolloutState::Paused;
    rollout.message = message.into();
    rollout.target_not_alive = Some("operator-2".into());
    assert_eq!(
        health(&object),
        Health {
            status: "Degraded".into(),
            message: format!("TargetNotAlive: {message} (rollout Paused, step 2/3)"),
        }
    );
}

#[test]
fn an_invalid_generation_is_degraded_though_status_observed_generation_lags() {
    // `--source cluster`: generation 3 does not validate. The round ends
    // before it records status.observedGeneration, but its conditions carry 3.
    let mut object = applied();
    object.metadata.generation = Some(3);
    let status = object.status.as_mut().expect("a status");
    status.last_attempted_revision = Some("generation-3".into());
    let message = "revision generation-3 is invalid; nothing was changed:\n\
                   OperatorAssignment/camel-k/camel-k:9:11: error: unknown operator \"operator-9\"";
    outcome::stalled(status, "ValidationFailed", message, Some(3));
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(
        health(&object),
        Health {
            status: "Degraded".into(),
            // The applied rollout is Complete: no rollout note.
            message: format!("ValidationFailed: {message}"),
        }
    );
}

#[test]
fn a_source_that_cannot_be_fetched_is_degraded() {
    let mut object = applied();
    let status = object.status.as_mut().expect("a status");
    let message = "fetching https://git.example.com/platform/gitops.git: \
                   the remote refused every credential offered; keeping the last applied revision";
    outcome::fetch_failed(status, message, Some(2));
    assert_eq!(
        health(&object),
        Health {
            status: "Degraded".into(),
            message: format!("FetchFailed: {message}"),
        }
    );
}

#[test]
fn a_fetch_failed_mid_rollout_stays_progressing_and_says_so() {
    let mut object = waiting_for_health_at_step_2_of_3();
    let status = object.status.as_mut().expect("a status");
    outcome::fetch_failed(status, "fetching origin: timed out", Some(3));
    let health = health(&object);
    assert_eq!(health.status, "Progressing");
    assert!(
        health.message.ends_with(
            "(rollout WaitingForHealth, step 2/3); FetchFailed: fetching origin: timed out"
        ),
        "{health:?}"
    );
}

#[test]
fn the_suspend_annotation_is_suspended_before_and_after_the_reconciler_acknowledges_it() {
    let mut object = applied();
    object
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(SUSPEND_ANNOTATION.into(), "true".into());
    assert_eq!(
        health(&object),
        Health {
            status: "Suspended".into(),
            message: "camelk.dev/suspend is true: waiting for reconciler sync to acknowledge it"
                .into(),
        }
    );
    // Suspended wins over a stalled rollout too: nothing acts on it.
    let mut stalled = gate_failed(RolloutState::Paused, "paused", "HealthCheckFailed");
    stalled.metadata.annotations = object.metadata.annotations.clone();
    let message =
        format!("{SUSPEND_ANNOTATION} is true: no fetch result is acted on until it is removed");
    let _ = outcome::suspend(
        stalled.status.as_mut().expect("a status"),
        &message,
        Some(3),
    );
    assert_eq!(
        health(&stalled),
        Health {
            status: "Suspended".into(),
            message,
        }
    );
}

#[test]
fn a_resume_not_yet_acted_on_is_progressing() {
    let mut object = applied();
    let status = object.status.as_mut().expect("a status");
    let message =
        format!("{SUSPEND_ANNOTATION} is true: no fetch result is acted on until it is removed");
    let _ = outcome::suspend(status, &message, Some(2));
    assert_eq!(
        health(&object),
        Health {
            status: "Progressing".into(),
            message: "camelk.dev/suspend removed: waiting for reconciler sync to resume".into(),
        }
    );
}

#[test]
fn drift_left_in_place_by_drift_policy_report_is_healthy_and_named() {
    let mut object = applied();
    object.spec.drift_policy = DriftPolicy::Report;
    let status = object.status.as_mut().expect("a status");
    let drift = format!(
        "1 resources differ from revision {} (driftPolicy report: left as they are): \
         Integration shop/orders is with operator-1, not operator-2",
        short_sha(APPLIED)
    );
    outcome::drift_detected(status, &drift, Some(2));
    assert_eq!(
        health(&object),
        Health {
            status: "Healthy".into(),
            message: format!("applied revision 9f1c2d3e4f5a; Drifted: {drift}"),
        }
    );
}

#[test]
fn drift_being_moved_back_is_progressing() {
    // driftPolicy revert: the round moves the resource back in a rollout of
    // its own, through `progress::progressing`.
    let mut object = applied();
    let status = object.status.as_mut().expect("a status");
    outcome::drift_detected(
        status,
        "1 resources differ from revision 9f1c2d3e4f5a",
        Some(2),
    );
    outcome::progressing(status, "step 1 of 1: moving 1 resources", Some(2));
    status.rollout = Some(RolloutStatus {
        revision: APPLIED.into(),
        total_steps: 1,
        current_step: 1,
        state: RolloutState::Progressing,
        message: "step 1 of 1: moving 1 resources".into(),
        ..Default::default()
    });
    assert_eq!(
        health(&object),
        Health {
            status: "Progressing".into(),
            message: "step 1 of 1: moving 1 resources (rollout Progressing, step 1/1)".into(),
        }
    );
}

#[test]
fn strings_reach_lua_byte_for_byte() {
    // Quotes, backslashes, new lines, digits after an escape, UTF-8.
    let mut object = applied();
    let message = "line \"one\"\\\n\t2° ✓ \u{1}9";
    outcome::succeeded(object.status.as_mut().expect("a status"), message, Some(2));
    assert_eq!(health(&object).message, message);
}

#[test]
fn the_readme_names_the_argocd_cm_key_of_this_kind() {
    use kube::Resource;
    let key = format!(
        "resource.customizations.health.{}_{}",
        OperatorAssignment::group(&()),
        OperatorAssignment::kind(&())
    );
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/argocd/README.md");
    let readme = std::fs::read_to_string(readme).expect("docs/argocd/README.md");
    assert!(
        readme.contains(&format!("{key}: |")),
        "{key} not in the README"
    );
}
