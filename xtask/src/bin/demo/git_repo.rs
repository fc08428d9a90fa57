//! The demo's Git repository: a bare "remote" the reconciler follows and a
//! clone where `kubectl camelk rollout` commits.

use std::path::{Path, PathBuf};

use crate::path_str;

/// A bare "remote" and a clone with a committer identity of its own.
pub(crate) struct GitRepo {
    pub(crate) remote: PathBuf,
    pub(crate) work: PathBuf,
    repo: git2::Repository,
}

impl GitRepo {
    pub(crate) fn create(dir: &Path) -> anyhow::Result<GitRepo> {
        let remote = dir.join("remote.git");
        let work = dir.join("work");
        let bare = git2::Repository::init_bare(&remote)?;
        bare.set_head("refs/heads/main")?;
        let repo = git2::Repository::init(&work)?;
        repo.set_head("refs/heads/main")?;
        let mut config = repo.config()?;
        config.set_str("user.name", "camelk demo")?;
        config.set_str("user.email", "demo@camelk.invalid")?;
        repo.remote("origin", path_str(&remote)?)?;
        Ok(GitRepo { remote, work, repo })
    }

    /// Commits the manifest on `main` and pushes it; returns the SHA.
    pub(crate) fn commit_and_push(&self, text: &str, message: &str) -> anyhow::Result<String> {
        std::fs::write(self.work.join("operator-assignment.yaml"), text)?;
        let mut index = self.repo.index()?;
        index.add_path(Path::new("operator-assignment.yaml"))?;
        index.write()?;
        let tree = self.repo.find_tree(index.write_tree()?)?;
        let sig = self.repo.signature()?;
        let id = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &[])?;
        self.push("refs/heads/main:refs/heads/main")?;
        Ok(id.to_string())
    }

    fn push(&self, refspec: &str) -> anyhow::Result<()> {
        self.repo.find_remote("origin")?.push(&[refspec], None)?;
        Ok(())
    }

    pub(crate) fn read_branch(&self, branch: &str) -> anyhow::Result<String> {
        let commit = self
            .repo
            .find_branch(branch, git2::BranchType::Local)?
            .get()
            .peel_to_commit()?;
        let blob = commit
            .tree()?
            .get_path(Path::new("operator-assignment.yaml"))?
            .to_object(&self.repo)?
            .peel_to_blob()?;
        Ok(String::from_utf8_lossy(blob.content()).into_owned())
    }

    /// Fast-forwards `main` to `branch` and pushes it, as merging the pull request would.
    pub(crate) fn merge(&self, branch: &str) -> anyhow::Result<String> {
        let head = self
            .repo
            .find_branch(branch, git2::BranchType::Local)?
            .get()
            .peel_to_commit()?
            .id();
        self.repo
            .reference("refs/heads/main", head, true, "merge the rollout")?;
        self.push("refs/heads/main:refs/heads/main")?;
        Ok(head.to_string())
    }
}
