//! The manifest's change as a coloured unified diff.

use super::colour::{ADDED, HUNK, REMOVED, paint};

/// A unified diff of the manifest, `a/` and `b/` as Git prints them, added
/// lines green, removed ones red, hunk headers cyan (styled: print it with
/// [`print_styled`](super::print_styled)).
pub fn manifest_diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&prefixed("a", path), &prefixed("b", path))
        .to_string();
    diff.split_inclusive('\n')
        .map(|line| {
            // Styled up to the line break, so the stripped text is the diff
            // byte for byte.
            let (text, end) = line.split_at(line.trim_end_matches('\n').len());
            let style = match text.chars().next() {
                Some('+') if !text.starts_with("+++") => ADDED,
                Some('-') if !text.starts_with("---") => REMOVED,
                Some('@') => HUNK,
                _ => return line.to_string(),
            };
            paint(text, style) + end
        })
        .collect()
}

/// `a/path` as Git writes it for a path in the repository; an absolute
/// path (a file outside any repository) stays as it is.
fn prefixed(side: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{side}/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::render::colour::both_ways;

    #[test]
    fn the_diff_is_coloured_on_a_terminal_and_plain_text_byte_for_byte_elsewhere() {
        let old = "a: 1\r\nb: 2\nc: 3\n";
        let new = "a: 1\r\nb: 20\nc: 3";
        let plain = similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header("a/m.yaml", "b/m.yaml")
            .to_string();
        let (terminal, pipe) = both_ways(&manifest_diff("m.yaml", old, new));
        assert_eq!(pipe, plain);
        assert!(terminal.contains("\x1b[31m-b: 2\x1b[0m\n"), "{terminal:?}");
        assert!(terminal.contains("\x1b[32m+b: 20\x1b[0m\n"), "{terminal:?}");
        assert!(
            terminal.contains("\x1b[36m@@ -1,3 +1,3 @@\x1b[0m\n"),
            "{terminal:?}"
        );
        assert!(
            terminal.starts_with("--- a/m.yaml\n+++ b/m.yaml\n"),
            "{terminal:?}"
        );
    }
}
