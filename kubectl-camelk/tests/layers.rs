//! The plugin's modules import only modules below them, in the order
//! `src/main.rs` documents, and no modules import each other in a circle of
//! any length.

use std::path::Path;

use camelk_testkit::layers::assert_layers_kept;

#[test]
fn modules_import_only_lower_layers() {
    assert_layers_kept(Path::new(env!("CARGO_MANIFEST_DIR")), "main.rs");
}
