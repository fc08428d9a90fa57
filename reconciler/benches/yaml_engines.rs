//! One YAML engine or two (issue 29, item 3): pin edits of the P7 case, a
//! manifest with 10,000 pins and 50 rules, through each engine side by side
//! in one run.
//!
//! Run: `cargo bench --locked -p camelk-reconciler --bench yaml_engines`
//! (sizes: `BENCH_YAML_PINS`, `BENCH_YAML_RULES`; samples: `BENCH_YAML_RUNS`).
//!
//! - "splice": [`edit::assign`] / [`edit::unassign`] as the plugin calls
//!   them, which splice the pin list at the byte ranges of the positioned
//!   parse and re-parse only the changed lines (`manifest/splice.rs`);
//! - "yaml-edit": [`edit::assign_general`] / [`edit::unassign_general`],
//!   `yaml-edit` alone: its lossless parse of the whole file, the edit, its
//!   print, and a full parse and validation of the result.
//!
//! Each edit is timed for both engines in the same iteration (their order
//! alternating), after checking that both write the same bytes. The machine
//! is shared, so the load average is printed before and after.

use std::str::FromStr;
use std::time::Instant;

use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::inventory::ResourceRef;
use camelk_reconciler::manifest::edit::{self, EditPath, Edited};
use camelk_reconciler::manifest::{Manifest, Tree};

#[path = "common/mod.rs"]
mod common;
#[path = "common/p7_manifest.rs"]
mod p7_manifest;

use common::{env_usize, stats};

/// An edit of the P7 manifest, through one engine.
type Engine = fn(&Manifest, &[ResourceRef], &OperatorId) -> Edited;

fn splice_assign(m: &Manifest, r: &[ResourceRef], to: &OperatorId) -> Edited {
    edit::assign(m, r, to).expect("assign")
}

fn general_assign(m: &Manifest, r: &[ResourceRef], to: &OperatorId) -> Edited {
    edit::assign_general(m, r, to).expect("assign")
}

fn splice_unassign(m: &Manifest, r: &[ResourceRef], _: &OperatorId) -> Edited {
    edit::unassign(m, r).expect("unassign")
}

fn general_unassign(m: &Manifest, r: &[ResourceRef], _: &OperatorId) -> Edited {
    edit::unassign_general(m, r).expect("unassign")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn ms(samples: &[f64]) -> String {
    let (median, min, max) = stats(samples);
    format!("{median:.1} ms ({min:.1} to {max:.1})")
}

fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let start = Instant::now();
    let out = std::hint::black_box(f());
    (start.elapsed().as_secs_f64() * 1000.0, out)
}

fn integration(namespace: &str, name: &str) -> ResourceRef {
    ResourceRef {
        kind: CamelKind::Integration,
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn main() {
    let pins = env_usize("BENCH_YAML_PINS", 10_000);
    let rules = env_usize("BENCH_YAML_RULES", 50);
    let runs = env_usize("BENCH_YAML_RUNS", 11);
    let text = p7_manifest::manifest(pins, rules);
    let file = "operator-assignment.yaml";
    let manifest = Manifest::parse(file, text.clone()).expect("the P7 manifest is valid");
    assert_eq!(manifest.assignment.spec.pins.len(), pins);
    let to = OperatorId::new("operator-2").unwrap();

    // The P7 command, `assign integration/pinned-7 --to operator-2 -n ns-7`,
    // then a new pin and a removed one.
    let edits: [(&str, Vec<ResourceRef>, Engine, Engine); 3] = [
        (
            "assign, an existing pin (P7)",
            vec![integration("ns-7", "pinned-7")],
            splice_assign,
            general_assign,
        ),
        (
            "assign, a new pin",
            vec![integration("ns-7", "not-pinned-yet")],
            splice_assign,
            general_assign,
        ),
        (
            "unassign",
            vec![integration("ns-7", "pinned-7")],
            splice_unassign,
            general_unassign,
        ),
    ];
    for (name, resources, splice, general) in &edits {
        let (a, b) = (
            splice(&manifest, resources, &to),
            general(&manifest, resources, &to),
        );
        assert_eq!(a.path, EditPath::Splice, "{name}: the splice declined");
        assert_eq!(b.path, EditPath::General);
        assert_eq!(a.text, b.text, "{name}: the engines wrote different bytes");
    }

    let load_before = load_average();
    println!(
        "yaml_engines: {pins} pins, {rules} rules, {} bytes; median (min to max) of {runs} runs",
        text.len()
    );
    println!("load average before: {load_before}");

    let mut parse = Vec::new();
    let mut tree_only = Vec::new();
    let mut lossless_parse = Vec::new();
    let mut lossless_round_trip = Vec::new();
    let mut by_edit: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); edits.len()];
    let mut whole: (Vec<f64>, Vec<f64>) = Default::default();
    for run in 0..runs {
        parse.push(timed(|| Manifest::parse(file, text.clone()).unwrap()).0);
        tree_only.push(timed(|| Tree::parse(&text).unwrap()).0);
        lossless_parse.push(timed(|| yaml_edit::Document::from_str(&text).unwrap()).0);
        lossless_round_trip.push(
            timed(|| {
                yaml_edit::Document::from_str(&text)
                    .unwrap()
                    .to_string()
                    .len()
            })
            .0,
        );
        // Alternate which engine goes first, so neither always gets the
        // warmer caches.
        let splice_first = run % 2 == 0;
        for ((_, resources, splice, general), (s, g)) in edits.iter().zip(by_edit.iter_mut()) {
            let one = |engine: &Engine| timed(|| engine(&manifest, resources, &to)).0;
            if splice_first {
                s.push(one(splice));
                g.push(one(general));
            } else {
                g.push(one(general));
                s.push(one(splice));
            }
        }
        // The library's part of the P7 command: read the manifest, then edit.
        let (_, resources, splice, general) = &edits[0];
        let both = |engine: &Engine| {
            timed(|| {
                let m = Manifest::parse(file, text.clone()).unwrap();
                engine(&m, resources, &to)
            })
            .0
        };
        if splice_first {
            whole.0.push(both(splice));
            whole.1.push(both(general));
        } else {
            whole.1.push(both(general));
            whole.0.push(both(splice));
        }
    }

    println!();
    println!("| step | splice (today) | yaml-edit alone |");
    println!("|---|---|---|");
    for ((name, ..), (s, g)) in edits.iter().zip(&by_edit) {
        println!("| {name} | {} | {} |", ms(s), ms(g));
    }
    println!(
        "| parse the manifest, then assign (P7, in process) | {} | {} |",
        ms(&whole.0),
        ms(&whole.1)
    );
    println!();
    println!("What both engines share, and what yaml-edit adds:");
    println!(
        "  `Manifest::parse` (positioned parse, typed reading, validation): {}",
        ms(&parse)
    );
    println!(
        "  of which the positioned parse (`Tree::parse`): {}",
        ms(&tree_only)
    );
    println!("  yaml-edit's lossless parse: {}", ms(&lossless_parse));
    println!(
        "  yaml-edit's lossless parse and print: {}",
        ms(&lossless_round_trip)
    );
    println!("load average after: {}", load_average());
}
