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

#[test]
fn about_says_in_one_line_what_a_pointer_holds() {
    let (dir, resolver) = workspace();
    let about = |text: &str| resolver.about(&Pointer::parse(text).expect("pointer"));
    // Code: the first doc comment line, else the first line that is not an attribute.
    assert_eq!(about("test:budget::spend_never_exceeds").as_deref(), Some("Docs."));
    assert_eq!(about("repo:src/lib.rs#L2-L3").as_deref(), Some("line 2"));
    std::fs::write(
        dir.path().join("tests/plain.rs"),
        "#[test]\nfn checks() {\n    let x = 2;\n    assert_eq!(x, 2);\n}\n",
    )
    .expect("write");
    assert_eq!(about("test:plain::checks").as_deref(), Some("assert_eq!(x, 2);"), "a test: what it asserts");
    // A Markdown section: the first line under its heading; a file: its first line.
    assert_eq!(about("artifact:docs/SPEC.md#sec=Budget Rules").as_deref(), Some("rule one"));
    assert_eq!(about("artifact:docs/SPEC.md").as_deref(), Some("Spec"));
    // A diff: what it adds and removes.
    assert_eq!(about("diff:a..b#src/x.rs").as_deref(), Some("+1 -1 lines"));
    // Nothing to say: unresolved, sam, url.
    assert_eq!(about("repo:src/missing.rs#L1-L2"), None);
    assert_eq!(about("sam:msg:m1"), None);
    // One line, cut to MAX_ABOUT_CHARS.
    let long = format!("/// {}\nfn f() {{}}\n", "word ".repeat(60));
    let p = Pointer::parse("repo:src/lib.rs#L1-L2").expect("pointer");
    let line = crate::resolver::about(&p, &long).expect("a line");
    assert_eq!(line.chars().count(), MAX_ABOUT_CHARS);
    assert!(line.ends_with('…') && !line.contains('\n'), "{line}");
    let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@ impl Bucket {\n-a\n+b\n+c\n";
    let p = Pointer::parse("diff:a..b#x").expect("pointer");
    assert_eq!(crate::resolver::about(&p, diff).as_deref(), Some("+2 -1 lines in impl Bucket {"));
}
