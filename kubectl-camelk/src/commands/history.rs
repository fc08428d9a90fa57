//! `kubectl camelk history [NAME] [--revision REV]`: the migrations the
//! reconciler executed, newest first, from `status.history` (as `argocd app
//! history`); with `--revision`, the moves of one migration, from the `Moved`
//! Events the reconciler recorded on each moved resource. Nothing is kept
//! locally: the cluster is the record.

use anyhow::{Context, bail};
use camelk_reconciler::api::{MigrationRecord, OperatorAssignment};
use camelk_reconciler::lock::RECONCILER_ID;
use camelk_reconciler::source::short_sha;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::cli::{Cli, HistoryArgs};
use crate::render;

/// One migration of one assignment.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    assignment: String,
    #[serde(flatten)]
    record: MigrationRecord,
    /// From start to end (or to now while it runs), in seconds.
    duration_seconds: Option<i64>,
}

/// One resource a migration moved.
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct MovedRow {
    kind: String,
    namespace: String,
    name: String,
    from: String,
    to: String,
    step: String,
    at: Option<String>,
}

pub async fn run(cli: &Cli, args: &HistoryArgs) -> anyhow::Result<()> {
    let (client, default_ns) = super::cluster(cli).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let api: Api<OperatorAssignment> = Api::namespaced(client.clone(), &ns);
    let names = super::assignments::named_or_all(&api, &ns, args.name.as_deref()).await?;
    let now = Timestamp::now();
    let mut rows = Vec::new();
    // Each assignment's scope: where its Moved Events are.
    let mut scopes = std::collections::BTreeMap::new();
    for name in &names {
        let object = api
            .get(name)
            .await
            .with_context(|| format!("reading OperatorAssignment {ns}/{name}"))?;
        let history = object.status.map(|s| s.history).unwrap_or_default();
        for record in history {
            let duration_seconds = duration(&record, now);
            rows.push(Row {
                assignment: name.clone(),
                record,
                duration_seconds,
            });
        }
        scopes.insert(name.clone(), object.spec.scope.namespaces);
    }
    // Newest first across assignments, as each history is.
    rows.sort_by(|a, b| b.record.started_at.cmp(&a.record.started_at));

    let Some(rev) = &args.revision else {
        if cli.output.is_structured() {
            print!("{}", render::structured(&rows, cli.output));
        } else if rows.is_empty() {
            eprintln!("No migrations recorded in namespace {ns}.");
        } else {
            let table: Vec<Vec<String>> = rows.iter().map(|r| history_row(r, now)).collect();
            print!("{}", render::table(&HISTORY_HEADER, &table));
        }
        return Ok(());
    };

    let matching: Vec<&Row> = rows
        .iter()
        .filter(|r| !rev.is_empty() && r.record.revision.starts_with(rev.as_str()))
        .collect();
    let row = match matching.as_slice() {
        [one] => *one,
        [] => bail!(
            "no migration of revision {rev} in namespace {ns}; `kubectl camelk history` lists them"
        ),
        _ => bail!("{rev} names several migrations; give more of the SHA"),
    };
    let scope = &scopes[&row.assignment];
    let events: Vec<Event> = if scope.is_empty() {
        Api::<Event>::all(client)
            .list(&ListParams::default())
            .await
            .context("listing Events")?
            .items
    } else {
        let mut all = Vec::new();
        for namespace in scope {
            let listed = Api::<Event>::namespaced(client.clone(), namespace)
                .list(&ListParams::default())
                .await
                .with_context(|| format!("listing Events in {namespace}"))?;
            all.extend(listed.items);
        }
        all
    };
    let mut moved: Vec<MovedRow> = events
        .iter()
        .filter_map(|e| moved_row(e, &row.record.revision))
        .collect();
    moved.sort_by(|a, b| {
        (&a.step, &a.kind, &a.namespace, &a.name).cmp(&(&b.step, &b.kind, &b.namespace, &b.name))
    });
    if cli.output.is_structured() {
        let value = serde_json::json!({
            "assignment": row.assignment,
            "revision": row.record.revision,
            "moves": moved,
        });
        print!("{}", render::structured(&value, cli.output));
    } else {
        let recorded = row.record.moves;
        if (moved.len() as u64) < recorded {
            // Events expire (kube-apiserver --event-ttl, 1 h by default).
            eprintln!(
                "note: {} of the {recorded} moves of {} have a Moved Event left; \
                 the API server drops Events after its --event-ttl",
                moved.len(),
                short_sha(&row.record.revision)
            );
        }
        let table: Vec<Vec<String>> = moved
            .iter()
            .map(|m| {
                vec![
                    m.namespace.clone(),
                    format!("{}/{}", m.kind.to_lowercase(), m.name),
                    m.from.clone(),
                    m.to.clone(),
                    m.step.clone(),
                ]
            })
            .collect();
        print!(
            "{}",
            render::table(&["NAMESPACE", "RESOURCE", "FROM", "TO", "STEP"], &table)
        );
    }
    Ok(())
}

const HISTORY_HEADER: [&str; 10] = [
    "NAME", "REVISION", "AUTHOR", "MESSAGE", "STEPS", "MOVES", "FIRST", "RESULT", "STARTED",
    "DURATION",
];

fn history_row(r: &Row, now: Timestamp) -> Vec<String> {
    let record = &r.record;
    let started = record
        .started_at
        .parse::<Timestamp>()
        .map(|t| render::age(now.duration_since(t).as_secs().max(0).unsigned_abs()) + " ago")
        .unwrap_or_else(|_| record.started_at.clone());
    vec![
        r.assignment.clone(),
        short_sha(&record.revision).to_string(),
        record.author.clone().unwrap_or_default(),
        record.message.clone().unwrap_or_default(),
        record.steps.to_string(),
        record.moves.to_string(),
        record.first_assignments.to_string(),
        record.result.to_string(),
        started,
        r.duration_seconds
            .map(|s| render::age(s.max(0).unsigned_abs()))
            .unwrap_or_default(),
    ]
}

/// From start to end, or to `now` while it runs.
fn duration(record: &MigrationRecord, now: Timestamp) -> Option<i64> {
    let started = record.started_at.parse::<Timestamp>().ok()?;
    let ended = match &record.finished_at {
        Some(end) => end.parse::<Timestamp>().ok()?,
        None => now,
    };
    Some(ended.duration_since(started).as_secs())
}

/// The move a `Moved` Event of the reconciler records, if it belongs to
/// `revision`. Its note reads `handed over from A to B (revision SHORT step
/// N of M)`.
fn moved_row(e: &Event, revision: &str) -> Option<MovedRow> {
    if e.reporting_controller.as_deref() != Some(RECONCILER_ID)
        || e.reason.as_deref() != Some("Moved")
    {
        return None;
    }
    let note = e.note.as_deref()?;
    let rest = note.strip_prefix("handed over from ")?;
    let (from, rest) = rest.split_once(" to ")?;
    let (to, label) = rest.split_once(" (")?;
    let label = label.strip_suffix(')')?;
    let step = label
        .strip_prefix(&format!("revision {} ", short_sha(revision)))?
        .to_string();
    let regarding = e.regarding.as_ref()?;
    Some(MovedRow {
        kind: regarding.kind.clone()?,
        namespace: regarding.namespace.clone()?,
        name: regarding.name.clone()?,
        from: from.to_string(),
        to: to.to_string(),
        step,
        at: e.event_time.as_ref().map(|t| t.0.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn moved(note: &str, controller: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": { "name": "e", "namespace": "shop" },
            "eventTime": "2026-12-04T10:00:00.000000Z",
            "reason": "Moved",
            "reportingController": controller,
            "reportingInstance": "r-1",
            "action": "Handoff",
            "note": note,
            "type": "Normal",
            "regarding": { "kind": "Integration", "namespace": "shop", "name": "orders" }
        }))
        .unwrap()
    }

    #[test]
    fn a_moved_event_is_read_back_only_for_its_revision() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let e = moved(
            "handed over from operator-1 to operator-2 (revision 0123456789ab step 1 of 2)",
            RECONCILER_ID,
        );
        assert_eq!(
            moved_row(&e, sha),
            Some(MovedRow {
                kind: "Integration".into(),
                namespace: "shop".into(),
                name: "orders".into(),
                from: "operator-1".into(),
                to: "operator-2".into(),
                step: "step 1 of 2".into(),
                at: Some("2026-12-04T10:00:00Z".into()),
            })
        );
        assert_eq!(
            moved_row(&e, "fedcba9876543210fedcba9876543210fedcba98"),
            None
        );
        let other = moved(
            "handed over from operator-1 to operator-2 (revision 0123456789ab step 1 of 2)",
            "someone-else",
        );
        assert_eq!(moved_row(&other, sha), None);
    }
}
