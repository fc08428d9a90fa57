//! kubectl finds the plugin on PATH (`kubectl plugin list`) and runs it as
//! `kubectl camelk`.

use std::process::Command;

fn kubectl(path: &std::ffi::OsStr, home: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .args(args)
        .env("PATH", path)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl is installed")
}

/// `dir/bin` holding links named `names` to the plugin binary, and a PATH
/// that searches it first.
fn links_on_path(
    dir: &std::path::Path,
    names: &[&str],
) -> (std::path::PathBuf, std::ffi::OsString) {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in names {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubectl-camelk"), bin.join(name)).unwrap();
    }
    let system_path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(&system_path)),
    )
    .unwrap();
    (bin, path)
}

#[test]
fn kubectl_plugin_list_finds_the_binary_and_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, path) = links_on_path(dir.path(), &["kubectl-camelk"]);

    let list = kubectl(&path, dir.path(), &["plugin", "list"]);
    let stdout = String::from_utf8_lossy(&list.stdout);
    assert!(
        stdout.contains(&bin.join("kubectl-camelk").display().to_string()),
        "{stdout}\n{}",
        String::from_utf8_lossy(&list.stderr)
    );

    let version = kubectl(&path, dir.path(), &["camelk", "version", "--client"]);
    camelk_testkit::assert_success(&version, "kubectl camelk version --client");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!(
            "Client Version: kubectl-camelk {}\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn kubectl_completes_the_plugin_through_the_completer_link() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = links_on_path(dir.path(), &["kubectl-camelk", "kubectl_complete-camelk"]);
    // What the shell asks kubectl when the user types `kubectl camelk ro<TAB>`.
    // Then the values of `-o`, which differ by command.
    for (typed, completions) in [
        (&["ro"][..], "rollout\n:4\n"),
        (&["plan", "-o", ""], "table\nmarkdown\njson\nyaml\n:4\n"),
        (
            &["get", "-o", ""],
            "table\nmarkdown\njson\nyaml\nname\nwide\n:4\n",
        ),
    ] {
        let args = [&["__complete", "camelk"][..], typed].concat();
        let out = kubectl(&path, dir.path(), &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.starts_with(completions), "{stdout}");
    }
}
