//! The container images of `make image` (scripts/image/build.sh): built from
//! this workspace's binaries, checked in their OCI config (user, entrypoint,
//! labels), named as examples/deploy and the chart name them, pushed to a
//! registry on loopback (Debian's `docker-registry`), pulled back, and run
//! from the pulled image's filesystem with its own libraries.
//!
//! Release binaries take minutes to build on two cores: the test hands the
//! script the debug binaries (`IMAGE_BIN_DIR`). What is checked (the layout,
//! the config, the libraries, the push and the pull) does not depend on the
//! profile.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use camelk_testkit::workspace_binary;
use serde_json::Value;

use crate::deploy::{find, rendered_deploy, root, run};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A `docker-registry` on a loopback port, killed on drop.
struct Registry {
    child: Child,
    port: u16,
}

impl Registry {
    fn start(dir: &Path) -> Registry {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: 127.0.0.1:{port}\n",
                dir.join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry (installed by .ci/run)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the registry did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { child, port }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn blob(layout: &Path, digest: &str) -> Value {
    let (algorithm, hex) = digest.split_once(':').unwrap();
    let text = std::fs::read(layout.join("blobs").join(algorithm).join(hex)).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// The OCI config of tag `tag` in the image layout `layout`.
fn config_of(layout: &Path, tag: &str) -> Value {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .unwrap_or_else(|| panic!("no tag {tag} in {index}"));
    let manifest = blob(layout, manifest["digest"].as_str().unwrap());
    blob(layout, manifest["config"]["digest"].as_str().unwrap())
}

#[test]
fn images_are_built_pushed_pulled_and_run_from_their_own_filesystem() {
    let scratch = tempfile::tempdir().unwrap();
    let bin = scratch.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (package, name) in [
        ("camelk-reconciler", "reconciler"),
        ("kubectl-camelk", "kubectl-camelk"),
    ] {
        std::fs::copy(workspace_binary(package, name), bin.join(name)).unwrap();
    }
    let registry = Registry::start(scratch.path());
    let layout = scratch.path().join("oci");
    let pushed_to = format!("127.0.0.1:{}/camelk-gitops", registry.port);
    run(Command::new("make")
        .arg("image")
        .current_dir(root())
        .env("IMAGE_BIN_DIR", &bin)
        .env("IMAGE_DIR", &layout)
        .env("IMAGE_PUSH", &pushed_to));

    let revision = String::from_utf8(
        run(Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(root()))
        .stdout,
    )
    .unwrap();
    let deployment = find(&rendered_deploy(), "Deployment", "camelk-reconciler").clone();
    for name in ["reconciler", "kubectl-camelk"] {
        let config = config_of(&layout, &format!("{name}-v{VERSION}"));
        let c = &config["config"];
        assert_eq!(
            c["User"], "65532:65532",
            "{name} runs as nonroot: {config:#}"
        );
        assert_eq!(c["Entrypoint"][0], format!("/usr/local/bin/{name}"));
        let label = |key: &str| c["Labels"][key].as_str().unwrap_or_default().to_string();
        assert_eq!(
            label("org.opencontainers.image.version"),
            format!("v{VERSION}")
        );
        assert_eq!(label("org.opencontainers.image.revision"), revision.trim());
        assert!(label("org.opencontainers.image.source").starts_with("https://"));
        let reference = label("org.opencontainers.image.ref.name");
        assert_eq!(
            reference,
            format!("ghcr.io/camelk-gitops/{name}:v{VERSION}")
        );
        if name == "reconciler" {
            assert_eq!(
                deployment["spec"]["template"]["spec"]["containers"][0]["image"], reference,
                "examples/deploy (and the chart, checked against it) run this image"
            );
        }

        // Pulled back from the registry and unpacked as a runtime would.
        let pulled = scratch.path().join(format!("pulled-{name}"));
        run(Command::new("skopeo").args([
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            &format!("docker://{pushed_to}/{name}:v{VERSION}"),
            &format!("oci:{}:pulled", pulled.display()),
        ]));
        let bundle = scratch.path().join(format!("bundle-{name}"));
        run(Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:pulled", pulled.display()))
            .arg(&bundle));
        let rootfs = bundle.join("rootfs");
        assert!(
            !rootfs.join("bin/sh").exists() && !rootfs.join("usr/bin").exists(),
            "no shell, no tools: only the binary and its libraries"
        );
        // Its own loader and libraries, not the host's.
        let out = run(Command::new(rootfs.join("lib64/ld-linux-x86-64.so.2"))
            .arg("--library-path")
            .arg(rootfs.join("lib/x86_64-linux-gnu"))
            .arg(rootfs.join("usr/local/bin").join(name))
            .arg("--help"));
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Usage:"), "{name} --help:\n{help}");
        let libraries: Vec<PathBuf> = std::fs::read_dir(rootfs.join("lib/x86_64-linux-gnu"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(
            libraries.iter().any(|l| l.ends_with("libssl.so.3")),
            "git2's OpenSSL is in the image: {libraries:?}"
        );
    }
}
