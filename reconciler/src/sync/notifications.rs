//! The manifest's `notifications`, as a round follows them: each target
//! resolved (its URL or token read from a Secret), and the rollout's
//! moments sent through a [`Notifier`], which delivers in the background,
//! retries, and never holds the rollout.
//!
//! Secrets are files, as every credential of the reconciler: a Secret named
//! in a `…SecretRef` is mounted at `<secrets dir>/<name>/` (the chart's
//! `notifications.secrets`), its keys as files. The reconciler is granted
//! nothing on Secrets in the API. A target whose Secret cannot be read is
//! left out until a later round reads it, with a warning Event naming the
//! target and the Secret, never the value.

use std::cell::Cell;
use std::path::PathBuf;

use kube::ResourceExt;

use super::notify::{Event, Kind, Notifier, Retry, Target};
use super::status;
use crate::api::{Notification, OperatorAssignment, RolloutStatus, SecretKeyRef, UrlTarget};

/// The rollout's notifications, as the manifest last named them.
pub(super) struct Notifications {
    /// Where the Secrets named by the manifest are mounted, one folder each.
    secrets: PathBuf,
    /// Started at the first round that names a target.
    notifier: Option<Notifier>,
    /// Where a commit of the source is shown (`https://host/org/repo/commit/`).
    commit_link: Option<String>,
    /// Resources moved by the steps done of the rollout under way.
    moved: Cell<u64>,
}

impl Notifications {
    pub(super) fn new(secrets: PathBuf, source_url: &str) -> Notifications {
        Notifications {
            secrets,
            notifier: None,
            commit_link: commit_link(source_url),
            moved: Cell::new(0),
        }
    }

    /// Sends to `wanted` from now on; returns why a target was left out.
    pub(super) async fn follow(&mut self, wanted: &[Notification]) -> Vec<String> {
        if wanted.is_empty() && self.notifier.is_none() {
            return Vec::new();
        }
        let mut targets = Vec::new();
        let mut left_out = Vec::new();
        for n in wanted {
            match self.resolve(n).await {
                Ok(target) => targets.push(target),
                Err(why) => left_out.push(format!("notification {} left out: {why}", n.name)),
            }
        }
        match &self.notifier {
            Some(notifier) => notifier.set_targets(targets),
            None => self.notifier = Some(Notifier::start(targets, Retry::default())),
        }
        left_out
    }

    /// The rollout under way has moved `n` resources in its healthy steps.
    pub(super) fn moved_so_far(&self, n: u64) {
        self.moved.set(n);
    }

    /// A step done moved `n` more.
    pub(super) fn moved_more(&self, n: u64) {
        self.moved.set(self.moved.get() + n);
    }

    /// Tells the targets that `kind` happened to the rollout `ro` of `object`.
    pub(super) fn send(
        &self,
        kind: Kind,
        object: &OperatorAssignment,
        ro: &RolloutStatus,
        message: &str,
    ) {
        let Some(notifier) = &self.notifier else {
            return;
        };
        notifier.send(Event {
            kind,
            assignment: format!(
                "{}/{}",
                object.namespace().unwrap_or_default(),
                object.name_any()
            ),
            revision: ro.revision.clone(),
            step: ro.current_step,
            total_steps: ro.total_steps,
            moved: self.moved.get(),
            message: message.to_string(),
            link: self
                .commit_link
                .as_ref()
                .filter(|_| is_commit(&ro.revision))
                .map(|base| format!("{base}{}", ro.revision)),
            at: status::now(),
        });
    }

    async fn resolve(&self, n: &Notification) -> Result<Target, String> {
        let name = n.name.clone();
        match (&n.webhook, &n.slack, &n.git_hub_status, &n.git_lab_status) {
            (Some(url), None, None, None) => Ok(Target::Webhook {
                name,
                url: self.url(url).await?,
            }),
            (None, Some(url), None, None) => Ok(Target::Slack {
                name,
                url: self.url(url).await?,
            }),
            (None, None, Some(s), None) => Ok(Target::GitHubStatus {
                name,
                api: s.api.clone(),
                repository: s.repository.clone(),
                token: self.secret(&s.token_secret_ref).await?,
            }),
            (None, None, None, Some(s)) => Ok(Target::GitLabStatus {
                name,
                api: s.api.clone(),
                project: s.repository.clone(),
                token: self.secret(&s.token_secret_ref).await?,
            }),
            _ => Err("name exactly one of webhook, slack, gitHubStatus, gitLabStatus".into()),
        }
    }

    async fn url(&self, target: &UrlTarget) -> Result<String, String> {
        match (&target.url, &target.url_secret_ref) {
            (Some(url), None) => Ok(url.clone()),
            (None, Some(key)) => self.secret(key).await,
            _ => Err("name exactly one of url, urlSecretRef".into()),
        }
    }

    /// The value of `key` of a mounted Secret, as text.
    async fn secret(&self, key: &SecretKeyRef) -> Result<String, String> {
        let dir = self.secrets.join(&key.name);
        if !dir.is_dir() {
            return Err(format!(
                "Secret {} is not mounted at {} (the chart's notifications.secrets mounts it)",
                key.name,
                dir.display()
            ));
        }
        let value = tokio::fs::read_to_string(dir.join(&key.key))
            .await
            .map_err(|e| format!("key {} of Secret {}: {e}", key.key, key.name))?;
        Ok(value.trim().to_string())
    }
}

/// Where the source's commits are shown: for an http(s) URL
/// (`https://host/org/repo.git`) or an scp-like SSH one
/// (`git@host:org/repo.git`), `https://host/org/repo/commit/`; none for
/// another (a local path).
fn commit_link(url: &str) -> Option<String> {
    let web = if let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    {
        // Credentials in the URL are never shown.
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        format!("https://{rest}")
    } else if let Some(rest) = url.strip_prefix("ssh://") {
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let (host, path) = rest.split_once('/')?;
        let host = host.split(':').next()?;
        format!("https://{host}/{path}")
    } else if let Some((user_host, path)) = url.split_once(':')
        && user_host.contains('@')
        && !url.contains("://")
    {
        let host = user_host.rsplit_once('@')?.1;
        format!("https://{host}/{path}")
    } else {
        return None;
    };
    Some(format!(
        "{}/commit/",
        web.trim_end_matches('/').trim_end_matches(".git")
    ))
}

/// Whether `revision` is a commit (a full SHA), not a generation.
fn is_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_link_to_the_web_page_of_the_source() {
        for (url, link) in [
            (
                "https://github.com/org/gitops.git",
                Some("https://github.com/org/gitops/commit/"),
            ),
            (
                "https://token:x@gitlab.example.com/team/gitops",
                Some("https://gitlab.example.com/team/gitops/commit/"),
            ),
            (
                "git@github.com:org/gitops.git",
                Some("https://github.com/org/gitops/commit/"),
            ),
            (
                "ssh://git@git.example.com:2222/org/gitops.git",
                Some("https://git.example.com/org/gitops/commit/"),
            ),
            ("file:///srv/gitops.git", None),
            ("/srv/gitops.git", None),
        ] {
            assert_eq!(commit_link(url).as_deref(), link, "{url}");
        }
        assert!(is_commit("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_commit("generation-3"));
    }
}
