//! The corpus of malformed manifests (`tests/malformed/*.yaml`): each is
//! rejected with its expected `file:line:column` message
//! (`tests/malformed/expected.txt`), and no command writes anything.
//! Files are read as bytes: some are not UTF-8 on purpose.

mod common;

use common::{MANIFEST, camelk, repo_with_bytes as repo_with, state};

fn corpus() -> Vec<(String, Vec<u8>, String)> {
    let expected = std::fs::read_to_string(common::fixture("malformed/expected.txt")).unwrap();
    let mut cases = Vec::new();
    for line in expected.lines() {
        let (file, message) = line.split_once(' ').unwrap();
        let text = std::fs::read(common::fixture(&format!("malformed/{file}"))).unwrap();
        cases.push((file.to_string(), text, format!("{MANIFEST}:{message}")));
    }
    cases
}

#[test]
fn the_corpus_has_at_least_thirty_cases_and_covers_every_file() {
    let cases = corpus();
    assert!(cases.len() >= 30, "{}", cases.len());
    let files = std::fs::read_dir(common::fixture("malformed"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        });
    assert_eq!(
        files.count(),
        cases.len(),
        "every corpus file needs an expected message"
    );
}

#[test]
fn validate_names_the_place_and_the_problem() {
    for (file, text, expected) in corpus() {
        let repo = repo_with(&text);
        let output = camelk(repo.path()).arg("validate").output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{file}: {stderr}");
        assert_eq!(stderr.lines().next(), Some(expected.as_str()), "{file}");
    }
}

#[test]
fn no_command_writes_anything_on_a_malformed_manifest() {
    for (file, text, expected) in corpus() {
        let repo = repo_with(&text);
        let before = state(repo.path());
        for command in [
            "assign integration/x --to operator-1 -n shop",
            "unassign integration/orders -n shop",
            "rollout --from operator-1 --to operator-2 --steps 50%",
            "assign integration/x --to operator-1 -n shop --allow-dirty --push",
        ] {
            let args = common::words(command);
            let output = camelk(repo.path()).args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{file} {args:?}: {stderr}");
            assert!(stderr.contains(&expected), "{file} {args:?}: {stderr}");
            assert_eq!(
                state(repo.path()),
                before,
                "{file} {args:?} changed the repository"
            );
        }
        let output = camelk(repo.path())
            .args([
                "diff",
                "--inventory",
                common::fixture("inventory.json").to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{file}: diff must exit 2 on error"
        );
    }
}
