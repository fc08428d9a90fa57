//! The library's public surface, checked in as `public-api.txt`, so a change
//! to what the plugin and the binaries may use shows up in review.
//!
//! The walk starts at `src/lib.rs`, follows every `pub mod` (to its file,
//! honouring `#[path]`, or inline) and lists each `pub` item of a public
//! module: functions, types, traits, constants, statics, `pub use`
//! re-exports (by the name they export and the path they export), and
//! `#[macro_export]` macros, and the struct `#[derive(kube::CustomResource)]`
//! generates (named by its `kind`). It reads the source, so it needs neither
//! nightly nor rustdoc. What it does not list: methods and fields of public
//! types, trait impls, items other derives or macros generate. An item under `#[cfg(feature = "...")]` (on itself or on a
//! module above it) is listed with that feature; `#[cfg(test)]` items are not
//! listed. `pub(crate)`, `pub(super)` and `pub(in ...)` are not public.
//!
//! To accept a change of the surface:
//! `UPDATE_PUBLIC_API=1 cargo test -p camelk-reconciler --test public_api`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const LIST: &str = "public-api.txt";
const ACCEPT: &str = "UPDATE_PUBLIC_API=1 cargo test -p camelk-reconciler --test public_api";

#[test]
fn the_public_surface_is_the_checked_in_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let surface =
        public_items(&root.join("src/lib.rs"), "camelk_reconciler").expect("walk the sources");
    let list_path = root.join(LIST);
    let mut rendered = surface.iter().cloned().collect::<Vec<_>>().join("\n");
    rendered.push('\n');
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        fs::write(&list_path, &rendered).expect("write public-api.txt");
        return;
    }
    let checked_in = fs::read_to_string(&list_path).unwrap_or_default();
    let listed: BTreeSet<String> = checked_in.lines().map(str::to_owned).collect();
    let added: Vec<_> = surface
        .difference(&listed)
        .map(|l| format!("+ {l}"))
        .collect();
    let removed: Vec<_> = listed
        .difference(&surface)
        .map(|l| format!("- {l}"))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public surface of camelk-reconciler differs from reconciler/{LIST} \
         (+ public now, not listed; - listed, no longer public):\n{}\n{}\n\
         If the change is meant, accept it with `{ACCEPT}` and commit the list.",
        added.join("\n"),
        removed.join("\n"),
    );
}

/// Every public item reachable from the crate root in `root_file`, one line
/// each: `path::name (kind)`, with ` [feature "x"]` when a feature gates it.
fn public_items(root_file: &Path, crate_name: &str) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    let file = parse(root_file)?;
    let walk = Walk {
        crate_name,
        out: &mut out,
    };
    let dir = root_file.parent().unwrap_or(Path::new(".")).to_path_buf();
    walk_items(walk, &file.items, crate_name, &dir, &[])?;
    Ok(out)
}

struct Walk<'a> {
    crate_name: &'a str,
    out: &'a mut BTreeSet<String>,
}

/// Lists the public items of one module. `dir` is where its `mod x;` files
/// live; `gates` are the `cfg`s of the modules above it.
fn walk_items(
    walk: Walk<'_>,
    items: &[syn::Item],
    module: &str,
    dir: &Path,
    gates: &[String],
) -> Result<(), String> {
    let Walk { crate_name, out } = walk;
    for item in items {
        let attrs = attributes(item);
        let Some(item_gates) = gates_of(attrs, gates) else {
            continue; // #[cfg(test)]
        };
        let gated = |line: String| match item_gates.is_empty() {
            true => line,
            false => format!("{line} [{}]", item_gates.join(", ")),
        };
        if let syn::Item::Macro(m) = item {
            let exported = m.attrs.iter().any(|a| a.path().is_ident("macro_export"));
            if let (true, Some(name)) = (exported, &m.ident) {
                out.insert(gated(format!("{crate_name}::{name} (macro)")));
            }
            continue;
        }
        if !matches!(visibility(item), Some(syn::Visibility::Public(_))) {
            continue;
        }
        let named = |name: &syn::Ident, kind: &str| gated(format!("{module}::{name} ({kind})"));
        match item {
            syn::Item::Mod(m) => {
                let path = format!("{module}::{}", m.ident);
                out.insert(named(&m.ident, "mod"));
                let walk = Walk {
                    crate_name,
                    out: &mut *out,
                };
                match &m.content {
                    Some((_, inline)) => walk_items(
                        walk,
                        inline,
                        &path,
                        &dir.join(m.ident.to_string()),
                        &item_gates,
                    )?,
                    None => {
                        let file = module_file(dir, m)?;
                        let sub_dir = if file.ends_with("mod.rs") {
                            file.parent().unwrap_or(dir).to_path_buf()
                        } else {
                            file.with_extension("")
                        };
                        walk_items(walk, &parse(&file)?.items, &path, &sub_dir, &item_gates)?;
                    }
                }
            }
            syn::Item::Fn(f) => drop(out.insert(named(&f.sig.ident, "fn"))),
            syn::Item::Struct(s) => {
                out.insert(named(&s.ident, "struct"));
                // `#[derive(CustomResource)]` makes a second public struct, named by its `kind`.
                if let Some(kind) = custom_resource_kind(&s.attrs) {
                    out.insert(gated(format!(
                        "{module}::{kind} (struct, kube::CustomResource)"
                    )));
                }
            }
            syn::Item::Enum(e) => drop(out.insert(named(&e.ident, "enum"))),
            syn::Item::Union(u) => drop(out.insert(named(&u.ident, "union"))),
            syn::Item::Trait(t) => drop(out.insert(named(&t.ident, "trait"))),
            syn::Item::Type(t) => drop(out.insert(named(&t.ident, "type"))),
            syn::Item::Const(c) => drop(out.insert(named(&c.ident, "const"))),
            syn::Item::Static(s) => drop(out.insert(named(&s.ident, "static"))),
            syn::Item::Use(u) => {
                for (name, source) in use_leaves(&u.tree, "") {
                    out.insert(gated(format!("{module}::{name} (use {source})")));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The file of `mod name;` declared in a module whose files live in `dir`.
fn module_file(dir: &Path, m: &syn::ItemMod) -> Result<PathBuf, String> {
    for attr in &m.attrs {
        if let syn::Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("path")
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            return Ok(dir.join(s.value()));
        }
    }
    let name = m.ident.to_string();
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .ok_or_else(|| format!("no file for `mod {}` in {}", m.ident, dir.display()))
}

/// The names a `pub use` tree exports, each with the path it exports.
fn use_leaves(tree: &syn::UseTree, prefix: &str) -> Vec<(String, String)> {
    let join = |name: &str| match prefix {
        "" => name.to_owned(),
        _ => format!("{prefix}::{name}"),
    };
    match tree {
        syn::UseTree::Path(p) => use_leaves(&p.tree, &join(&p.ident.to_string())),
        syn::UseTree::Name(n) => vec![(n.ident.to_string(), join(&n.ident.to_string()))],
        syn::UseTree::Rename(r) => vec![(r.rename.to_string(), join(&r.ident.to_string()))],
        syn::UseTree::Glob(_) => vec![("*".to_owned(), join("*"))],
        syn::UseTree::Group(g) => g.items.iter().flat_map(|t| use_leaves(t, prefix)).collect(),
    }
}

/// The `kind` of a `#[kube(...)]` attribute: the name of the struct that
/// `#[derive(CustomResource)]` generates beside the spec.
fn custom_resource_kind(attrs: &[syn::Attribute]) -> Option<String> {
    let tokens = attrs
        .iter()
        .find(|a| a.path().is_ident("kube"))?
        .meta
        .require_list()
        .ok()?
        .tokens
        .to_string();
    let (_, after) = tokens.split_once("kind = \"")?;
    Some(after.split('"').next()?.to_owned())
}

/// The `cfg`s that gate an item: those of its modules and its own, or `None`
/// for test-only code. A feature reads `feature "server"`; any other `cfg`
/// is kept as written.
fn gates_of(attrs: &[syn::Attribute], outer: &[String]) -> Option<Vec<String>> {
    let mut gates = outer.to_vec();
    for attr in attrs.iter().filter(|a| a.path().is_ident("cfg")) {
        let tokens = attr.meta.require_list().ok()?.tokens.to_string();
        if tokens == "test" {
            return None;
        }
        let gate = match tokens.strip_prefix("feature = ") {
            Some(name) => format!("feature {name}"),
            None => format!("cfg({tokens})"),
        };
        gates.push(gate);
    }
    Some(gates)
}

fn attributes(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn visibility(item: &syn::Item) -> Option<&syn::Visibility> {
    match item {
        syn::Item::Const(i) => Some(&i.vis),
        syn::Item::Enum(i) => Some(&i.vis),
        syn::Item::Fn(i) => Some(&i.vis),
        syn::Item::Mod(i) => Some(&i.vis),
        syn::Item::Static(i) => Some(&i.vis),
        syn::Item::Struct(i) => Some(&i.vis),
        syn::Item::Trait(i) => Some(&i.vis),
        syn::Item::Type(i) => Some(&i.vis),
        syn::Item::Union(i) => Some(&i.vis),
        syn::Item::Use(i) => Some(&i.vis),
        _ => None,
    }
}

fn parse(path: &Path) -> Result<syn::File, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    syn::parse_file(&text).map_err(|e| format!("parse {}: {e}", path.display()))
}

/// The walker on a crate of its own: the check is only as honest as this.
#[test]
fn the_walk_lists_public_items_of_public_modules_only() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a;\nmod hidden;\n#[cfg(feature = \"server\")]\npub mod gated;\n\
         #[path = \"elsewhere/moved.rs\"]\npub mod moved;\n\
         pub use hidden::{Kept, deep::Deeper as Renamed};\n\
         #[macro_export]\nmacro_rules! shout { () => {} }\n",
    );
    write(
        "a/mod.rs",
        "pub fn f() {}\npub(crate) fn internal() {}\nfn private() {}\npub struct S;\n\
         #[derive(CustomResource)]\n#[kube(group = \"g\", version = \"v1\", kind = \"Thing\")]\npub struct ThingSpec;\n\
         pub mod inner { pub const C: u8 = 1; }\nmod b;\n#[cfg(test)]\npub fn only_in_tests() {}\n",
    );
    write("a/b.rs", "pub fn unreachable() {}\n");
    write(
        "hidden.rs",
        "pub struct Kept;\npub mod deep { pub struct Deeper; }\n",
    );
    write("gated.rs", "pub trait T {}\n");
    write("elsewhere/moved.rs", "pub type Alias = u8;\n");

    let items = public_items(&dir.path().join("lib.rs"), "k").unwrap();
    let expected = [
        "k::Kept (use hidden::Kept)",
        "k::Renamed (use hidden::deep::Deeper)",
        "k::a (mod)",
        "k::a::S (struct)",
        "k::a::Thing (struct, kube::CustomResource)",
        "k::a::ThingSpec (struct)",
        "k::a::f (fn)",
        "k::a::inner (mod)",
        "k::a::inner::C (const)",
        "k::gated (mod) [feature \"server\"]",
        "k::gated::T (trait) [feature \"server\"]",
        "k::moved (mod)",
        "k::moved::Alias (type)",
        "k::shout (macro)",
    ];
    assert_eq!(
        items.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
}
