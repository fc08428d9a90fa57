//! `kubectl camelk events [-w]`: the Events the reconciler recorded, as
//! `flux events` shows a controller's: on OperatorAssignments (`RolloutStarted`,
//! `StepMoved`, ...) and on the resources it moved (`Moved`, in their own
//! namespaces: use `-A` or `-n` to see those).

use anyhow::Context;
use camelk_reconciler::lock::RECONCILER_ID;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::cli::{Cli, EventsArgs};
use crate::render;

pub async fn run(cli: &Cli, args: &EventsArgs) -> anyhow::Result<()> {
    let (client, default_ns) = super::cluster(cli).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let api: Api<Event> = if cli.all_namespaces {
        Api::all(client)
    } else {
        Api::namespaced(client, &ns)
    };
    let wanted =
        |e: &Event| is_reconcilers(e) && args.for_.as_deref().is_none_or(|f| regards(e, f));
    let list = api
        .list(&ListParams::default())
        .await
        .context("listing Events")?;
    let mut events: Vec<Event> = list.items.into_iter().filter(|e| wanted(e)).collect();
    // Oldest first, as kubectl events: the newest is next to the prompt.
    events.sort_by_key(last_seen);
    let now = Timestamp::now();
    if cli.output.is_structured() {
        print!(
            "{}",
            render::structured(&json!({ "items": events }), cli.output)
        );
    } else if !args.watch && events.is_empty() {
        eprintln!("No events of {RECONCILER_ID} found.");
    } else {
        let rows: Vec<Vec<String>> = events
            .iter()
            .map(|e| row(e, cli.all_namespaces, now))
            .collect();
        print!("{}", render::table(&header(cli.all_namespaces), &rows));
    }
    if !args.watch {
        return Ok(());
    }

    // Then each new or repeated Event as it comes, from where the list ended.
    let mut version = list.metadata.resource_version.unwrap_or_default();
    loop {
        let mut stream = api
            .watch(&WatchParams::default(), &version)
            .await
            .context("watching Events")?
            .boxed();
        while let Some(event) = stream.try_next().await.context("watching Events")? {
            let e = match event {
                WatchEvent::Added(e) | WatchEvent::Modified(e) => e,
                WatchEvent::Bookmark(b) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Deleted(_) => continue,
                // The version is too old to resume from: go on from now.
                WatchEvent::Error(status) if status.code == 410 => {
                    version = api
                        .list_metadata(&ListParams::default().limit(1))
                        .await
                        .context("listing Events")?
                        .metadata
                        .resource_version
                        .unwrap_or_default();
                    break;
                }
                WatchEvent::Error(status) => anyhow::bail!("watching Events: {}", status.message),
            };
            if let Some(v) = &e.metadata.resource_version {
                version = v.clone();
            }
            if !wanted(&e) {
                continue;
            }
            if cli.output.is_structured() {
                println!("{}", serde_json::to_string(&e).context("an Event as JSON")?);
            } else {
                // The header was printed once, above the list.
                let row = row(&e, cli.all_namespaces, Timestamp::now());
                print!("{}", render::table_row(&header(cli.all_namespaces), row));
            }
        }
    }
}

/// Whether the reconciler recorded `e` (its reporting controller is the
/// reconciler's lock id, what `reconciler sync` reports as).
fn is_reconcilers(e: &Event) -> bool {
    e.reporting_controller.as_deref() == Some(RECONCILER_ID)
}

/// Whether `e` is about `target`, given as `KIND/NAME` (kind in any case).
fn regards(e: &Event, target: &str) -> bool {
    let Some((kind, name)) = target.split_once('/') else {
        return false;
    };
    e.regarding.as_ref().is_some_and(|r| {
        r.kind
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case(kind))
            && r.name.as_deref() == Some(name)
    })
}

/// When `e` was last seen: the last of its series, else its time.
fn last_seen(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn header(all_namespaces: bool) -> Vec<&'static str> {
    let mut header = vec!["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];
    if all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    header
}

fn row(e: &Event, all_namespaces: bool, now: Timestamp) -> Vec<String> {
    let regarding = e.regarding.clone().unwrap_or_default();
    let object = format!(
        "{}/{}",
        regarding.kind.unwrap_or_default().to_lowercase(),
        regarding.name.unwrap_or_default()
    );
    let seen = last_seen(e).map_or("<unknown>".to_string(), |t| {
        render::age(now.duration_since(t).as_secs().max(0).unsigned_abs())
    });
    let count = e.series.as_ref().map_or(1, |s| s.count);
    let reason = match count {
        1 => e.reason.clone().unwrap_or_default(),
        n => format!("{} (x{n})", e.reason.clone().unwrap_or_default()),
    };
    let mut row = vec![
        seen,
        e.type_.clone().unwrap_or_default(),
        reason,
        object,
        e.note.clone().unwrap_or_default(),
    ];
    if all_namespaces {
        row.insert(0, e.metadata.namespace.clone().unwrap_or_default());
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(controller: &str, kind: &str, name: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": { "name": "e", "namespace": "shop" },
            "eventTime": "2026-12-04T10:00:00.000000Z",
            "reportingController": controller, "reportingInstance": "r-1",
            "reason": "Moved", "type": "Normal", "action": "Handoff",
            "note": "handed over from operator-1 to operator-2",
            "regarding": { "kind": kind, "name": name, "namespace": "shop" },
            "series": { "count": 3, "lastObservedTime": "2026-12-04T10:01:00.000000Z" }
        }))
        .unwrap()
    }

    #[test]
    fn only_the_reconcilers_events_about_the_named_object() {
        let moved = event(RECONCILER_ID, "Integration", "orders");
        assert!(is_reconcilers(&moved));
        assert!(!is_reconcilers(&event(
            "camel-k-operator",
            "Integration",
            "orders"
        )));
        assert!(regards(&moved, "integration/orders"));
        assert!(!regards(&moved, "integration/billing"));
        assert!(!regards(&moved, "pipe/orders"));
        assert!(!regards(&moved, "orders"));
    }

    #[test]
    fn a_row_says_when_last_seen_and_how_often() {
        let moved = event(RECONCILER_ID, "Integration", "orders");
        let now: Timestamp = "2026-12-04T10:03:30Z".parse().unwrap();
        assert_eq!(
            row(&moved, true, now),
            [
                "shop",
                "2m30s",
                "Normal",
                "Moved (x3)",
                "integration/orders",
                "handed over from operator-1 to operator-2"
            ]
        );
    }
}
