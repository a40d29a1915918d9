//! Reading a Source's tree at a revision: a directory on pamd's host, or a
//! git repository fetched into a private bare mirror under the data dir.
//!
//! A tree ([`Tree`], read from a directory by [`super::tree`]) is the
//! manifest files under the source's path, each with a content id (here a
//! git blob id) so the sync can reuse what it parsed for files that did
//! not change. The revision is the commit SHA.
//!
//! # Security
//! The URL comes from a manifest, so git runs as pam's one hardened git
//! command ([`pam_git`], as the workers' does): only the `file`,
//! `http(s)`, `ssh` and `git` transports (never `ext::`, which runs
//! commands), no system or global config, nothing inherited that points
//! elsewhere, no terminal prompts, and a time limit ([`GIT_TIMEOUT`]:
//! shorter than a worker's, as a fetch holds the sync loop). Credentials
//! are never read from a manifest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::process::Command;

use super::roots::DirPolicy;
pub use super::tree::{
    read_dir, Tree, TreeFile, MAX_ENTRIES, MAX_FILES, MAX_FILE_BYTES, MAX_TREE_BYTES,
};

/// How long one git command may take: a fetch holds the sync loop, so
/// less than [`pam_git::TIMEOUT`] (a worker's clone of a whole repository).
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// How pamd authenticates to git remotes (pamd's `[git]` config, never a
/// manifest): a git-credential-store file (`https://user:token@host`, one
/// per line) for http(s), an ssh key and a known_hosts file for ssh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GitAuth {
    pub credentials_file: Option<PathBuf>,
    pub ssh_key_file: Option<PathBuf>,
    pub known_hosts_file: Option<PathBuf>,
}

impl GitAuth {
    /// The ssh command git runs: never a prompt; with the key and the
    /// known hosts when given (then only those, strictly).
    fn ssh_command(&self) -> String {
        let mut c = String::from("ssh -o BatchMode=yes");
        if let Some(key) = &self.ssh_key_file {
            c += &format!(" -o IdentitiesOnly=yes -i {}", shell_quote(key));
        }
        if let Some(hosts) = &self.known_hosts_file {
            c += &format!(
                " -o StrictHostKeyChecking=yes -o UserKnownHostsFile={}",
                shell_quote(hosts)
            );
        }
        c
    }
}

use pam_git::shell_quote;

/// Where the git Sources' mirrors live (`<data dir>/sources`) and how
/// they authenticate; which directories the directory Sources may read.
#[derive(Debug, Clone)]
pub struct Repos {
    dir: PathBuf,
    auth: GitAuth,
    /// pamd's `[sources]` config: the data dir alone unless
    /// [`Repos::with_dirs`] says more.
    pub dirs: DirPolicy,
}

impl Repos {
    pub fn new(data_dir: &Path, auth: GitAuth) -> Repos {
        Repos {
            dir: data_dir.join("sources"),
            auth,
            dirs: DirPolicy::new(data_dir, &[], super::roots::DEFAULT_SETTLE),
        }
    }

    /// The directories directory Sources may read, and their settle
    /// window.
    pub fn with_dirs(mut self, dirs: DirPolicy) -> Repos {
        self.dirs = dirs;
        self
    }

    /// The mirror of the Source with this id.
    pub fn mirror(&self, source: uuid::Uuid) -> GitMirror {
        GitMirror {
            dir: self.dir.join(format!("{source}.git")),
            auth: self.auth.clone(),
        }
    }
}

/// A git repository's private bare mirror (`<data dir>/sources/<uid>.git`).
pub struct GitMirror {
    dir: PathBuf,
    auth: GitAuth,
}

/// What a failed git command said, in one line: its `fatal:`/`error:`
/// lines and what comes before them (ssh's own complaint), without the
/// generic "Please make sure you have the correct access rights / and the
/// repository exists." hint that ends every failed fetch and names
/// nothing.
fn summarize(stderr: &str) -> String {
    const HINT: [&str; 2] = [
        "Please make sure you have the correct access rights",
        "and the repository exists.",
    ];
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !HINT.contains(l) && !l.starts_with("hint:"))
        .collect();
    // "Could not read from remote repository." only repeats that the
    // fetch failed: kept only when nothing else was said.
    let specific: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| *l != "fatal: Could not read from remote repository.")
        .collect();
    let chosen = if specific.is_empty() { lines } else { specific };
    let mut out = chosen
        .iter()
        .take(3)
        .copied()
        .collect::<Vec<_>>()
        .join("; ");
    if out.is_empty() {
        out = "failed".to_string();
    }
    if out.len() > 500 {
        let cut = (0..=500)
            .rev()
            .find(|i| out.is_char_boundary(*i))
            .unwrap_or(0);
        out.truncate(cut);
        out.push('…');
    }
    out
}

impl GitMirror {
    pub fn new(dir: PathBuf) -> GitMirror {
        GitMirror {
            dir,
            auth: GitAuth::default(),
        }
    }

    fn git(&self) -> Command {
        let mut std = pam_git::command(self.auth.credentials_file.as_deref());
        std.arg("--git-dir")
            .arg(&self.dir)
            .env("GIT_SSH_COMMAND", self.auth.ssh_command());
        let mut c = Command::from(std);
        c.kill_on_drop(true);
        c
    }

    /// `git fetch` with `args`.
    fn fetch_command(&self, args: &[&str]) -> Command {
        let mut c = self.git();
        c.args(["fetch", "--quiet", "--no-tags"]);
        c.args(args);
        c
    }

    async fn run(&self, mut c: Command, what: &str) -> anyhow::Result<Vec<u8>> {
        let out = tokio::time::timeout(GIT_TIMEOUT, c.output())
            .await
            .map_err(|_| anyhow::anyhow!("git {what}: no answer in {GIT_TIMEOUT:?}"))?
            .with_context(|| format!("run git {what} (is git installed?)"))?;
        if !out.status.success() {
            bail!(
                "git {what}: {}",
                summarize(&String::from_utf8_lossy(&out.stderr))
            );
        }
        Ok(out.stdout)
    }

    /// Fetches `reference` (a branch, a tag or a commit) of `url` and
    /// returns its commit SHA.
    pub async fn fetch(&self, url: &str, reference: &str) -> anyhow::Result<String> {
        // The manifest rule again: a Source stored before it was this
        // strict must not reach git either.
        if let Some(why) = pam_manifests::urls::git_url_problem(url) {
            bail!("git url: {why}");
        }
        if reference.starts_with('-') {
            bail!("a git ref must not start with '-'");
        }
        if !self.dir.join("HEAD").exists() {
            std::fs::create_dir_all(&self.dir)
                .with_context(|| format!("create {}", self.dir.display()))?;
            let mut c = self.git();
            c.args(["init", "--bare", "--quiet"]);
            self.run(c, "init").await?;
        }
        let c = self.fetch_command(&[
            "--force",
            "--",
            url,
            &format!("{reference}:refs/pam/source"),
        ]);
        match self.run(c, "fetch").await {
            Ok(_) => {}
            // A bare commit id is not a ref to map: fetch it as it is.
            Err(_) if reference.len() >= 7 && reference.chars().all(|c| c.is_ascii_hexdigit()) => {
                let c = self.fetch_command(&["--", url, reference]);
                self.run(c, "fetch").await?;
                let mut c = self.git();
                c.args(["update-ref", "refs/pam/source", "FETCH_HEAD"]);
                self.run(c, "update-ref").await?;
            }
            Err(e) => return Err(e),
        }
        let mut c = self.git();
        c.args(["rev-parse", "--verify", "refs/pam/source^{commit}"]);
        let out = self.run(c, "rev-parse").await?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    /// The manifest files under `path` in `commit`, each with its blob id.
    /// `known` gives the content of blobs read before (by id), so only new
    /// blobs are read from git.
    pub async fn tree(
        &self,
        commit: &str,
        path: &str,
        known: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> anyhow::Result<Tree> {
        let prefix = path.trim_matches('/');
        let mut c = self.git();
        c.args(["ls-tree", "-r", "-z", "--full-tree", "-l", commit]);
        if !prefix.is_empty() {
            c.arg("--").arg(prefix);
        }
        let out = self.run(c, "ls-tree").await?;
        let mut entries = Vec::new();
        for rec in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rec = String::from_utf8_lossy(rec);
            // `<mode> <type> <id> <size>\t<path>`
            let Some((head, file)) = rec.split_once('\t') else {
                continue;
            };
            let parts: Vec<&str> = head.split_whitespace().collect();
            if parts.len() < 4 || parts[1] != "blob" || parts[0] == "120000" {
                continue;
            }
            let rel = match file.strip_prefix(prefix) {
                Some(r) if !prefix.is_empty() => r.trim_start_matches('/'),
                _ => file,
            };
            if !pam_manifests::load::is_manifest_file(rel) {
                continue;
            }
            let size: u64 = parts[3].parse().unwrap_or(0);
            if size > MAX_FILE_BYTES {
                bail!(
                    "{rel}: {size} bytes, over the {MAX_FILE_BYTES}-byte limit of a manifest file"
                );
            }
            entries.push((rel.to_string(), parts[2].to_string()));
            if entries.len() > MAX_FILES {
                bail!("more than {MAX_FILES} manifest files under {path:?}");
            }
        }
        if entries.is_empty() && !prefix.is_empty() {
            let mut c = self.git();
            c.args(["cat-file", "-e", &format!("{commit}:{prefix}")]);
            if self.run(c, "cat-file").await.is_err() {
                bail!("path {path:?} does not exist at {commit}");
            }
        }
        let mut files = Vec::with_capacity(entries.len());
        let mut unknown = Vec::new();
        for (rel, id) in entries {
            match known(&id) {
                Some(content) => files.push(TreeFile {
                    path: rel,
                    id,
                    content,
                }),
                None => unknown.push((rel, id)),
            }
        }
        if !unknown.is_empty() {
            let blobs = self.read_blobs(&unknown).await?;
            for ((rel, id), bytes) in unknown.into_iter().zip(blobs) {
                let content = String::from_utf8(bytes)
                    .map_err(|_| anyhow::anyhow!("{rel}: not UTF-8 text"))?;
                files.push(TreeFile {
                    path: rel,
                    id,
                    content,
                });
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Tree {
            revision: commit.to_string(),
            files,
        })
    }

    /// Reads blobs by id with one `git cat-file --batch`.
    async fn read_blobs(&self, entries: &[(String, String)]) -> anyhow::Result<Vec<Vec<u8>>> {
        use std::process::Stdio;
        use tokio::io::AsyncWriteExt;
        let mut c = self.git();
        c.args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().context("run git cat-file")?;
        let mut stdin = child.stdin.take().expect("piped");
        let ids: String = entries.iter().map(|(_, id)| format!("{id}\n")).collect();
        let writer = tokio::spawn(async move {
            let r = stdin.write_all(ids.as_bytes()).await;
            drop(stdin);
            r
        });
        let out = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| anyhow::anyhow!("git cat-file: no answer in {GIT_TIMEOUT:?}"))??;
        writer.await??;
        if !out.status.success() {
            bail!(
                "git cat-file: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        // `<id> <type> <size>\n<bytes>\n` per blob.
        let data = out.stdout;
        let mut pos = 0;
        let mut blobs = Vec::with_capacity(entries.len());
        for (rel, _) in entries {
            let nl = data[pos..]
                .iter()
                .position(|b| *b == b'\n')
                .context("git cat-file: short output")?;
            let header = String::from_utf8_lossy(&data[pos..pos + nl]).to_string();
            pos += nl + 1;
            let size: usize = header
                .rsplit(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .with_context(|| format!("git cat-file: {rel}: {header}"))?;
            let end = pos + size;
            if end > data.len() {
                bail!("git cat-file: short output for {rel}");
            }
            blobs.push(data[pos..end].to_vec());
            pos = end + 1;
        }
        Ok(blobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::tree::tests::write;
    use pam_testkit::git::git;

    #[test]
    fn a_failed_git_command_says_what_failed() {
        let ssh = "ssh: Could not resolve hostname nope: Name or service not known\r\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n";
        assert_eq!(
            summarize(ssh),
            "ssh: Could not resolve hostname nope: Name or service not known"
        );
        assert_eq!(summarize(""), "failed");
    }

    #[tokio::test]
    async fn a_git_tree_at_a_ref_reading_only_new_blobs() {
        let repo = tempfile::tempdir().unwrap();
        git(repo.path(), &["init", "-q", "-b", "main"]);
        write(repo.path(), "m/a.yaml", "x: 1\n");
        write(repo.path(), "m/b.yaml", "y: 1\n");
        write(repo.path(), "other.yaml", "z: 1\n");
        git(repo.path(), &["add", "."]);
        git(repo.path(), &["commit", "-q", "-m", "one"]);
        let mirror = tempfile::tempdir().unwrap();
        let m = GitMirror::new(mirror.path().join("s.git"));
        let url = format!("file://{}", repo.path().display());
        let c1 = m.fetch(&url, "main").await.unwrap();
        let t1 = m.tree(&c1, "m", &|_| None).await.unwrap();
        let paths: Vec<_> = t1.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.yaml", "b.yaml"]);
        assert_eq!(t1.files[0].content, "x: 1\n");
        assert_eq!(t1.revision, c1);

        write(repo.path(), "m/b.yaml", "y: 2\n");
        git(repo.path(), &["commit", "-q", "-am", "two"]);
        let c2 = m.fetch(&url, "main").await.unwrap();
        assert_ne!(c1, c2);
        let old: std::collections::HashMap<String, String> = t1
            .files
            .iter()
            .map(|f| (f.id.clone(), f.content.clone()))
            .collect();
        let t2 = m
            .tree(&c2, "/m/", &|id| old.get(id).cloned())
            .await
            .unwrap();
        assert_eq!(t2.files[0].id, t1.files[0].id, "a.yaml unchanged");
        assert_eq!(t2.files[1].content, "y: 2\n");
        // A commit id is a ref too; a missing path is an error naming it.
        let again = m.fetch(&url, &c1).await.unwrap();
        assert_eq!(again, c1);
        let err = m.tree(&c1, "nope", &|_| None).await.unwrap_err();
        assert!(err.to_string().contains("\"nope\" does not exist"), "{err}");
        // The ext transport runs commands: refused before git runs.
        let err = m
            .fetch("EXT::sh -c touch% /tmp/pwned", "main")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("EXT:: transport"), "{err}");
        // A failed fetch names what failed, not git's closing hint.
        let missing = format!("file://{}/nope", repo.path().display());
        let err = m.fetch(&missing, "main").await.unwrap_err().to_string();
        assert!(
            err.contains("nope' does not appear to be a git repository"),
            "{err}"
        );
        assert!(!err.contains("the repository exists"), "{err}");
    }
}
