//! Rollout batching: split the moves of one group into the cumulative steps
//! of its rollout.
//!
//! Contract: [`split`] keeps the input order, puts every move in exactly one
//! batch, never returns an empty batch, and implies a last step of 100%.

use crate::api::Step;

/// Splits `items` into consecutive batches whose cumulative sizes follow
/// `steps`. Returns `(step number, items)` pairs, step numbers from 1.
pub fn split<T>(items: Vec<T>, steps: &[Step]) -> Vec<(usize, Vec<T>)> {
    let total = items.len();
    let mut targets: Vec<usize> = steps.iter().map(|s| s.target(total)).collect();
    if targets.last() != Some(&total) {
        targets.push(total);
    }
    let mut out = Vec::new();
    let mut rest = items.into_iter();
    let mut done = 0;
    for (i, target) in targets.into_iter().enumerate() {
        let target = target.max(done);
        let batch: Vec<T> = rest.by_ref().take(target - done).collect();
        done = target;
        if !batch.is_empty() {
            out.push((i + 1, batch));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_are_cumulative() {
        let steps = [Step::Percent(10), Step::Percent(50), Step::Percent(100)];
        let sizes: Vec<_> = split((0..20).collect(), &steps)
            .into_iter()
            .map(|(n, b)| (n, b.len()))
            .collect();
        assert_eq!(sizes, vec![(1, 2), (2, 8), (3, 10)]);
    }

    #[test]
    fn last_step_is_implied() {
        let sizes: Vec<_> = split((0..7).collect(), &[Step::Count(2)])
            .into_iter()
            .map(|(n, b)| (n, b.len()))
            .collect();
        assert_eq!(sizes, vec![(1, 2), (2, 5)]);
        assert_eq!(split::<u8>(vec![], &[Step::Count(2)]), vec![]);
    }
}
