//! The library's modules import only modules below them, in the order
//! `src/lib.rs` documents, and no modules import each other in a circle of
//! any length.

use std::path::Path;

use camelk_testkit::layers::{check, declared_layers};

#[test]
fn modules_import_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = declared_layers(&src.join("lib.rs")).expect("layer order in lib.rs");
    let violations = check(&src, &layers).expect("read the sources");
    let report: Vec<String> = violations.iter().map(|v| format!("  src/{v}")).collect();
    assert!(
        violations.is_empty(),
        "imports against the layer order of src/lib.rs:\n{}",
        report.join("\n")
    );
}
