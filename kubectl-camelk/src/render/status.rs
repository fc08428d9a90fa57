//! What `kubectl camelk status` shows of an OperatorAssignment.

use super::table::rows_table;

/// What `kubectl camelk status` shows of one OperatorAssignment: revisions,
/// generation, the rollout, owners, conditions and recent migrations.
pub fn assignment_status(a: &camelk_reconciler::api::OperatorAssignment) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let st = a.status.clone().unwrap_or_default();
    let short = |r: &Option<String>| {
        r.as_deref()
            .map(|r| camelk_reconciler::source::short_sha(r).to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let _ = writeln!(
        out,
        "Name:              {}/{}",
        a.metadata.namespace.as_deref().unwrap_or_default(),
        a.metadata.name.as_deref().unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "Applied revision:  {}",
        short(&st.last_applied_revision)
    );
    let _ = writeln!(
        out,
        "Attempted:         {}",
        short(&st.last_attempted_revision)
    );
    let _ = writeln!(
        out,
        "Generation:        {} (observed {})",
        a.metadata.generation.unwrap_or_default(),
        st.observed_generation
            .filter(|g| *g != camelk_reconciler::api::NOT_OBSERVED)
            .map_or("<none>".to_string(), |g| g.to_string())
    );
    if let Some(r) = &st.rollout {
        let _ = writeln!(
            out,
            "Rollout:           {} step {}/{} (completed {}){}",
            r.state,
            r.current_step,
            r.total_steps,
            r.completed_steps,
            if r.message.is_empty() {
                String::new()
            } else {
                format!(": {}", r.message)
            }
        );
        if let Some(at) = &r.next_step_at {
            let _ = writeln!(out, "  next step at:    {at}");
        }
        for f in &r.failing {
            let _ = writeln!(out, "  failing:         {f}");
        }
    }
    if !st.counts.is_empty() {
        let owners: Vec<String> = st
            .counts
            .iter()
            .map(|(id, n)| format!("{id}={n}"))
            .collect();
        let _ = writeln!(out, "Owners:            {}", owners.join(", "));
    }
    let mut table = vec![vec![
        "CONDITION".to_string(),
        "STATUS".into(),
        "REASON".into(),
        "MESSAGE".into(),
    ]];
    for c in &st.conditions {
        table.push(vec![
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        ]);
    }
    out.push('\n');
    out.push_str(&rows_table(&table));
    if !st.history.is_empty() {
        out.push('\n');
        let mut table = vec![vec![
            "REVISION".to_string(),
            "STARTED".into(),
            "MOVES".into(),
            "STEPS".into(),
            "RESULT".into(),
        ]];
        for h in &st.history {
            table.push(vec![
                camelk_reconciler::source::short_sha(&h.revision).to_string(),
                h.started_at.clone(),
                h.moves.to_string(),
                h.steps.to_string(),
                h.result.to_string(),
            ]);
        }
        out.push_str(&rows_table(&table));
    }
    out.push('\n');
    out
}
