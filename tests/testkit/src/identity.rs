//! The users a local control plane knows, each authenticated by a static
//! bearer token generated per cluster. Only `admin` is privileged
//! (`system:masters`); the others have no rights until a test grants them.

use std::io::Read;

/// A user of the local control plane and the context that names it in the kubeconfig.
#[derive(Clone, Debug)]
pub struct Identity {
    pub name: String,
    pub token: String,
    pub groups: Vec<String>,
}

/// Name of the privileged identity, also the kubeconfig's current context.
pub const ADMIN: &str = "admin";

/// Name of the identity that runs `reconciler sync` and the handoff coordinator.
pub const RECONCILER: &str = "reconciler";

/// Users every local control plane has. The operators and the reconciler get
/// identities of their own so the audit log can tell who wrote what.
pub const UNPRIVILEGED: [&str; 8] = [
    RECONCILER,
    "operator-1",
    "operator-2",
    "operator-3",
    // A second operator beside operator-3 where both handle unowned resources.
    "operator-4",
    "developer",
    "viewer",
    THROTTLED,
];

/// A user that a test throttles with API Priority and Fairness
/// ([`crate::apf::throttle`]); no other test acts as it.
pub const THROTTLED: &str = "throttled";

impl Identity {
    /// The standard set: admin plus [`UNPRIVILEGED`], with fresh random tokens.
    pub fn standard_set() -> std::io::Result<Vec<Identity>> {
        let mut all = vec![Identity {
            name: ADMIN.into(),
            token: random_token()?,
            groups: vec!["system:masters".into()],
        }];
        for name in UNPRIVILEGED {
            all.push(Identity {
                name: name.into(),
                token: random_token()?,
                groups: vec![],
            });
        }
        Ok(all)
    }

    /// One line of kube-apiserver's `--token-auth-file` (`token,user,uid,"groups"`).
    pub fn token_file_line(&self) -> String {
        format!(
            "{},{},{},\"{}\"\n",
            self.token,
            self.name,
            self.name,
            self.groups.join(",")
        )
    }
}

fn random_token() -> std::io::Result<String> {
    random_hex(24)
}

/// `n` random bytes from the kernel, as lowercase hex.
pub(crate) fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
