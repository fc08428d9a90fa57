//! Bad input beyond the malformed corpus, through the plugin binary: inputs
//! too big or too deep to commit as files (generated here), manifests that
//! are symbolic links, invalid branch names and operator ids on the command
//! line, inventories of the wrong kind, and a kubeconfig whose exec plugin
//! hangs. Each is refused with a clear message and exit 1 (`diff`: 2), in
//! bounded time, and nothing is written: the repository is compared before
//! and after ([`state`]).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use camelk_reconciler::api::MAX_MANIFEST_BYTES;
use common::{ASSIGN_ORDERS, MANIFEST, SHOP, camelk, repo_with, state};

/// Runs the plugin in `repo` and returns (exit code, stderr, seconds taken).
fn run(repo: &Path, args: &[&str]) -> (Option<i32>, String, f64) {
    let started = Instant::now();
    let output = camelk(repo)
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        started.elapsed().as_secs_f64(),
    )
}

/// `validate`, `assign` and `diff` on `manifest` (committed as the repository's
/// manifest): each refuses with `message` (exit 1, `diff` 2), within
/// `seconds`, and the repository is unchanged.
fn refused_everywhere(manifest: &[u8], message: &str, seconds: f64) {
    let repo = common::repo_with_bytes(manifest);
    let before = state(repo.path());
    let inventory = common::fixture("inventory.json");
    for (args, code) in [
        (vec!["validate"], 1),
        (ASSIGN_ORDERS.to_vec(), 1),
        (vec!["diff", "--inventory", inventory.to_str().unwrap()], 2),
    ] {
        let (status, stderr, took) = run(repo.path(), &args);
        assert_eq!(status, Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(took < seconds, "{args:?} took {took:.1}s");
        assert_eq!(state(repo.path()), before, "{args:?} wrote something");
    }
}

/// The shop manifest with `pins` replaced by `pins` (YAML lines under `spec:`).
fn shop_with_pins(pins: &str) -> String {
    let head = SHOP.split("  pins:").next().unwrap();
    format!("{head}{pins}  rollout:\n    steps: [\"50%\"]\n")
}

#[test]
fn a_50_mb_manifest_is_refused_by_its_size_before_it_is_read() {
    // Valid YAML all the way (a comment that goes on), so only the size refuses it.
    let mut text = SHOP.as_bytes().to_vec();
    let line = format!("# {}\n", "x".repeat(98));
    while text.len() < 50 * 1024 * 1024 {
        text.extend_from_slice(line.as_bytes());
    }
    let message = format!(
        "{MANIFEST}:1:1: error: the manifest is {} bytes, over the limit of {MAX_MANIFEST_BYTES} bytes",
        text.len()
    );
    // Reading and parsing 50 MB takes longer than this in a debug build.
    refused_everywhere(&text, &message, 5.0);
}

#[test]
fn a_manifest_of_100_000_pins_is_refused_by_its_size() {
    let pins: String = (0..100_000)
        .map(|i| {
            format!(
                "    - {{kind: Integration, namespace: shop, name: o{i}, operator: operator-2}}\n"
            )
        })
        .collect();
    let text = shop_with_pins(&format!("  pins:\n{pins}"));
    assert!(text.len() > MAX_MANIFEST_BYTES);
    refused_everywhere(
        text.as_bytes(),
        &format!(
            "{MANIFEST}:1:1: error: the manifest is {} bytes",
            text.len()
        ),
        5.0,
    );
}

#[test]
fn a_manifest_of_100_000_aliased_pins_is_refused_by_the_alias_limit() {
    // Under a megabyte: each `- *p` repeats the anchored pin.
    let text = shop_with_pins(&format!(
        "  pins:\n    - &p {{kind: Integration, namespace: shop, name: o, operator: operator-2}}\n{}",
        "    - *p\n".repeat(100_000)
    ));
    assert!(text.len() < MAX_MANIFEST_BYTES);
    // The pin is 9 nodes (a mapping, four keys, four values): the alias that
    // crosses 10,000 is the 1,112th, on line 19 + 1,112.
    refused_everywhere(
        text.as_bytes(),
        &format!(
            "{MANIFEST}:{}:7: error: YAML syntax error: aliases repeat more than 10000 nodes",
            19 + 10_000 / 9 + 1
        ),
        5.0,
    );
}

#[test]
fn a_billion_laughs_of_nine_lines_is_refused_at_once() {
    let mut text = SHOP.replace("spec:\n", "spec:\n  x0: &a0 [lol]\n");
    let laughs: String = (1..10)
        .map(|i| {
            let aliases = vec![format!("*a{}", i - 1); 10].join(", ");
            format!("  x{i}: &a{i} [{aliases}]\n")
        })
        .collect();
    text = text.replace("  x0: &a0 [lol]\n", &format!("  x0: &a0 [lol]\n{laughs}"));
    refused_everywhere(
        text.as_bytes(),
        "error: YAML syntax error: aliases repeat more than 10000 nodes",
        5.0,
    );
}

#[test]
fn ten_thousand_levels_of_nesting_are_refused_without_a_stack_overflow() {
    // Block style: 10,000 nested sequences on one line (`- - - ... x`), and
    // 1,000 mappings each one line deeper (10,000 would be 100 MB of indentation).
    let dashes = SHOP.replace(
        "metadata:\n  name: shop\n",
        &format!(
            "metadata:\n  name: shop\n  labels:\n    {}x\n",
            "- ".repeat(10_000)
        ),
    );
    let levels: String = (0..1_000)
        .map(|i| format!("{}a:\n", "  ".repeat(i + 2)))
        .collect();
    let block = SHOP.replace(
        "metadata:\n  name: shop\n",
        &format!("metadata:\n  name: shop\n  labels:\n{levels}"),
    );
    // Flow style: 10,000 brackets on one line.
    let flow = SHOP.replace(
        "metadata:\n  name: shop\n",
        &format!(
            "metadata:\n  name: shop\n  labels: {}{}\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
    );
    for text in [dashes, block, flow] {
        refused_everywhere(
            text.as_bytes(),
            "error: YAML syntax error: nested more than 32 levels deep",
            5.0,
        );
    }
}

#[test]
fn non_utf8_bytes_are_named_at_their_line_and_column() {
    // A Latin-1 é in a comment on line 3 (after `# The shop's operators.`).
    let mut text = SHOP.as_bytes().to_vec();
    let at = SHOP.find("kind:").unwrap();
    text.splice(at..at, b"# caf\xe9\n".iter().copied());
    refused_everywhere(
        &text,
        &format!("{MANIFEST}:3:6: error: the file is not UTF-8 (byte 0xe9 here)"),
        5.0,
    );
}

/// A repository whose manifest is a symbolic link to `target`.
fn repo_with_link(target: &Path) -> tempfile::TempDir {
    let repo = repo_with(SHOP);
    std::fs::remove_file(repo.path().join(MANIFEST)).unwrap();
    std::os::unix::fs::symlink(target, repo.path().join(MANIFEST)).unwrap();
    common::git(repo.path(), &["add", "-A"]);
    common::git(repo.path(), &["commit", "-q", "-m", "link"]);
    repo
}

#[test]
fn a_manifest_linked_outside_the_repository_is_refused_and_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("elsewhere.yaml");
    std::fs::write(&target, SHOP).unwrap();
    let target = target.canonicalize().unwrap();
    let repo = repo_with_link(&target);
    let before = state(repo.path());
    let inventory = common::fixture("inventory.json");
    for (args, code) in [
        (vec!["validate"], 1),
        (ASSIGN_ORDERS.to_vec(), 1),
        ([&ASSIGN_ORDERS[..], &["--allow-dirty"]].concat(), 1),
        (vec!["plan", "--inventory", inventory.to_str().unwrap()], 1),
        (vec!["diff", "--inventory", inventory.to_str().unwrap()], 2),
    ] {
        let (status, stderr, _) = run(repo.path(), &args);
        assert_eq!(status, Some(code), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "operator-assignment.yaml is a symbolic link to {}, outside the repository",
                target.display()
            )),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            state(repo.path()),
            before,
            "{args:?} changed the repository"
        );
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            SHOP,
            "{args:?} wrote through the link"
        );
    }
}

#[test]
fn an_edit_refuses_to_write_through_a_link_inside_the_repository() {
    let repo = repo_with(SHOP);
    std::fs::create_dir(repo.path().join("clusters")).unwrap();
    std::fs::rename(
        repo.path().join(MANIFEST),
        repo.path().join("clusters/shop.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink("clusters/shop.yaml", repo.path().join(MANIFEST)).unwrap();
    common::git(repo.path(), &["add", "-A"]);
    common::git(repo.path(), &["commit", "-q", "-m", "link"]);
    // Reading through a link that stays inside is fine.
    let (status, stderr, _) = run(repo.path(), &["validate"]);
    assert_eq!(status, Some(0), "{stderr}");
    let before = state(repo.path());
    let (status, stderr, _) = run(repo.path(), &ASSIGN_ORDERS);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "operator-assignment.yaml is a symbolic link to clusters/shop.yaml; an edit would write through it"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("--file clusters/shop.yaml"), "{stderr}");
    assert_eq!(state(repo.path()), before);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("clusters/shop.yaml")).unwrap(),
        SHOP
    );
}

#[test]
fn a_branch_that_is_not_a_valid_ref_is_refused_before_any_write() {
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    for branch in ["a..b", "-x", "x.lock", "a b", "a@{1}", "refs/heads/../x"] {
        let flag = format!("--branch={branch}");
        let (status, stderr, _) = run(repo.path(), &[&ASSIGN_ORDERS[..], &[&flag]].concat());
        assert_eq!(status, Some(1), "{branch}: {stderr}");
        assert!(
            stderr.contains(&format!("`{branch}` is not a valid branch name")),
            "{branch}: {stderr}"
        );
        assert_eq!(state(repo.path()), before, "{branch}: wrote something");
    }
}

#[test]
fn an_operator_id_over_63_characters_is_refused_on_the_command_line() {
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    let long = "o".repeat(64);
    for args in [
        vec!["assign", "integration/orders", "-n", "shop", "--to", &long],
        vec![
            "rollout",
            "--from",
            "operator-1",
            "--to",
            &long,
            "--steps",
            "50%",
        ],
        vec![
            "init",
            "--operator",
            &format!("{long}=camel-k"),
            "-f",
            "new.yaml",
        ],
    ] {
        let (status, stderr, _) = run(repo.path(), &args);
        assert_eq!(status, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "operator id `{long}` is longer than 63 characters, the limit of a label value"
            )),
            "{args:?}: {stderr}"
        );
        assert_eq!(state(repo.path()), before, "{args:?}: wrote something");
    }
    // 63 is the limit, not 62: the same edit with 63 characters is taken
    // up to the manifest's own check (the operator is not declared).
    let (_, stderr, _) = run(
        repo.path(),
        &[
            "assign",
            "integration/orders",
            "-n",
            "shop",
            "--to",
            &"o".repeat(63),
            "--dry-run",
        ],
    );
    assert!(!stderr.contains("longer than 63"), "{stderr}");
}

#[test]
fn an_inventory_of_the_wrong_kind_is_refused_naming_the_file_and_the_kind_expected() {
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    let cases = [
        (
            "configmaps.json",
            r#"{"apiVersion":"v1","kind":"ConfigMapList","items":[]}"#,
            "is a ConfigMapList, not a List of Camel K resources",
        ),
        (
            "deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 1\n",
            "is a Deployment, not a List of Camel K resources",
        ),
        (
            "array.json",
            r#"[{"kind":"Integration","metadata":{"name":"a","namespace":"shop"}}]"#,
            "expected a Kubernetes List (a mapping with `kind: List` and `items`)",
        ),
        (
            "string.json",
            r#""integrations""#,
            "expected a Kubernetes List (a mapping with `kind: List` and `items`)",
        ),
        (
            "no-items.yaml",
            "apiVersion: v1\nkind: List\nmetadata: {}\n",
            "is List with no `items`, not a List of Camel K resources",
        ),
    ];
    for (file, text, message) in cases {
        let path = repo.path().join("..").join(format!(
            "{}-{file}",
            repo.path().file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap();
        for (args, code) in [
            (vec!["plan", "--inventory", path], 1),
            (vec!["diff", "--inventory", path], 2),
            ([&ASSIGN_ORDERS[..], &["--inventory", path]].concat(), 1),
        ] {
            let (status, stderr, _) = run(repo.path(), &args);
            assert_eq!(status, Some(code), "{file} {args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("inventory {path}")) && stderr.contains(message),
                "{file} {args:?}: {stderr}"
            );
            assert_eq!(
                state(repo.path()),
                before,
                "{file} {args:?}: wrote something"
            );
        }
        std::fs::remove_file(path).unwrap();
    }
}

/// A kubeconfig whose user's credential comes from `script` (an exec plugin).
fn kubeconfig_with_exec(dir: &Path, script: &Path) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n    namespace: shop\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
            script.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn an_exec_credential_plugin_that_hangs_is_stopped_after_the_request_timeout() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = dir.path().join("hanging-login");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 600\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kubeconfig = kubeconfig_with_exec(dir.path(), &script);
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    for args in [&["get"][..], &["plan"][..]] {
        let _ = std::fs::remove_file(&pid_file);
        let mut all = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--request-timeout",
            "2s",
        ];
        all.extend_from_slice(args);
        let (status, stderr, took) = run(repo.path(), &all);
        let pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
        // Running, not a zombie that no init reaped yet. No pid: on a loaded
        // machine the plugin can be stopped before its shell wrote one (and
        // `/proc//stat` would read the system's own stat file).
        let running = || {
            !pid.trim().is_empty()
                && std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                    .is_ok_and(|stat| !stat.rsplit(") ").next().unwrap_or("").starts_with('Z'))
        };
        // SIGKILL is sent before the command exits, but a loaded machine may
        // take a moment to schedule the plugin's death.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while running() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let alive = running();
        if alive {
            // Never leave it behind, even when the assertions below fail.
            let _ = std::process::Command::new("kill")
                .args(["-9", pid.trim()])
                .status();
        }
        assert_eq!(status, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the kubeconfig's exec credential plugin `{}` did not answer within 2s and was stopped",
                script.display()
            )),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--request-timeout"), "{args:?}: {stderr}");
        assert!((2.0..20.0).contains(&took), "{args:?} took {took:.1}s");
        assert!(!alive, "{args:?}: the plugin (pid {pid}) was left running");
        assert_eq!(state(repo.path()), before);
    }
}

#[test]
fn an_exec_credential_plugin_that_answers_is_used() {
    use std::os::unix::fs::PermissionsExt;
    // The same kubeconfig, with a plugin that prints a token at once: the
    // command goes on to connect (and fails there: nothing listens on port 9),
    // so the timeout above is the plugin's, not the connection's.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("quick-login");
    std::fs::write(
        &script,
        "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kubeconfig = kubeconfig_with_exec(dir.path(), &script);
    let (status, stderr, _) = run(
        dir.path(),
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--request-timeout",
            "2s",
            "get",
        ],
    );
    assert_eq!(status, Some(1), "{stderr}");
    assert!(!stderr.contains("exec credential plugin"), "{stderr}");
}
