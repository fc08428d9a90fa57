//! The Camel K CRDs a control plane is given: those of the pinned upstream
//! release (from its Go module), otherwise the reference copies in the team's
//! shared folder, otherwise CRDs generated from the project's own kind
//! catalogue (said loudly, because schemas then accept anything). Installed with server-side apply (some are over 700 kB, too big
//! for client-side apply's annotation) and waited for until `Established`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::{CamelKind, generated_crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::Error;

pub const CRDS_DIR_ENV: &str = "CAMELK_CRDS_DIR";
const FIELD_MANAGER: &str = "camelk-testkit";

/// Where the CRDs come from.
#[derive(Clone, Debug)]
pub enum CrdSource {
    /// A folder of upstream CRD files (`*.yaml`, one CRD each).
    Upstream(PathBuf),
    /// Minimal CRDs generated from [`CamelKind`].
    Generated,
}

impl CrdSource {
    /// `CAMELK_CRDS_DIR` when set; else the CRDs of the pinned upstream Camel K
    /// release ([`crate::binaries::CAMEL_K_VERSION`]), fetched from the Go module
    /// proxy into the cache by `tests/camel-k/build.sh --crds-only`; else
    /// `../shared/crds/camel-k` beside the checkout; else the generated fallback
    /// (each step down said on stderr).
    pub fn locate() -> CrdSource {
        if let Some(dir) = std::env::var_os(CRDS_DIR_ENV).map(PathBuf::from) {
            if dir.is_dir() {
                return CrdSource::Upstream(dir);
            }
            eprintln!(
                "camelk-testkit: {CRDS_DIR_ENV}={} is not a folder; ignoring it",
                dir.display()
            );
        }
        let version = crate::binaries::CAMEL_K_VERSION;
        match crate::binaries::camel_k_crds_dir(version) {
            Ok(dir) if dir.is_dir() => return CrdSource::Upstream(dir),
            Ok(dir) => eprintln!(
                "camelk-testkit: Camel K {version} CRDs missing from {}",
                dir.display()
            ),
            Err(e) => eprintln!("camelk-testkit: Camel K {version} CRDs unavailable: {e}"),
        }
        let shared = crate::workspace_root().join("../shared/crds/camel-k");
        if shared.is_dir() {
            eprintln!(
                "camelk-testkit: using the reference CRDs of {}",
                shared.display()
            );
            return CrdSource::Upstream(shared);
        }
        eprintln!(
            "\n!!! camelk-testkit: no upstream Camel K CRDs (Go module proxy unreachable?).\n\
             !!! Using minimal CRDs generated from the project's own types instead;\n\
             !!! their schemas accept any field. Set {CRDS_DIR_ENV} to a folder of upstream CRDs.\n"
        );
        CrdSource::Generated
    }

    pub fn load(&self) -> Result<Vec<CustomResourceDefinition>, Error> {
        match self {
            CrdSource::Generated => Ok(CamelKind::ALL.into_iter().map(generated_crd).collect()),
            CrdSource::Upstream(dir) => load_dir(dir),
        }
    }
}

fn load_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::Crd(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::Crd(format!("{}: {e}", path.display())))?;
            serde_saphyr::from_str::<CustomResourceDefinition>(&text)
                .map_err(|e| Error::Crd(format!("{}: {e}", path.display())))
        })
        .collect()
}

/// Applies `crds` server-side and waits until each is `Established` and served.
pub async fn install(client: &Client, crds: &[CustomResourceDefinition]) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut body = crd.clone();
        body.metadata.managed_fields = None;
        body.metadata.resource_version = None;
        api.patch(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| Error::Crd(format!("applying {name}: {e}")))?;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            let live = api
                .get(&name)
                .await
                .map_err(|e| Error::Crd(format!("reading {name}: {e}")))?;
            if is_established(&live) {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Crd(format!("{name} not Established after 60s")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Applies the project's CRDs (`OperatorAssignment`, `RolloutApproval`;
/// server-side, as `field_manager`; idempotent) and waits, 30 s at most,
/// until the API server serves both kinds: a test of the sync starts from
/// there.
pub async fn install_assignment_crd(admin: &Client, field_manager: &str) {
    for crd in camelk_reconciler::api::crds() {
        let name = crd.metadata.name.clone().unwrap();
        Api::<CustomResourceDefinition>::all(admin.clone())
            .patch(
                &name,
                &PatchParams::apply(field_manager).force(),
                &Patch::Apply(&crd),
            )
            .await
            .unwrap_or_else(|e| panic!("applying the CRD {name}: {e}"));
    }
    let assignments: Api<camelk_reconciler::api::OperatorAssignment> = Api::all(admin.clone());
    let approvals: Api<camelk_reconciler::api::RolloutApproval> = Api::all(admin.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while assignments.list(&Default::default()).await.is_err()
        || approvals.list(&Default::default()).await.is_err()
    {
        assert!(Instant::now() < deadline, "the project's CRDs not served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
