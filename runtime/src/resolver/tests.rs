//! Resolver tests on a workspace built in a temporary directory.

use super::*;

struct Sam;

impl SamSource for Sam {
    fn lookup(&self, namespace: &str, key: &str) -> Option<String> {
        (namespace == "msg" && key == "m1").then(|| "{\"type\":\"question\"}".to_owned())
    }
}

fn workspace() -> (tempfile::TempDir, Resolver) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::create_dir_all(root.join("tests")).expect("mkdir");
    std::fs::create_dir_all(root.join("docs")).expect("mkdir");
    std::fs::create_dir_all(root.join("diffs")).expect("mkdir");
    std::fs::write(root.join("src/lib.rs"), "line 1\nline 2\nline 3\nline 4\n").expect("write");
    std::fs::write(
        root.join("docs/SPEC.md"),
        "# Spec\nintro\n## Budget Rules\nrule one\n### Detail\ndetail\n## Other\nother\n",
    )
    .expect("write");
    std::fs::write(
        root.join("tests/budget.rs"),
        "//! t\n\n/// Docs.\n#[test]\nfn spend_never_exceeds() {\n    let x = { 1 };\n    assert_eq!(x, 1);\n}\n\nfn other() {}\n",
    )
    .expect("write");
    std::fs::write(
        root.join("diffs/a..b.diff"),
        "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-line 1\n+line one\ndiff --git a/src/x.rs b/src/x.rs\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1 +1 @@\n-x\n+y\n",
    )
    .expect("write");
    let resolver = Resolver::new(root).expect("resolver");
    (dir, resolver)
}

fn resolve(resolver: &mut Resolver, text: &str) -> Result<String, Violation> {
    resolver.resolve(&Pointer::parse(text).expect("pointer"), &Sam).map(|r| r.content)
}

#[test]
fn resolves_every_type() {
    let (_dir, mut resolver) = workspace();
    assert_eq!(resolve(&mut resolver, "repo:src/lib.rs#L2-L3").expect("repo"), "line 2\nline 3\n");
    assert_eq!(resolve(&mut resolver, "repo:src/lib.rs#L3-L99").expect("clamped"), "line 3\nline 4\n");
    assert_eq!(
        resolve(&mut resolver, "artifact:docs/SPEC.md#sec=Budget Rules").expect("section"),
        "## Budget Rules\nrule one\n### Detail\ndetail\n"
    );
    let hunk = resolve(&mut resolver, "diff:a..b#src/x.rs").expect("diff");
    assert!(hunk.starts_with("diff --git a/src/x.rs") && hunk.contains("+y") && !hunk.contains("line one"));
    let test = resolve(&mut resolver, "test:budget::spend_never_exceeds").expect("test");
    assert!(test.starts_with("/// Docs.\n#[test]\nfn spend_never_exceeds()"), "{test}");
    assert!(test.ends_with("}\n") && !test.contains("fn other"));
    assert_eq!(resolve(&mut resolver, "sam:msg:m1").expect("sam"), "{\"type\":\"question\"}");
}

#[test]
fn every_resolution_carries_the_blake3_of_its_content() {
    let (_dir, mut resolver) = workspace();
    let pointer = Pointer::parse("repo:src/lib.rs#L1").expect("pointer");
    let resolved = resolver.resolve(&pointer, &()).expect("resolves");
    assert_eq!(resolved.digest, Digest::of(b"line 1\n"));
    assert_eq!(resolved.pointer.digest(), Some(resolved.digest));
}

#[test]
fn refuses_what_does_not_resolve() {
    let (dir, mut resolver) = workspace();
    for text in [
        "repo:src/missing.rs",
        "repo:src/lib.rs#L9",
        "artifact:docs/SPEC.md#sec=Nope",
        "diff:a..b#src/untouched.rs",
        "test:budget::missing",
        "sam:msg:nope",
        "url:https://example.org",
    ] {
        let err = resolve(&mut resolver, text).expect_err(text);
        assert_eq!(err.code, ErrorCode::PointerUnresolved, "{text}: {err}");
    }
    // A symlink inside the workspace that leads out of it.
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "secret").expect("write");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("src/link.rs")).expect("symlink");
    let err = resolve(&mut resolver, "repo:src/link.rs").expect_err("symlink escape");
    assert_eq!(err.code, ErrorCode::PointerUnresolved);
    assert!(err.message.contains("outside the workspace"), "{}", err.message);
}

#[test]
fn changed_content_is_a_digest_mismatch() {
    let (dir, mut resolver) = workspace();
    let first = resolver.resolve(&Pointer::parse("repo:src/lib.rs#L1-L2").expect("p"), &()).expect("first read");
    std::fs::write(dir.path().join("src/lib.rs"), "LINE 1 changed\nline 2\n").expect("rewrite");
    let err = resolver.resolve(&Pointer::parse("repo:src/lib.rs#L1-L2").expect("p"), &()).expect_err("changed");
    assert_eq!(err.code, ErrorCode::DigestMismatch);
    // A pointer that carries the old digest is refused by a fresh resolver too.
    let mut fresh = Resolver::new(dir.path()).expect("resolver");
    let err = fresh.resolve(&first.pointer, &()).expect_err("stale digest");
    assert_eq!(err.code, ErrorCode::DigestMismatch);
}
