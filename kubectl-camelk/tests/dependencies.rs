//! The plugin links the library without its server and without the reference
//! operator: no HTTP server, metrics or webhook-signature crates in the
//! plugin's own dependency tree, and no test double compiled into it.

use std::process::Command;

/// `cargo tree` of the plugin's normal dependencies (dev-dependencies, which
/// the tests need, left out), one node a line, with `edges` (`normal`, or
/// `normal,features` to list the enabled features as nodes too).
fn plugin_tree(edges: &str) -> String {
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
            edges,
        ])
        .args(["--prefix", "none"])
        .output()
        .expect("run cargo tree");
    camelk_testkit::assert_success(&out, "cargo tree");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_plugin_does_not_link_the_reconciler_server() {
    let tree = plugin_tree("normal");
    assert!(tree.contains("camelk-reconciler"), "{tree}");
    for server_crate in ["axum ", "hmac ", "prometheus-client "] {
        assert!(
            !tree.lines().any(|l| l.starts_with(server_crate)),
            "kubectl-camelk depends on {server_crate}:\n{tree}"
        );
    }
}

#[test]
fn the_plugin_does_not_link_the_reference_operator() {
    let tree = plugin_tree("normal,features");
    // The tree lists features as nodes, so it can show their absence: it must
    // hold some of the library's node (the crate itself) and some features.
    assert!(
        tree.lines().any(|l| l.starts_with("camelk-reconciler v")),
        "{tree}"
    );
    assert!(
        tree.lines().any(|l| l.starts_with("kube feature ")),
        "cargo tree listed no features:\n{tree}"
    );
    for feature in ["reference-operator", "server"] {
        let node = format!("camelk-reconciler feature \"{feature}\"");
        assert!(
            !tree.lines().any(|l| l.starts_with(&node)),
            "kubectl-camelk enables {node}:\n{tree}"
        );
    }
}
