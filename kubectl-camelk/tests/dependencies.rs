//! The plugin links the library without its server: no HTTP server, metrics
//! or webhook-signature crates in the plugin's own dependency tree.

use std::process::Command;

#[test]
fn the_plugin_does_not_link_the_reconciler_server() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            "kubectl-camelk",
            "-e",
            "normal",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.contains("camelk-reconciler"), "{tree}");
    for server_crate in ["axum ", "hmac ", "prometheus-client "] {
        assert!(
            !tree.lines().any(|l| l.starts_with(server_crate)),
            "kubectl-camelk depends on {server_crate}:\n{tree}"
        );
    }
}
