//! Build script of the `lessrt` binary: stamps the git commit it was built from into `--version`
//! (`LESSRT_GIT_COMMIT`: `git rev-parse --short HEAD`, or `unknown` outside a git checkout, e.g. a crate
//! tarball), and asks cargo to run again when HEAD moves (a commit, a checkout, a rebase).

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LESSRT_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // HEAD names a branch whose ref file changes on every commit; a worktree has its own HEAD and shares the refs.
    let (Some(git_dir), Some(common_dir)) = (git(&["rev-parse", "--git-dir"]), git(&["rev-parse", "--git-common-dir"]))
    else {
        return;
    };
    let (git_dir, common_dir) = (PathBuf::from(git_dir), PathBuf::from(common_dir));
    let head = git_dir.join("HEAD");
    watch(&head);
    if let Ok(text) = std::fs::read_to_string(&head)
        && let Some(reference) = text.trim().strip_prefix("ref: ")
    {
        watch(&common_dir.join(reference));
        watch(&git_dir.join(reference));
    }
    watch(&common_dir.join("packed-refs"));
}

/// Reruns the script when `path` changes (only paths that exist: a missing one would rerun it every build).
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
