//! Packaging and deployment, checked against what would reject them:
//!
//! - the committed `krew-manifest.yaml` against krew's validation rules, and
//!   `make dist` (scripts/dist/package.sh) against it: the archive's sha256 is
//!   the one the rendered manifest states, the archive has the layout the
//!   manifest installs, and packing the same binaries twice gives the same
//!   bytes;
//! - `examples/deploy` (which starts no operator) and its overlay
//!   `examples/test-double-operator` (plus the reference operator, a test
//!   double) rendered by `kubectl kustomize` against a real API server
//!   (server-side apply, dry run, strict field validation), the CRD against
//!   `reconciler crds`, and the RBAC against the roles the code declares
//!   (`handoff::rbac`) and against SubjectAccessReviews for the calls the
//!   code makes and some it must never make.
//!
//! `make dist` builds release binaries, far too slow for a test on two cores;
//! the test hands the script small stand-in executables (`DIST_BIN_DIR`): what
//! is checked is the packing, hashing and rendering, which do not depend on
//! what the binaries are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use camelk_reconciler::handoff::{coordinator_cluster_role, operator_cluster_role};
use camelk_testkit::workspace_binary;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Client;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;
use sha2::{Digest, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const SYSTEM_NS: &str = "camelk-system";
const APPS_NS: &str = "camel-apps";
const RECONCILER_SA: &str = "system:serviceaccount:camelk-system:camelk-reconciler";
const OPERATOR_SA: &str = "system:serviceaccount:camelk-system:camelk-operator-1";
const FIELD_MANAGER: &str = "camelk-e2e-deploy";

pub(crate) fn root() -> PathBuf {
    camelk_testkit::workspace_root()
        .canonicalize()
        .expect("workspace root")
}

pub(crate) fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} is missing or not a string"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

// ---------------------------------------------------------------- krew

/// os/arch pairs krew accepts (krew `internal/index/validation`).
const KREW_PLATFORMS: [(&str, &str); 11] = [
    ("windows", "386"),
    ("windows", "amd64"),
    ("windows", "arm64"),
    ("linux", "386"),
    ("linux", "amd64"),
    ("linux", "arm"),
    ("linux", "arm64"),
    ("linux", "ppc64le"),
    ("darwin", "386"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
];

/// One platform of a krew manifest, checked against krew's rules.
struct KrewPlatform {
    os: String,
    arch: String,
    uri: String,
    sha256: String,
    bin: String,
    /// `from` of each `files` entry.
    files: Vec<String>,
}

/// Checks `manifest` as krew's `validate-krew-manifest` does (and the
/// conventions of this project), and returns its platforms.
fn check_krew_manifest(manifest: &Value) -> Vec<KrewPlatform> {
    assert_eq!(
        str_at(manifest, "/apiVersion"),
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(str_at(manifest, "/kind"), "Plugin");
    assert_eq!(str_at(manifest, "/metadata/name"), "camelk");

    let spec = &manifest["spec"];
    assert_eq!(
        str_at(spec, "/version"),
        format!("v{VERSION}"),
        "spec.version is the workspace version with a v prefix"
    );
    let homepage = str_at(spec, "/homepage");
    assert!(homepage.starts_with("https://"), "homepage {homepage}");
    let short = str_at(spec, "/shortDescription");
    assert!(
        !short.trim().is_empty() && !short.contains('\n'),
        "shortDescription must be one non-empty line: {short:?}"
    );
    assert!(!str_at(spec, "/description").trim().is_empty());

    let platforms = spec["platforms"]
        .as_array()
        .expect("spec.platforms is a list");
    assert!(!platforms.is_empty(), "at least one platform");
    let mut seen = BTreeSet::new();
    let parsed: Vec<KrewPlatform> = platforms
        .iter()
        .map(|p| {
            let labels = p
                .pointer("/selector/matchLabels")
                .and_then(Value::as_object)
                .expect("selector.matchLabels");
            let keys: BTreeSet<&str> = labels.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                BTreeSet::from(["arch", "os"]),
                "a selector names os and arch, nothing else"
            );
            assert!(p["selector"].get("matchExpressions").is_none());
            let os = str_at(p, "/selector/matchLabels/os").to_string();
            let arch = str_at(p, "/selector/matchLabels/arch").to_string();
            assert!(
                KREW_PLATFORMS.contains(&(os.as_str(), arch.as_str())),
                "krew knows no platform {os}/{arch}"
            );
            assert!(
                seen.insert((os.clone(), arch.clone())),
                "two platforms select {os}/{arch}"
            );

            let uri = str_at(p, "/uri").to_string();
            let archive = format!("kubectl-camelk_{VERSION}_{os}_{arch}.tar.gz");
            assert_eq!(
                uri,
                format!("{homepage}/releases/download/v{VERSION}/{archive}"),
                "the release asset of this version and platform"
            );
            let sha256 = str_at(p, "/sha256").to_string();
            assert!(
                is_sha256_hex(&sha256),
                "sha256 {sha256:?} is not 64 lowercase hex digits"
            );
            let bin = str_at(p, "/bin").to_string();
            assert!(!bin.is_empty());

            let files: Vec<String> = match p.get("files") {
                None => Vec::new(),
                Some(files) => {
                    let files = files.as_array().expect("files is a list");
                    assert!(!files.is_empty(), "files, when given, is not empty");
                    files
                        .iter()
                        .map(|f| {
                            assert_eq!(str_at(f, "/to"), ".", "files are installed flat");
                            str_at(f, "/from").to_string()
                        })
                        .collect()
                }
            };
            KrewPlatform {
                os,
                arch,
                uri,
                sha256,
                bin,
                files,
            }
        })
        .collect();
    for p in &parsed {
        let bin = p.bin.trim_start_matches("./");
        assert!(
            p.files.iter().any(|f| f == bin),
            "{}/{}: the bin {} is among the installed files {:?}",
            p.os,
            p.arch,
            p.bin,
            p.files
        );
        assert!(
            p.files.iter().any(|f| f.starts_with("LICENSE")),
            "{}/{}: krew requires a licence among the installed files",
            p.os,
            p.arch
        );
    }
    parsed
}

/// One entry of `tar --list --verbose`.
#[derive(Debug)]
struct TarEntry {
    mode: String,
    owner: String,
    mtime: String,
    name: String,
}

fn tar_entries(archive: &Path) -> Vec<TarEntry> {
    let out = run(Command::new("tar")
        .args([
            "--list",
            "--verbose",
            "--numeric-owner",
            "--full-time",
            "-z",
            "-f",
        ])
        .arg(archive)
        .env("TZ", "UTC"));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            // -rwxr-xr-x 0/0 22 1970-01-01 00:00:00 kubectl-camelk
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 6, "unexpected tar listing line {line:?}");
            TarEntry {
                mode: f[0].into(),
                owner: f[1].into(),
                mtime: format!("{} {}", f[3], f[4]),
                name: f[5].into(),
            }
        })
        .collect()
}

/// Stand-ins for the two release binaries (see the module doc).
fn stand_in_binaries(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["kubectl-camelk", "reconciler"] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {name} stand-in\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    bin
}

/// `make dist` with prebuilt binaries, into `out` and `manifest`; the licence
/// is the repository's, or a stand-in while the repository has none.
fn make_dist(bin: &Path, out: &Path, manifest: &Path, license: Option<&Path>) -> Output {
    let mut cmd = Command::new("make");
    cmd.current_dir(root()).arg("-s").arg("dist");
    cmd.arg(format!("DIST_BIN_DIR={}", bin.display()))
        .arg(format!("DIST_DIR={}", out.display()))
        .arg(format!("KREW_MANIFEST={}", manifest.display()));
    if let Some(license) = license {
        cmd.arg(format!("DIST_LICENSE={}", license.display()));
    }
    cmd.output().expect("running make dist")
}

fn license_for_dist(scratch: &Path) -> Option<PathBuf> {
    if root().join("LICENSE").is_file() {
        return None;
    }
    eprintln!(
        "warning: no LICENSE at the repository root; `make dist` refuses to pack without one, \
         so this test packs a stand-in licence"
    );
    let path = scratch.join("LICENSE.stand-in");
    std::fs::write(&path, "Apache License 2.0 (stand-in)\n").unwrap();
    Some(path)
}

#[test]
fn committed_krew_manifest_is_valid_for_krew() {
    let manifest = yaml_file(&root().join("krew-manifest.yaml"));
    let platforms = check_krew_manifest(&manifest);
    assert!(
        platforms
            .iter()
            .any(|p| (p.os.as_str(), p.arch.as_str()) == ("linux", "amd64")),
        "the platform this project builds, linux/amd64, is offered"
    );
}

#[test]
fn make_dist_packs_archives_whose_sha256_the_rendered_manifest_states() {
    let scratch = tempfile_dir("dist");
    let bin = stand_in_binaries(&scratch);
    let license = license_for_dist(&scratch);
    let out = scratch.join("out");
    let manifest_path = scratch.join("camelk.yaml");
    let first = make_dist(&bin, &out, &manifest_path, license.as_deref());
    assert!(
        first.status.success(),
        "make dist failed:\n{}",
        String::from_utf8_lossy(&first.stderr)
    );

    let manifest = yaml_file(&manifest_path);
    let platforms = check_krew_manifest(&manifest);
    assert_eq!(platforms.len(), 1, "one platform per built target");
    let platform = &platforms[0];
    assert_eq!(
        (platform.os.as_str(), platform.arch.as_str()),
        ("linux", "amd64")
    );

    let archive_name = platform.uri.rsplit('/').next().unwrap();
    let archive = out.join(archive_name);
    let bytes = std::fs::read(&archive).unwrap_or_else(|e| panic!("{archive:?}: {e}"));
    let sha256 = sha256_hex(&bytes);
    assert_eq!(
        platform.sha256, sha256,
        "the manifest states the archive's sha256"
    );
    let sidecar = std::fs::read_to_string(out.join(format!("{archive_name}.sha256"))).unwrap();
    assert_eq!(
        sidecar,
        format!("{sha256}  {archive_name}\n"),
        "sha256sum -c format"
    );

    // The layout krew installs from: the manifest's files, flat, in a fixed
    // order, owned by root, with a fixed mtime; the bin executable.
    let entries = tar_entries(&archive);
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["LICENSE", "README.md", "kubectl-camelk"]);
    let listed: BTreeSet<&str> = names.iter().copied().collect();
    for from in &platform.files {
        assert!(listed.contains(from.as_str()), "{from} is in the archive");
    }
    for e in &entries {
        assert_eq!(e.owner, "0/0", "{}", e.name);
        assert_eq!(e.mtime, "1970-01-01 00:00:00", "{}", e.name);
        let expected = if e.name == platform.bin {
            "-rwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert_eq!(e.mode, expected, "{}", e.name);
    }
    let reconciler_archive = out.join(format!("reconciler_{VERSION}_linux_amd64.tar.gz"));
    let names: Vec<String> = tar_entries(&reconciler_archive)
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["LICENSE", "README.md", "reconciler"]);

    // Reproducible: the same binaries, touched later, give the same bytes.
    for name in ["kubectl-camelk", "reconciler"] {
        std::fs::File::options()
            .append(true)
            .open(bin.join(name))
            .unwrap()
            .set_modified(SystemTime::now() + Duration::from_secs(3600))
            .unwrap();
    }
    let again = scratch.join("again");
    let second = make_dist(
        &bin,
        &again,
        &scratch.join("again.yaml"),
        license.as_deref(),
    );
    assert!(second.status.success());
    assert_eq!(
        sha256_hex(&std::fs::read(again.join(archive_name)).unwrap()),
        sha256,
        "packing the same binaries again gives the same archive"
    );

    // The committed manifest is this template's rendering for this version:
    // only the sha256 (of the real release archive) differs.
    let committed = std::fs::read_to_string(root().join("krew-manifest.yaml")).unwrap();
    let committed_sha = str_at(
        &yaml_file(&root().join("krew-manifest.yaml")),
        "/spec/platforms/0/sha256",
    )
    .to_string();
    let rendered = std::fs::read_to_string(&manifest_path)
        .unwrap()
        .replace(&sha256, &committed_sha);
    assert_eq!(
        committed, rendered,
        "krew-manifest.yaml is stale: run `make dist` and commit it"
    );
}

#[test]
fn make_dist_refuses_to_pack_without_a_licence() {
    let scratch = tempfile_dir("nolicense");
    let bin = stand_in_binaries(&scratch);
    let missing = scratch.join("no-such-LICENSE");
    let out = make_dist(
        &bin,
        &scratch.join("out"),
        &scratch.join("camelk.yaml"),
        Some(&missing),
    );
    assert!(!out.status.success(), "make dist packed without a licence");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no licence file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !scratch
            .join("out")
            .join(format!("kubectl-camelk_{VERSION}_linux_amd64.tar.gz"))
            .exists()
    );
}

/// A fresh directory under the system temp dir (left for the OS to clean).
fn tempfile_dir(prefix: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!(
        "camelk-deploy-{prefix}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------- examples/deploy

/// The overlay that adds the reference operator (a test double) to
/// `examples/deploy`.
const TEST_DOUBLE_OVERLAY: &str = "examples/test-double-operator";

/// `kubectl kustomize` of `dir` (relative to the workspace root), as objects.
fn kustomized(dir: &str) -> Vec<Value> {
    let out = run(Command::new("kubectl")
        .arg("kustomize")
        .arg(root().join(dir)));
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("kustomize output is YAML");
    assert!(!docs.is_empty(), "{dir} renders nothing");
    docs
}

/// What `kubectl apply -k examples/deploy` installs.
pub(crate) fn rendered_deploy() -> Vec<Value> {
    kustomized("examples/deploy")
}

/// What `kubectl apply -k examples/test-double-operator` installs:
/// `examples/deploy` and the reference operator operator-1.
fn rendered_with_test_double() -> Vec<Value> {
    kustomized(TEST_DOUBLE_OVERLAY)
}

/// The first argument of `deployment`'s container: the `reconciler` subcommand.
fn subcommand(deployment: &Value) -> &str {
    str_at(deployment, "/spec/template/spec/containers/0/args/0")
}

pub(crate) fn id(obj: &Value) -> String {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!(
        "{} {ns}{}",
        str_at(obj, "/kind"),
        str_at(obj, "/metadata/name")
    )
}

pub(crate) fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in examples/deploy"))
}

#[test]
fn committed_crds_are_what_reconciler_crds_prints() {
    for crd in camelk_reconciler::api::crds() {
        let name = crd.metadata.name.clone().unwrap();
        for dir in [
            "examples/deploy/crds",
            "charts/camelk-reconciler/files/crds",
        ] {
            let file = format!("{dir}/{name}.yaml");
            let committed = std::fs::read_to_string(root().join(&file)).unwrap();
            assert!(
                committed == camelk_reconciler::api::crd_file(&crd),
                "{file} is stale: regenerate it from `cargo run -p camelk-reconciler --bin reconciler -- crds` (one file per CRD)"
            );
        }
    }
}

/// A user's `kubectl apply -k examples/deploy` starts no operator: on a
/// cluster whose real Camel K operator is called operator-1, a second
/// operator-1 would act on the same resources. The test double comes only
/// with its overlay, which changes nothing of the base but the identity of
/// operator-1.
#[test]
fn the_default_install_starts_no_operator_and_the_overlay_adds_only_the_test_double() {
    let base = rendered_deploy();
    let deployments: Vec<String> = base
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .map(id)
        .collect();
    assert_eq!(deployments, ["Deployment camelk-system/camelk-reconciler"]);
    assert_eq!(
        subcommand(find(&base, "Deployment", "camelk-reconciler")),
        "sync"
    );
    assert!(
        base.iter().all(|o| o["metadata"]["name"] != APPS_NS),
        "no namespace for a test double's resources"
    );
    let identities = find(&base, "ConfigMap", "camelk-operator-identities");
    assert_eq!(
        identities["data"]["operator.operator-1"], "system:serviceaccount:camel-k:camel-k-operator",
        "the default identity is Camel K's, installed by its Helm chart"
    );

    let overlay = rendered_with_test_double();
    let operator = find(&overlay, "Deployment", "camelk-operator-1");
    assert_eq!(subcommand(operator), "operator");
    assert_eq!(
        str_at(operator, "/metadata/labels/app.kubernetes.io~1component"),
        "test-double-operator"
    );
    // Every object of the base is in the overlay unchanged, but the identities.
    for obj in &base {
        let name = str_at(obj, "/metadata/name");
        let theirs = find(&overlay, str_at(obj, "/kind"), name);
        if name == "camelk-operator-identities" {
            assert_eq!(
                theirs["data"]["operator.operator-1"], OPERATOR_SA,
                "the overlay names its operator's ServiceAccount"
            );
            assert_eq!(theirs["data"]["coordinators"], obj["data"]["coordinators"]);
        } else {
            assert_eq!(theirs, obj, "{}: the overlay changes the base", id(obj));
        }
    }
}

#[test]
fn deployments_run_unprivileged_with_resources_and_the_probes_they_serve() {
    let objects = rendered_with_test_double();
    let kinds: BTreeMap<String, usize> = objects.iter().fold(BTreeMap::new(), |mut m, o| {
        *m.entry(str_at(o, "/kind").to_string()).or_default() += 1;
        m
    });
    for kind in [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
    ] {
        assert!(
            kinds.contains_key(kind),
            "{TEST_DOUBLE_OVERLAY} renders no {kind}: {kinds:?}"
        );
    }

    for name in ["camelk-reconciler", "camelk-operator-1"] {
        let d = find(&objects, "Deployment", name);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
        assert_eq!(pod["serviceAccountName"], *name, "{name}");
        let containers = pod["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        let c = &containers[0];
        assert_eq!(
            c["securityContext"]["readOnlyRootFilesystem"], true,
            "{name}"
        );
        assert_eq!(
            c["securityContext"]["allowPrivilegeEscalation"], false,
            "{name}"
        );
        assert_eq!(
            c["securityContext"]["capabilities"]["drop"][0], "ALL",
            "{name}"
        );
        for r in ["requests/cpu", "requests/memory", "limits/memory"] {
            assert!(
                c.pointer(&format!("/resources/{r}")).is_some(),
                "{name} sets resources.{r}"
            );
        }
        assert_eq!(
            str_at(c, "/image"),
            format!("ghcr.io/camelk-gitops/reconciler:v{VERSION}"),
            "{name} runs the image of this version"
        );
    }

    let reconciler = &find(&objects, "Deployment", "camelk-reconciler")["spec"]["template"]["spec"];
    let c = &reconciler["containers"][0];
    let args: Vec<&str> = camelk_testkit::str_items(&c["args"]);
    assert_eq!(args[0], "sync");
    assert!(args.contains(&"--listen=0.0.0.0:8080"));
    assert_eq!(str_at(c, "/livenessProbe/httpGet/path"), "/healthz");
    assert_eq!(str_at(c, "/readinessProbe/httpGet/path"), "/readyz");
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert_eq!(c["ports"][0]["name"], "http");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "http");
    }
    // Every file flag names a file under a mounted volume.
    let mounts: Vec<&str> = camelk_testkit::str_fields(&c["volumeMounts"], "mountPath");
    for flag in [
        "--token-file=",
        "--webhook-secret-file=",
        "--plan-token-file=",
        "--cache-dir=",
    ] {
        let path = args
            .iter()
            .find_map(|a| a.strip_prefix(flag))
            .unwrap_or_else(|| panic!("sync is given {flag}"));
        assert!(
            mounts.iter().any(|m| path.starts_with(m)),
            "{flag}{path} is under no volume mount {mounts:?}"
        );
    }
    // Secrets are mounted as files and read by nobody else: the pod has no
    // environment variable from a Secret.
    assert!(!serde_json::to_string(c).unwrap().contains("secretKeyRef"));

    let service = find(&objects, "Service", "camelk-reconciler");
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/name"],
        "camelk-reconciler"
    );
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");

    let operator = &find(&objects, "Deployment", "camelk-operator-1")["spec"]["template"]["spec"];
    let args: Vec<&str> = camelk_testkit::str_items(&operator["containers"][0]["args"]);
    assert_eq!(args[..2], ["operator", "--id=operator-1"]);
    assert!(
        args.contains(&"--namespace=camel-apps"),
        "a scoped operator: {args:?}"
    );
}

/// The `reconciler` binary of this workspace, built by cargo (a no-op when
/// `cargo test --workspace` already built it).
fn reconciler_binary() -> PathBuf {
    workspace_binary("camelk-reconciler", "reconciler")
}

/// A Deployment with a misspelt flag is accepted by the API server and then
/// crash-loops: every flag the examples pass is one `reconciler <command>
/// --help` lists, and every `$(VAR)` is an environment variable of the container.
#[test]
fn deployment_args_are_flags_the_reconciler_accepts() {
    let objects = rendered_with_test_double();
    let binary = reconciler_binary();
    for name in ["camelk-reconciler", "camelk-operator-1"] {
        let c = &find(&objects, "Deployment", name)["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = camelk_testkit::str_items(&c["args"]);
        let help = run(Command::new(&binary).args([args[0], "--help"]));
        let help = String::from_utf8(help.stdout).unwrap();
        let known: BTreeSet<&str> = help
            .split_whitespace()
            .filter(|w| w.starts_with("--"))
            .map(|w| w.trim_end_matches(','))
            .collect();
        let env: BTreeSet<&str> = c["env"]
            .as_array()
            .map(|e| e.iter().map(|v| v["name"].as_str().unwrap()).collect())
            .unwrap_or_default();
        for arg in &args[1..] {
            let flag = arg.split('=').next().unwrap();
            assert!(
                known.contains(flag),
                "{name}: `reconciler {}` has no flag {flag} (it has {known:?})",
                args[0]
            );
            let mut rest = *arg;
            while let Some(start) = rest.find("$(") {
                let end = rest[start..].find(')').expect("closed $(") + start;
                let var = &rest[start + 2..end];
                assert!(
                    env.contains(var),
                    "{name}: {arg} uses $({var}), which the container env does not set"
                );
                rest = &rest[end..];
            }
        }
    }
}

/// (apiGroup, resource, verb) triples a role's rules grant, whether or not
/// restricted to some resourceNames (the access reviews check those).
fn grants(rules: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in rules.as_array().expect("rules is a list") {
        let list = |key: &str| -> Vec<String> {
            rule.get(key)
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                .unwrap_or_default()
        };
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "no non-resource URLs: {rule}"
        );
        for group in list("apiGroups") {
            for resource in list("resources") {
                for verb in list("verbs") {
                    for field in [&group, &resource, &verb] {
                        assert!(!field.contains('*'), "no wildcard in any rule: {rule}");
                    }
                    out.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

fn library_grants(role: ClusterRole) -> BTreeSet<(String, String, String)> {
    let rules = serde_json::to_value(role.rules.unwrap()).unwrap();
    grants(&rules)
}

/// Grants of every role bound to `subject` in the rendered objects.
fn bound_grants(
    objects: &[Value],
    sa_ns: &str,
    sa: &str,
) -> Vec<(String, (String, String, String))> {
    let mut out = Vec::new();
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let subjects = binding["subjects"].as_array().unwrap();
        if !subjects
            .iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == sa_ns)
        {
            continue;
        }
        let role_kind = str_at(binding, "/roleRef/kind");
        let role = find(objects, role_kind, str_at(binding, "/roleRef/name"));
        if role_kind == "Role" {
            assert_eq!(
                role["metadata"]["namespace"],
                binding["metadata"]["namespace"],
                "{} binds a Role of its own namespace",
                id(binding)
            );
        }
        for grant in grants(&role["rules"]) {
            out.push((id(role), grant));
        }
    }
    out
}

#[test]
fn rbac_has_no_wildcards_and_stays_within_the_roles_the_code_declares() {
    let objects = rendered_with_test_double();
    for role in objects
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
    {
        let g = grants(&role["rules"]);
        assert!(!g.is_empty(), "{} grants something", id(role));
        assert!(
            !g.iter().any(|(_, r, _)| r == "secrets"),
            "{} grants nothing on Secrets: they are mounted as files",
            id(role)
        );
    }
    for (sa, declared) in [
        (
            "camelk-reconciler",
            library_grants(coordinator_cluster_role("x")),
        ),
        (
            "camelk-operator-1",
            library_grants(operator_cluster_role("x")),
        ),
    ] {
        let bound = bound_grants(&objects, SYSTEM_NS, sa);
        assert!(!bound.is_empty(), "{sa} is bound to some role");
        for (role, grant) in bound {
            assert!(
                declared.contains(&grant),
                "{role} grants {sa} {grant:?}, which reconciler/src/handoff/rbac.rs does not declare"
            );
        }
    }
}

// ---------------------------------------------------------------- against the API server

async fn api_for(client: &Client, obj: &Value) -> Api<DynamicObject> {
    let (group, version) = match str_at(obj, "/apiVersion").split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), str_at(obj, "/apiVersion").to_string()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, str_at(obj, "/kind"));
    let (resource, caps) = pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("{}: the API server serves no such kind: {e}", id(obj)));
    match caps.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{} is namespaced but names no namespace", id(obj))),
            &resource,
        ),
    }
}

/// Server-side apply of `obj`, strict field validation (an unknown or
/// misspelt field is an error, not a warning), for real or as a dry run.
pub(crate) async fn apply(
    client: &Client,
    obj: &Value,
    dry_run: bool,
) -> Result<DynamicObject, kube::Error> {
    let api = api_for(client, obj).await;
    let mut params = PatchParams::apply(FIELD_MANAGER)
        .force()
        .validation_strict();
    if dry_run {
        params = params.dry_run();
    }
    api.patch(str_at(obj, "/metadata/name"), &params, &Patch::Apply(obj))
        .await
}

/// Namespace `name`, for real (kept when it exists).
pub(crate) async fn create_namespace(client: &Client, name: &str) {
    let ns = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name }
    });
    apply(client, &ns, false)
        .await
        .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
}

/// The Namespaces, for real: a namespaced object cannot be dry-run into a
/// namespace that does not exist. Each is dry-run first like everything else.
async fn create_namespaces(client: &Client, objects: &[Value]) {
    for ns in objects.iter().filter(|o| o["kind"] == "Namespace") {
        apply(client, ns, true)
            .await
            .unwrap_or_else(|e| panic!("{} refused (dry run): {e}", id(ns)));
        apply(client, ns, false)
            .await
            .unwrap_or_else(|e| panic!("{} refused: {e}", id(ns)));
    }
}

#[tokio::test]
async fn every_rendered_object_is_accepted_by_a_server_side_dry_run() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let mut refused = Vec::new();
    // The overlay holds every object of the base but the identities.
    let objects = rendered_with_test_double();
    let base_identities = find(
        &rendered_deploy(),
        "ConfigMap",
        "camelk-operator-identities",
    )
    .clone();
    create_namespaces(&admin, &objects).await;
    for obj in objects.iter().chain([&base_identities]) {
        match apply(&admin, obj, true).await {
            Ok(returned) => {
                assert_eq!(
                    returned.metadata.name.as_deref(),
                    obj["metadata"]["name"].as_str()
                );
            }
            Err(e) => refused.push(format!("{}: {e}", id(obj))),
        }
    }
    assert!(
        refused.is_empty(),
        "refused by the API server:\n{}",
        refused.join("\n")
    );

    // A dry run persists nothing: the Deployments are not there.
    let deployments = api_for(&admin, find(&objects, "Deployment", "camelk-reconciler")).await;
    assert!(
        deployments
            .get_opt("camelk-reconciler")
            .await
            .unwrap()
            .is_none()
    );
}

/// Objects the RBAC checks need for real: namespaces, service accounts, roles
/// and bindings.
async fn apply_rbac(client: &Client, objects: &[Value]) {
    create_namespaces(client, objects).await;
    for obj in objects.iter().filter(|o| {
        matches!(
            o["kind"].as_str(),
            Some("ServiceAccount" | "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding")
        )
    }) {
        apply(client, obj, false)
            .await
            .unwrap_or_else(|e| panic!("{} refused: {e}", id(obj)));
    }
}

/// One access question: may `user` `verb` `group/resource` (`name`) in `namespace`?
struct Access {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: Option<&'static str>,
    namespace: Option<&'static str>,
    name: Option<&'static str>,
}

/// `what` is `resource[/subresource][.group]`, as `kubectl auth can-i` spells it.
fn access(verb: &'static str, what: &'static str, namespace: Option<&'static str>) -> Access {
    let (resource, group) = what.split_once('.').unwrap_or((what, ""));
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (resource, None),
    };
    Access {
        verb,
        group,
        resource,
        subresource,
        namespace,
        name: None,
    }
}

impl Access {
    fn named(mut self, name: &'static str) -> Access {
        self.name = Some(name);
        self
    }

    fn describe(&self) -> String {
        format!(
            "{} {}{}{}{} in {}",
            self.verb,
            self.resource,
            self.subresource
                .map(|s| format!("/{s}"))
                .unwrap_or_default(),
            if self.group.is_empty() {
                String::new()
            } else {
                format!(".{}", self.group)
            },
            self.name.map(|n| format!(" {n}")).unwrap_or_default(),
            self.namespace.unwrap_or("all namespaces")
        )
    }
}

async fn allowed(client: &Client, user: &str, a: &Access) -> bool {
    let sa_ns = user.split(':').nth(2).unwrap();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{sa_ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(a.verb.into()),
                group: Some(a.group.into()),
                resource: Some(a.resource.into()),
                subresource: a.subresource.map(Into::into),
                namespace: a.namespace.map(Into::into),
                name: a.name.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .unwrap_or_else(|e| panic!("SubjectAccessReview {}: {e}", a.describe()));
    answer.status.expect("a review has a status").allowed
}

/// Waits until `user` may do the first of `must` (the authorizer learns new
/// bindings through an informer), then checks every question.
async fn check_access(client: &Client, user: &str, must: &[Access], must_not: &[Access]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !allowed(client, user, &must[0]).await {
        assert!(
            Instant::now() < deadline,
            "{user} may not {} 15 s after its bindings were applied",
            must[0].describe()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut wrong = Vec::new();
    for a in must {
        if !allowed(client, user, a).await {
            wrong.push(format!("may not {}, which the code does", a.describe()));
        }
    }
    for a in must_not {
        if allowed(client, user, a).await {
            wrong.push(format!("may {}, which it must not", a.describe()));
        }
    }
    assert!(wrong.is_empty(), "{user}:\n{}", wrong.join("\n"));
}

#[tokio::test]
async fn service_accounts_may_make_the_calls_the_code_makes_and_no_others() {
    let cluster = camelk_testkit::shared();
    let admin = cluster.admin().await;
    let objects = rendered_with_test_double();
    apply_rbac(&admin, &objects).await;

    let elsewhere = Some("team-b");
    let system = Some(SYSTEM_NS);
    let apps = Some(APPS_NS);

    // reconciler sync: sync/, handoff/{coordinator,owner_writes}.rs, lock/election.rs, inventory/.
    let must = [
        access("patch", "integrations.camel.apache.org", elsewhere),
        access("get", "integrations.camel.apache.org", elsewhere),
        access("list", "pipes.camel.apache.org", None),
        access("watch", "kamelets.camel.apache.org", None),
        access("list", "kameletbindings.camel.apache.org", elsewhere),
        access("create", "leases.coordination.k8s.io", elsewhere),
        access("list", "leases.coordination.k8s.io", elsewhere),
        access("patch", "leases.coordination.k8s.io", elsewhere),
        access("delete", "leases.coordination.k8s.io", elsewhere),
        access("get", "leases.coordination.k8s.io", system).named("operator-1-lock"),
        access("update", "leases.coordination.k8s.io", system).named("camelk-reconciler-lock"),
        access("create", "leases.coordination.k8s.io", system),
        access("get", "operatorassignments.camelk.dev", system),
        access("watch", "operatorassignments.camelk.dev", system),
        access("create", "operatorassignments.camelk.dev", system),
        access("patch", "operatorassignments.camelk.dev", system),
        access("patch", "operatorassignments/status.camelk.dev", system),
        access("create", "events.events.k8s.io", system),
        access("patch", "events.events.k8s.io", system),
        // `Moved` on each moved resource, in its own namespace.
        access("create", "events.events.k8s.io", elsewhere),
        access("patch", "events.events.k8s.io", elsewhere),
    ];
    let must_not = [
        access("delete", "integrations.camel.apache.org", elsewhere),
        access("create", "integrations.camel.apache.org", elsewhere),
        access("update", "integrations.camel.apache.org", elsewhere),
        access("patch", "integrations/status.camel.apache.org", elsewhere),
        access("get", "secrets", None),
        access("list", "secrets", system),
        access("get", "configmaps", system),
        access("update", "leases.coordination.k8s.io", system).named("operator-1-lock"),
        access("update", "leases.coordination.k8s.io", elsewhere),
        access("patch", "operatorassignments.camelk.dev", elsewhere),
        access("delete", "operatorassignments.camelk.dev", system),
        access("delete", "events.events.k8s.io", elsewhere),
        access("create", "deployments.apps", system),
        access("escalate", "clusterroles.rbac.authorization.k8s.io", None),
    ];
    check_access(&admin, RECONCILER_SA, &must, &must_not).await;

    // reconciler operator --id operator-1 -n camel-apps: operator/, handoff/release.
    let must = [
        access("watch", "integrations.camel.apache.org", apps),
        access("list", "integrations.camel.apache.org", apps),
        access("list", "kamelets.camel.apache.org", apps),
        access("patch", "integrations.camel.apache.org", apps),
        access("create", "integrationkits.camel.apache.org", apps),
        access("create", "builds.camel.apache.org", apps),
        access("create", "integrations.camel.apache.org", apps),
        access("patch", "integrations/status.camel.apache.org", apps),
        access("patch", "builds/status.camel.apache.org", apps),
        access("watch", "leases.coordination.k8s.io", apps),
        access("create", "deployments.apps", apps),
        access("patch", "deployments.apps", apps),
        access("patch", "configmaps", apps),
        access("get", "leases.coordination.k8s.io", system).named("operator-1-lock"),
        access("update", "leases.coordination.k8s.io", system).named("operator-1-lock"),
        access("create", "leases.coordination.k8s.io", system),
    ];
    let must_not = [
        access("watch", "integrations.camel.apache.org", None),
        access("list", "integrations.camel.apache.org", elsewhere),
        access("patch", "integrations.camel.apache.org", elsewhere),
        access("delete", "integrations.camel.apache.org", apps),
        access("delete", "deployments.apps", apps),
        access("create", "kamelets.camel.apache.org", apps),
        access("get", "secrets", apps),
        access("get", "secrets", None),
        access("update", "leases.coordination.k8s.io", system).named("camelk-reconciler-lock"),
        access("delete", "leases.coordination.k8s.io", apps),
        access("create", "leases.coordination.k8s.io", apps),
        access("patch", "operatorassignments.camelk.dev", system),
        access("create", "deployments.apps", elsewhere),
    ];
    check_access(&admin, OPERATOR_SA, &must, &must_not).await;
}

#[test]
fn the_admission_policy_names_the_identities_that_are_deployed() {
    for objects in [rendered_deploy(), rendered_with_test_double()] {
        identities_name_the_deployed_accounts(&objects);
    }
}

fn identities_name_the_deployed_accounts(objects: &[Value]) {
    let identities = find(objects, "ConfigMap", "camelk-operator-identities");
    let binding = find(
        objects,
        "ValidatingAdmissionPolicyBinding",
        "camelk-operator-id",
    );
    assert_eq!(
        str_at(binding, "/spec/paramRef/namespace"),
        str_at(identities, "/metadata/namespace")
    );
    let accounts: BTreeSet<String> = objects
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .map(|o| {
            format!(
                "system:serviceaccount:{}:{}",
                str_at(o, "/metadata/namespace"),
                str_at(o, "/metadata/name")
            )
        })
        .collect();
    let data = identities["data"].as_object().expect("identities data");
    let coordinators = data["coordinators"].as_str().unwrap();
    assert!(
        accounts.contains(coordinators),
        "{coordinators} in {accounts:?}"
    );
    // Each operator Deployment's id has an entry naming its ServiceAccount.
    for deployment in objects.iter().filter(|o| o["kind"] == "Deployment") {
        let pod = &deployment["spec"]["template"]["spec"];
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if args.first() != Some(&"operator") {
            continue;
        }
        let id = args
            .iter()
            .find_map(|a| a.strip_prefix("--id="))
            .or_else(|| args.iter().position(|a| *a == "--id").map(|i| args[i + 1]))
            .expect("an operator Deployment passes --id");
        let account = format!(
            "system:serviceaccount:{}:{}",
            str_at(deployment, "/metadata/namespace"),
            str_at(pod, "/serviceAccountName")
        );
        assert_eq!(
            data.get(&format!("operator.{id}")).and_then(Value::as_str),
            Some(account.as_str()),
            "operator {id}"
        );
    }
}
