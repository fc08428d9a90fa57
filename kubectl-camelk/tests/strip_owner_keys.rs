//! `strip-owner-keys` on real Git repositories, without a cluster: what it
//! commits, what it refuses, and that a refused or dry run writes nothing.
//! The verdicts read from a cluster: `strip_owner_keys_live.rs`.

mod common;

use std::path::Path;

use common::{camelk, git, words};
use predicates::prelude::*;
use tempfile::TempDir;

/// An Integration among other annotations, with comments, next to a
/// ConfigMap that is no Camel K resource.
const ORDERS: &str = "\
# Orders, deployed by Flux.
apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: orders
  namespace: shop
  annotations:
    camel.apache.org/operator.id: operator-1   # kamel run -x
    trait.camel.apache.org/container.image: \"quay.io/shop/orders:1.2\"
  labels:
    app: orders
spec:
  flows:
    - from: {uri: \"timer:tick?period={{period}}\"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: orders-config
  namespace: shop
  annotations:
    note: \"kept\"
data:
  period: \"1000\"
";

/// A Pipe whose maps hold only the keys, and no namespace (Kustomize sets it).
const FEED: &str = "\
apiVersion: camel.apache.org/v1
kind: Pipe
metadata:
  name: feed
  labels:
    camel.apache.org/operator.id: operator-1
  annotations:
    camel.apache.org/operator.id: 'operator-1'
spec:
  sink: {uri: \"log:feed\"}
";

const KUSTOMIZATION: &str = "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: shop
resources:
  - orders.yaml
  - feed.yaml
";

/// A repository on `main` holding `files`, committed.
fn apps_repo(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    git(path, &["init", "-q", "-b", "main"]);
    git(path, &["config", "user.name", "Test User"]);
    git(path, &["config", "user.email", "test@example.com"]);
    for (name, text) in files {
        let file = path.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    git(path, &["add", "."]);
    git(path, &["commit", "-q", "-m", "initial"]);
    dir
}

fn shop() -> TempDir {
    apps_repo(&[
        ("apps/orders.yaml", ORDERS),
        ("apps/feed.yaml", FEED),
        ("apps/kustomization.yaml", KUSTOMIZATION),
        ("README", "apps\n"),
    ])
}

/// Everything a run could change: HEAD, refs, status, every file's bytes.
fn snapshot(dir: &Path) -> (String, String, String, Vec<(String, Vec<u8>)>) {
    let mut files = Vec::new();
    for name in git(dir, &["ls-files"]).lines() {
        files.push((name.to_string(), std::fs::read(dir.join(name)).unwrap()));
    }
    (
        git(dir, &["rev-parse", "--symbolic-full-name", "HEAD"]),
        git(dir, &["for-each-ref"]),
        git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        files,
    )
}

/// Runs `kubectl camelk ARGS` in `dir`, which must fail (exit 1) saying each
/// of `said` on stderr, and leave the repository as it was.
fn refused(dir: &Path, args: &[&str], said: &[&str]) {
    let before = snapshot(dir);
    let mut assert = camelk(dir).args(args).assert().code(1);
    for expected in said {
        assert = assert.stderr(predicate::str::contains(*expected));
    }
    assert_eq!(snapshot(dir), before);
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_keys_leave_in_one_commit_on_a_new_branch_and_nothing_else_changes() {
    let repo = shop();
    let dir = repo.path();
    let main = git(dir, &["rev-parse", "--short=7", "main"]);
    let output = camelk(dir)
        .args(["strip-owner-keys", "apps", "-n", "shop", "--no-cluster"])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "on branch camelk/strip-owner-keys-{}: Strip the owner keys of 2 Camel K resources",
            main.trim()
        )))
        .get_output()
        .clone();
    insta::assert_snapshot!(stdout(&output));

    assert_eq!(
        git(dir, &["branch", "--show-current"]),
        format!("camelk/strip-owner-keys-{main}")
    );
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert_eq!(
        git(dir, &["diff", "--name-only", "main", "HEAD"]),
        "apps/feed.yaml\napps/orders.yaml\n"
    );
    // Only the key lines changed: a label goes (with the map it leaves
    // empty), an annotation becomes the marker on its own line.
    let changed: Vec<String> = git(dir, &["diff", "-U0", "main", "HEAD"])
        .lines()
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
        })
        .map(str::to_string)
        .collect();
    assert_eq!(
        changed,
        [
            "-  labels:",
            "-    camel.apache.org/operator.id: operator-1",
            "-    camel.apache.org/operator.id: 'operator-1'",
            "+    camelk.dev/owner-keys: reconciler",
            "-    camel.apache.org/operator.id: operator-1   # kamel run -x",
            "+    camelk.dev/owner-keys: reconciler   # kamel run -x",
        ]
    );
    assert_eq!(
        git(dir, &["log", "-1", "--format=%B"]),
        "\
Strip the owner keys of 2 Camel K resources

The owners in the cluster were not checked (--no-cluster).

- Pipe shop/feed (apps/feed.yaml:1): label=operator-1 annotation=operator-1; not checked
- Integration shop/orders (apps/orders.yaml:2): annotation=operator-1; not checked

Written by `kubectl camelk strip-owner-keys`.

"
    );
    assert_eq!(
        git(dir, &["rev-parse", "HEAD~1"]),
        git(dir, &["rev-parse", "main"])
    );

    // Once stripped, a second run finds nothing (and writes nothing): the
    // marker is not added again.
    let before = snapshot(dir);
    camelk(dir)
        .args(["strip-owner-keys", "apps", "--no-cluster"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "no owner keys in the Camel K manifests of 3 files (apps); nothing to change",
        ));
    assert_eq!(snapshot(dir), before);
}

#[test]
fn a_label_with_no_annotations_to_mark_is_refused_until_the_marker_is_added_by_hand() {
    // A Kamelet whose metadata holds the label and no annotations.
    let metadata = "apiVersion: camel.apache.org/v1\nkind: Kamelet\nmetadata:\n  name: tick\n";
    let label = "  labels:\n    camel.apache.org/operator.id: operator-1\n";
    let marker = "  annotations:\n    camelk.dev/owner-keys: reconciler\n";
    let tick = format!("{metadata}{label}");
    let repo = apps_repo(&[("apps/tick.yaml", tick.as_str())]);
    let dir = repo.path();
    refused(
        dir,
        &["strip-owner-keys", "apps", "--no-cluster"],
        &[
            "apps/tick.yaml:6:5: error: camel.apache.org/operator.id is only a label of this \
             resource, and it has no `metadata.annotations` to put the marker in: add the \
             annotation by hand (`annotations:` with `camelk.dev/owner-keys: reconciler`), then \
             run again",
            "error: 1 file could not be edited; nothing written",
        ],
    );

    // Added by hand: the label goes, the marker stays as it is.
    std::fs::write(dir.join("apps/tick.yaml"), format!("{tick}{marker}")).unwrap();
    git(dir, &["commit", "-q", "-am", "marker"]);
    camelk(dir)
        .args(words("strip-owner-keys apps --no-cluster --branch strip"))
        .assert()
        .success()
        .stdout(predicate::str::contains("1 key removed from 1 file;"));
    assert_eq!(
        std::fs::read_to_string(dir.join("apps/tick.yaml")).unwrap(),
        format!("{metadata}{marker}")
    );
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let repo = shop();
    let dir = repo.path();
    let before = snapshot(dir);
    camelk(dir)
        .args(words(
            "strip-owner-keys apps/feed.yaml --dry-run --no-cluster",
        ))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "-    camel.apache.org/operator.id: 'operator-1'",
        ))
        .stdout(predicate::str::contains(
            "\n2 keys removed from 1 file; owners not checked (--no-cluster)\n",
        ))
        .stdout(predicate::str::contains("orders").not())
        .stderr(predicate::str::contains("dry run: nothing written"));
    assert_eq!(snapshot(dir), before);

    // And as JSON.
    let output = camelk(dir)
        .args(words(
            "strip-owner-keys . --dry-run --no-cluster -n shop -o json",
        ))
        .output()
        .unwrap();
    assert!(output.status.success());
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["keysRemoved"], 3);
    assert_eq!(report["filesChanged"], 2);
    assert_eq!(report["changeOwner"], serde_json::Value::Null);
    let feed = &report["resources"][0];
    assert_eq!(
        (
            &feed["file"],
            &feed["kind"],
            &feed["namespace"],
            &feed["liveNamespace"],
            &feed["label"],
            &feed["verdict"]
        ),
        (
            &"apps/feed.yaml".into(),
            &"Pipe".into(),
            &serde_json::Value::Null,
            &"shop".into(),
            &"operator-1".into(),
            &"notChecked".into()
        )
    );
    assert_eq!(snapshot(dir), before);
}

#[test]
fn a_dirty_work_tree_is_refused_and_the_edited_files_always_are() {
    let repo = shop();
    let dir = repo.path();
    std::fs::write(dir.join("notes.txt"), "todo\n").unwrap();
    refused(
        dir,
        &["strip-owner-keys", "apps", "--no-cluster"],
        &[
            "the work tree has uncommitted changes (notes.txt); commit or stash them, or pass --allow-dirty",
        ],
    );

    // An edited file's own uncommitted lines: --allow-dirty does not cover them.
    let mut orders = std::fs::read_to_string(dir.join("apps/orders.yaml")).unwrap();
    orders.push_str("# draft\n");
    std::fs::write(dir.join("apps/orders.yaml"), &orders).unwrap();
    refused(
        dir,
        &["strip-owner-keys", "apps", "--no-cluster", "--allow-dirty"],
        &["apps/orders.yaml has uncommitted changes, which this commit would include"],
    );

    // Other files only: --allow-dirty commits without them.
    git(dir, &["checkout", "-q", "--", "apps/orders.yaml"]);
    camelk(dir)
        .args(["strip-owner-keys", "apps", "--no-cluster", "--allow-dirty"])
        .assert()
        .success();
    assert_eq!(
        git(dir, &["status", "--porcelain"]),
        "?? notes.txt\n",
        "the dirty file stays as it was, uncommitted"
    );
    assert_eq!(
        git(dir, &["diff", "--name-only", "main", "HEAD"]),
        "apps/feed.yaml\napps/orders.yaml\n"
    );
}

#[test]
fn without_a_readable_cluster_nothing_is_written_unless_no_cluster() {
    let repo = shop();
    let dir = repo.path();
    // No kubeconfig at all.
    refused(
        dir,
        &["strip-owner-keys", "apps", "-n", "shop"],
        &[
            "error: cannot read the owners in the cluster; nothing written",
            "--no-cluster removes the keys without checking",
        ],
    );

    // A kubeconfig whose server does not answer.
    let kubeconfig = dir.join("unreachable.kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"http://127.0.0.1:9\"}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: shop}\n\
         current-context: x\n",
    )
    .unwrap();
    git(dir, &["add", "unreachable.kubeconfig"]);
    git(dir, &["commit", "-q", "-m", "kubeconfig"]);
    refused(
        dir,
        &[
            "strip-owner-keys",
            "apps",
            "--request-timeout",
            "5s",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &["error: cannot read the owners in the cluster; nothing written"],
    );

    // --force covers owners that would be lost, not owners left unread.
    camelk(dir)
        .args(["strip-owner-keys", "apps", "--no-cluster", "--force"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
    camelk(dir)
        .args(["strip-owner-keys", "apps", "--no-cluster"])
        .assert()
        .success();
}

#[test]
fn a_file_that_is_not_yaml_is_named_at_its_line_and_column_and_nothing_is_written() {
    let repo = apps_repo(&[
        ("apps/feed.yaml", FEED),
        (
            "apps/broken.yaml",
            "apiVersion: camel.apache.org/v1\nkind: Integration\nmetadata:\n  name: [broken\n  \
             annotations:\n    camel.apache.org/operator.id: operator-1\n",
        ),
        // A Helm chart: its templates are skipped, with a note.
        (
            "charts/shop/Chart.yaml",
            "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
        ),
        (
            "charts/shop/templates/it.yaml",
            "{{- if .Values.enabled }}\napiVersion: camel.apache.org/v1\nkind: Integration\n\
             metadata:\n  annotations:\n    camel.apache.org/operator.id: {{ .Values.id }}\n{{- end }}\n",
        ),
        // Ignored by Git: no tool deploys it.
        (".gitignore", "build/\n"),
    ]);
    let dir = repo.path();
    std::fs::create_dir_all(dir.join("build")).unwrap();
    std::fs::write(dir.join("build/out.yaml"), FEED).unwrap();
    refused(
        dir,
        &["strip-owner-keys", ".", "--no-cluster"],
        &[
            "apps/broken.yaml:5:14: error: YAML syntax error: ",
            "note: charts/shop/templates: the templates of a Helm chart are not plain YAML: skipped",
            "error: 1 file could not be edited; nothing written",
        ],
    );

    // Without the broken file: the rest goes, the chart and build/ untouched.
    std::fs::remove_file(dir.join("apps/broken.yaml")).unwrap();
    git(dir, &["commit", "-q", "-am", "drop broken"]);
    camelk(dir)
        .args(["strip-owner-keys", ".", "--no-cluster", "--branch", "strip"])
        .assert()
        .success()
        .stdout(predicate::str::contains("2 keys removed from 1 file;"));
    assert_eq!(
        git(dir, &["diff", "--name-only", "HEAD~1", "HEAD"]),
        "apps/feed.yaml\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("build/out.yaml")).unwrap(),
        FEED
    );
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_leading_outside_the_repository_is_refused() {
    let repo = shop();
    let dir = repo.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.yaml"), FEED).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        dir.join("apps/link.yaml"),
    )
    .unwrap();
    git(dir, &["add", "apps/link.yaml"]);
    git(dir, &["commit", "-q", "-m", "link"]);
    let before = snapshot(dir);
    for args in [&["apps"][..], &["apps/link.yaml"]] {
        camelk(dir)
            .arg("strip-owner-keys")
            .args(args)
            .arg("--no-cluster")
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "apps/link.yaml is a symbolic link to ",
            ))
            .stderr(predicate::str::contains("outside the repository at "));
        assert_eq!(snapshot(dir), before);
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.yaml")).unwrap(),
        FEED
    );
}

#[test]
fn the_help_documents_the_verdicts() {
    let repo = shop();
    camelk(repo.path())
        .args(["strip-owner-keys", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "FILE:LINE  KIND  NAMESPACE  NAME  REMOVED  OWNER  APPLIED BY  CO-OWNED  VERDICT",
        ))
        .stdout(predicate::str::contains("stays with OPERATOR"))
        .stdout(predicate::str::contains("would lose its owner: REASON"))
        .stdout(predicate::str::contains(
            "N keys removed from M files; K resources change owner",
        ));
}
