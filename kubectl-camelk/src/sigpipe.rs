//! What a closed pipe does to the plugin. Rust starts programs with SIGPIPE
//! ignored; the plugin wants kubectl's behaviour on its own output, and the
//! opposite while Git talks to a credential helper.
//!
//! A bottom layer: it imports nothing of the crate.

/// `kubectl camelk plan | head` should end quietly, as kubectl does, not
/// panic in `println!`: Rust ignores SIGPIPE, so restore the default action.
#[allow(unsafe_code)]
pub fn die_quietly_on_closed_pipe() {
    // SAFETY: called first in `main`, before any other thread exists; SIG_DFL
    // is a valid action for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Runs `f` with SIGPIPE ignored. Git writes the request to the user's
/// credential helper on a pipe, and a helper that answers without reading it
/// (`!f() { echo password=...; }; f`) would otherwise kill the plugin, whose
/// default action [`die_quietly_on_closed_pipe`] restored for stdout;
/// ignored, the write fails with EPIPE, which libgit2 disregards.
#[allow(unsafe_code)]
pub fn with_sigpipe_ignored<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: SIG_IGN and SIG_DFL are valid actions for SIGPIPE; the plugin
    // prints nothing on another thread while Git runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let out = f();
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    out
}
