//! The `$KUBECONFIG` merge (`connect::merged`): up to four files, the input's
//! parts between NUL bytes (an empty part names a file that does not exist),
//! written to a scratch directory and merged as kubectl does.
//!
//! Checks: no panic; missing files are skipped; a file that kube cannot read
//! alone fails the merge; otherwise the first file to set a value wins: each
//! named cluster, user and context of the result is the first one of that
//! name in list order, every name of every file is in it, and the current
//! context is the first file's that sets one.
#![no_main]

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use camelk_reconciler::connect::{ConnectError, merged};
use kube::config::Kubeconfig;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("camelk-fuzz-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

/// One file as kube reads it, but refusing (as `connect` does) a UTF-16 file
/// of an odd length, on which kube-client 5.0 panics.
fn read_alone(path: &std::path::Path) -> Result<Kubeconfig, ()> {
    let bytes = std::fs::read(path).map_err(|_| ())?;
    if matches!(bytes.as_slice(), [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..])
        && !bytes.len().is_multiple_of(2)
    {
        return Err(());
    }
    Kubeconfig::read_from(path).map_err(|_| ())
}

/// `(name, entry)` of each named item, in order, as JSON to compare.
fn named<T: serde::Serialize>(items: &[T]) -> Vec<(String, Value)> {
    items
        .iter()
        .map(|item| {
            let v = serde_json::to_value(item).expect("serializable");
            (v["name"].as_str().unwrap_or_default().to_string(), v)
        })
        .collect()
}

fn sections(k: &Kubeconfig) -> [Vec<(String, Value)>; 3] {
    [named(&k.clusters), named(&k.auth_infos), named(&k.contexts)]
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    let mut paths = Vec::new();
    for (i, part) in data.split(|&b| b == 0).take(4).enumerate() {
        let path = dir.join(format!("config-{i}"));
        if part.is_empty() {
            let _ = std::fs::remove_file(&path);
        } else {
            std::fs::write(&path, part).expect("writable scratch directory");
        }
        paths.push(path);
    }
    let list: OsString = std::env::join_paths(&paths).expect("paths without separators");
    let result = merged(&list);

    let present: Vec<&PathBuf> = paths.iter().filter(|p| p.exists()).collect();
    let alone: Vec<Result<Kubeconfig, ()>> = present.iter().map(|p| read_alone(p)).collect();
    match result {
        Err(ConnectError::EmptyList) => assert!(present.is_empty()),
        Err(ConnectError::Read { .. }) => {
            assert!(
                alone.iter().any(Result::is_err),
                "a merge failed reading a file kube reads"
            )
        }
        // Files are read and merged in order: a later file may not be read.
        Err(ConnectError::Merge(_)) => assert!(alone.len() >= 2 && alone[0].is_ok()),
        Err(other) => panic!("unexpected {other}"),
        Ok(config) => {
            let files: Vec<Kubeconfig> = alone
                .into_iter()
                .map(|r| r.expect("a merged file reads alone"))
                .collect();
            assert!(!files.is_empty());
            let got = sections(&config);
            for (section, got) in got.iter().enumerate() {
                let all: Vec<(String, Value)> = files
                    .iter()
                    .flat_map(|f| sections(f)[section].clone())
                    .collect();
                for (name, _) in &all {
                    let first = all.iter().find(|(n, _)| n == name).map(|(_, v)| v);
                    let merged = got.iter().find(|(n, _)| n == name).map(|(_, v)| v);
                    assert_eq!(
                        merged, first,
                        "section {section}: `{name}` is not first-wins"
                    );
                }
                assert!(got.iter().all(|(n, _)| all.iter().any(|(m, _)| m == n)));
            }
            let current = files.iter().find_map(|f| f.current_context.clone());
            assert_eq!(config.current_context, current);
        }
    }
});
