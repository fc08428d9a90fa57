//! Reading the API server's audit log, the judge of who wrote what.
//!
//! The local control plane logs `RequestResponse` for the `camel.apache.org`
//! and `coordination.k8s.io` groups and `Metadata` for the rest, one JSON
//! event per line, written synchronously (the log backend's blocking mode), so
//! a request that has been answered is already in the file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The audit policy the local control plane runs with.
pub const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    resources:
      - group: camel.apache.org
      - group: coordination.k8s.io
  - level: Metadata
";

/// The fields of an `audit.k8s.io/v1` Event that tests look at.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub level: String,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: String,
    pub verb: String,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub user: UserInfo,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    #[serde(default)]
    pub request_object: Option<serde_json::Value>,
    #[serde(default)]
    pub response_object: Option<serde_json::Value>,
    #[serde(default)]
    pub stage_timestamp: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub api_group: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: Option<u16>,
}

impl AuditEvent {
    /// The HTTP status the API server answered with, if the stage records one.
    pub fn code(&self) -> Option<u16> {
        self.response_status.as_ref().and_then(|s| s.code)
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object_ref.as_ref()?.namespace.as_deref()
    }

    pub fn resource(&self) -> Option<&str> {
        self.object_ref.as_ref().map(|o| o.resource.as_str())
    }

    /// True for a write verb that the API server accepted (2xx).
    pub fn is_successful_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        ) && self.code().is_some_and(|c| (200..300).contains(&c))
    }
}

/// The audit log file of one control plane.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    pub fn new(path: impl Into<PathBuf>) -> AuditLog {
        AuditLog { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every complete event in the log. A last line without its newline is
    /// still being written and is skipped; any other unreadable line is an error.
    pub fn events(&self) -> std::io::Result<Vec<AuditEvent>> {
        let text = std::fs::read_to_string(&self.path)?;
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        complete
            .lines()
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_str(line).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}:{}: {e}", self.path.display(), i + 1),
                    )
                })
            })
            .collect()
    }

    /// Events about objects in `namespace`, the usual scope of one test.
    pub fn events_in(&self, namespace: &str) -> std::io::Result<Vec<AuditEvent>> {
        Ok(self
            .events()?
            .into_iter()
            .filter(|e| e.namespace() == Some(namespace))
            .collect())
    }
}
