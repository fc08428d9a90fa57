//! The progress line of `move --wait`.

use camelk_reconciler::handoff::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The line `move --wait` keeps up to date while a handoff runs:
/// `  DONE/TOTAL moved, waiting on RESOURCE`. On a terminal it is one
/// `indicatif` line redrawn in place (padded to the terminal's width, so
/// what is printed after it starts on the next line); elsewhere (a log, a
/// pipe) indicatif draws nothing and each new state is a line of its own
/// on stderr.
pub struct HandoffProgress {
    /// The whole line is its message: one update, one redraw, never a
    /// mix of an old count and a new one.
    bar: ProgressBar,
    last: String,
}

impl HandoffProgress {
    pub fn on_stderr() -> Self {
        Self::to(ProgressDrawTarget::stderr())
    }

    fn to(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(None, target)
            .with_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
        Self {
            bar,
            last: String::new(),
        }
    }

    /// Shows `progress` when it differs from what is shown.
    pub fn show(&mut self, progress: &Progress) {
        let line = format!(
            "  {}/{} moved{}",
            progress.done,
            progress.total,
            progress
                .waiting_on
                .as_ref()
                .map(|w| format!(", waiting on {w}"))
                .unwrap_or_default()
        );
        if line == self.last {
            return;
        }
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.set_message(line.clone());
        }
        self.last = line;
    }

    /// Leaves the last state on screen.
    pub fn finish(self) {
        if !self.last.is_empty() {
            self.bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A terminal that keeps what is written on it.
    #[derive(Debug, Default, Clone)]
    struct Screen(std::sync::Arc<std::sync::Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.write_str("<clear>")
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn handoff_progress_is_one_line_redrawn_on_a_terminal() {
        let screen = Screen::default();
        let mut progress =
            HandoffProgress::to(ProgressDrawTarget::term_like(Box::new(screen.clone())));
        progress.show(&Progress {
            total: 3,
            done: 1,
            waiting_on: Some("Integration shop/orders".into()),
        });
        let drawn = screen.0.lock().unwrap().clone();
        assert!(
            drawn.contains("  1/3 moved, waiting on Integration shop/orders"),
            "{drawn:?}"
        );
        progress.show(&Progress {
            total: 3,
            done: 3,
            waiting_on: None,
        });
        progress.finish();
        let drawn = screen.0.lock().unwrap().clone();
        let states: Vec<&str> = drawn.split("<clear>").map(str::trim_end).collect();
        assert_eq!(
            states,
            [
                "  1/3 moved, waiting on Integration shop/orders",
                "  3/3 moved",
                // finish() draws the last state once more, to keep it.
                "  3/3 moved",
            ],
            "{drawn:?}"
        );
    }

    #[test]
    fn handoff_progress_off_a_terminal_draws_nothing() {
        let mut progress = HandoffProgress::to(ProgressDrawTarget::hidden());
        assert!(progress.bar.is_hidden());
        let p = Progress {
            total: 2,
            done: 1,
            waiting_on: None,
        };
        progress.show(&p);
        progress.show(&p);
        assert_eq!(progress.last, "  1/2 moved");
        progress.finish();
    }
}
