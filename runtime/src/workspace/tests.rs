//! The workspace index on strings and temporary workspaces: chunking per language, terms, refresh, search, refusals.

use super::chunk::WINDOW_LINES;
use super::*;

fn spans(chunks: &[Chunk]) -> Vec<(u32, u32, ChunkKind, Option<&str>)> {
    chunks.iter().map(|c| (c.start, c.end, c.kind, c.symbols.first().map(String::as_str))).collect()
}

#[test]
fn rust_is_cut_at_its_items_with_their_doc_comments() {
    let text = "\
use std::time::Duration;

/// How long a reservation is held.
pub const HOLD: Duration = Duration::from_secs(900);

/// A reservation.
#[derive(Debug)]
pub struct Reservation {
    pub sku: String,
}

impl Reservation {
    /// Holds it.
    pub fn hold(&self) -> Duration {
        HOLD
    }
}

fn helper() {}
";
    let chunks = chunk_file("src/stock.rs", text);
    assert_eq!(
        spans(&chunks),
        vec![
            (1, 1, ChunkKind::Window, None),
            (3, 4, ChunkKind::Const, Some("HOLD")),
            (6, 10, ChunkKind::Type, Some("Reservation")),
            (12, 17, ChunkKind::Impl, Some("Reservation")),
            (19, 19, ChunkKind::Function, Some("helper")),
        ]
    );
    assert_eq!(chunks[2].preview, "pub struct Reservation {");
    assert_eq!(chunks[1].pointer("src/stock.rs"), "repo:src/stock.rs#L3-L4");
}

#[test]
fn a_long_impl_is_cut_into_its_methods() {
    let mut text = String::from("impl Store {\n");
    for name in ["put", "get", "evict"] {
        text.push_str(&format!("    /// {name} it.\n    pub fn {name}(&self) {{\n"));
        for i in 0..30 {
            text.push_str(&format!("        let x{i} = {i};\n"));
        }
        text.push_str("    }\n\n");
    }
    text.push_str("}\n");
    let chunks = chunk_file("src/store.rs", &text);
    let methods: Vec<_> = chunks.iter().filter(|c| c.kind == ChunkKind::Method).collect();
    assert_eq!(methods.len(), 3, "{chunks:#?}");
    assert_eq!((methods[0].start, methods[0].end), (2, 34));
    assert_eq!(methods[1].symbols, vec!["get".to_owned(), "Store::get".to_owned()]);
    assert_eq!(methods[2].preview, "pub fn evict(&self) {");
    assert!(!methods[0].top_level);
    let head = chunks.iter().find(|c| c.kind == ChunkKind::Impl).expect("the impl's head");
    assert_eq!((head.start, head.end), (1, 1));
}

#[test]
fn python_functions_and_classes_keep_their_decorators() {
    let text = "\
import os

TIMEOUT = 30


@retry(3)
def fetch(url, timeout=TIMEOUT):
    return os.get(url, timeout)


class Client:
    def __init__(self):
        self.t = 1
";
    let chunks = chunk_file("app/http.py", text);
    assert_eq!(
        spans(&chunks),
        vec![
            (1, 3, ChunkKind::Window, None),
            (6, 8, ChunkKind::Function, Some("fetch")),
            (11, 13, ChunkKind::Type, Some("Client")),
        ]
    );
    assert_eq!(chunks[1].preview, "def fetch(url, timeout=TIMEOUT):");
}

#[test]
fn typescript_javascript_and_go_items() {
    let ts = "export function reserve(sku: string): number {\n  return 1;\n}\n\nexport interface Hold {\n  ttl: number;\n}\n";
    let chunks = chunk_file("web/stock.ts", ts);
    assert_eq!(
        spans(&chunks),
        vec![(1, 3, ChunkKind::Function, Some("reserve")), (5, 7, ChunkKind::Type, Some("Hold"))]
    );
    let js = "class Cart {\n  total() { return 0; }\n}\nconst LIMIT = 5;\n";
    let chunks = chunk_file("web/cart.js", js);
    assert_eq!(spans(&chunks), vec![(1, 3, ChunkKind::Type, Some("Cart")), (4, 4, ChunkKind::Const, Some("LIMIT"))]);
    let go = "package stock\n\n// Hold holds.\nfunc Hold(sku string) int {\n\treturn 1\n}\n\ntype Store struct {\n\tn int\n}\n\nfunc (s *Store) Put() {}\n";
    let chunks = chunk_file("stock/stock.go", go);
    assert_eq!(
        spans(&chunks),
        vec![
            (1, 1, ChunkKind::Window, None),
            (3, 6, ChunkKind::Function, Some("Hold")),
            (8, 10, ChunkKind::Type, Some("Store")),
            (12, 12, ChunkKind::Method, Some("Put")),
        ]
    );
}

#[test]
fn markdown_sections_toml_tables_yaml_keys_and_plain_windows() {
    let md = "# Guide\nIntro.\n\n## Install\nRun it.\n\n## Use\nCall it.\n\n## Use\nAgain.\n";
    let chunks = chunk_file("docs/guide.md", md);
    assert_eq!(chunks.len(), 4);
    assert_eq!(chunks[1].pointer("docs/guide.md"), "artifact:docs/guide.md#sec=Install");
    // Not a leaf (it has subsections) and a repeated heading: named by lines.
    assert_eq!(chunks[0].pointer("docs/guide.md"), "artifact:docs/guide.md#L1-L3");
    assert_eq!(chunks[2].pointer("docs/guide.md"), "artifact:docs/guide.md#L7-L9");
    assert_eq!(chunks[1].preview, "## Install");
    // The resolver reads exactly the chunk's lines for a named section.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("docs")).expect("mkdir");
    std::fs::write(dir.path().join("docs/guide.md"), md).expect("write");
    let resolver = Resolver::new(dir.path()).expect("resolver");
    let read = resolver.read_unpinned(&Pointer::parse("artifact:docs/guide.md#sec=Install").expect("p"), &());
    assert_eq!(read.expect("resolves").trim_end(), "## Install\nRun it.");

    let toml = "name = \"x\"\n\n[server]\nport = 1\n\n[[workers]]\nid = 2\n";
    let chunks = chunk_file("cfg.toml", toml);
    assert_eq!(
        spans(&chunks),
        vec![
            (1, 1, ChunkKind::Window, None),
            (3, 4, ChunkKind::Table, Some("server")),
            (6, 7, ChunkKind::Table, Some("workers")),
        ]
    );
    let yaml = "server:\n  port: 1\nworkers:\n  - id: 2\n";
    let chunks = chunk_file("cfg.yaml", yaml);
    assert_eq!(
        spans(&chunks),
        vec![(1, 2, ChunkKind::Table, Some("server")), (3, 4, ChunkKind::Table, Some("workers"))]
    );

    let text: String = (1..=120).map(|i| format!("line {i}\n")).collect();
    let chunks = chunk_file("notes.txt", &text);
    assert_eq!(spans(&chunks)[..2], [(1, 50, ChunkKind::Window, None), (51, 100, ChunkKind::Window, None)]);
    assert!(chunks.iter().all(|c| c.end - c.start < WINDOW_LINES));
    assert_eq!(chunks.last().map(|c| c.end), Some(120));
}

#[test]
fn terms_split_identifiers_and_stem() {
    assert_eq!(
        terms::query_terms("How long is a stock reservation held for an unpaid order by default?"),
        vec!["long", "stock", "reserv", "held", "unpaid", "order", "default"]
    );
    let text = terms::index_text("const DEFAULT_HOLD_SECS: u64 = 900; fn releaseReservations()");
    for term in ["default", "hold", "sec", "default_hold_secs", "releas", "reserv", "releasereserv", "900"] {
        assert!(text.split(' ').any(|t| t == term), "{term} in {text:?}");
    }
}

#[test]
fn a_word_and_its_inflections_are_one_term() {
    // The memory's light stem gave `alternat` and `alternative`, `fil` and `file`: a question's words missed the
    // code's. Snowball brings each family to one stem; identifiers are kept whole beside their parts.
    for family in
        [&["alternatives", "alternates", "alternate"][..], &["files", "file"], &["ignored", "ignore", "ignores"]]
    {
        let stems: Vec<Vec<String>> = family.iter().map(|w| terms::query_terms(w)).collect();
        assert!(stems.windows(2).all(|w| w[0] == w[1]), "{family:?}: {stems:?}");
    }
    assert_eq!(terms::query_terms("max_depth"), vec!["max", "depth", "max_depth"]);
}

#[test]
fn a_query_drops_the_words_of_asking_unless_nothing_else_is_left() {
    assert_eq!(terms::query_terms("Why does the walk still happen instead of stopping?"), vec!["walk", "stop"]);
    assert_eq!(terms::query_terms("really, actually?"), vec!["realli", "actual"]);
}

#[test]
fn tests_are_known_by_their_path_or_their_module() {
    let none: &[String] = &[];
    for path in [
        "tests/walk.rs",
        "src/test/a.py",
        "web/__tests__/x.ts",
        "pkg/walk_test.go",
        "test_api.py",
        "a.spec.js",
        "b.test.tsx",
    ] {
        assert!(is_test(path, none), "{path}");
    }
    let symbols = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    assert!(is_test("src/glob.rs", &symbols(&["literal", "tests::literal"])));
    assert!(is_test("jwt/api.py", &symbols(&["TestDecode::test_exp"])));
    assert!(is_test("jwt/api.py", &symbols(&["test_exp"])));
    for (path, names) in
        [("src/latest.rs", &["contest"][..]), ("src/attestation.rs", &["Attest::verify"]), ("src/walk.rs", &[])]
    {
        assert!(!is_test(path, &symbols(names)), "{path} {names:?}");
    }
}

#[test]
fn ranking_weights_are_read_from_key_value_pairs() {
    assert_eq!(Ranking::parse("").expect("empty"), Ranking::default());
    let r = Ranking::parse("names=2, cosine=0.3,tests=1").expect("parse");
    assert_eq!(r, Ranking { names_boost: 2.0, cosine: 0.3, tests: 1.0 });
    for bad in ["names", "names=x", "names=-1", "boost=2", "cosine=inf"] {
        assert!(Ranking::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_test_ranks_below_the_code_it_tests_unless_the_query_asks_for_tests() {
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(
        ws.path(),
        "src/lib.rs",
        "/// Rounds a refund to whole cents, half to even.\npub fn round_refund(cents: f64) -> i64 {\n    cents.round_ties_even() as i64\n}\n",
    );
    write(
        ws.path(),
        "tests/refund.rs",
        "#[test]\nfn refund_rounding() {\n    // refund refund rounds rounds half even cents cents\n    assert_eq!(round_refund(2.5), 2);\n}\n",
    );
    let mut index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("open");
    index.refresh(&crate::Silent).expect("refresh");
    let paths = |index: &mut WorkspaceIndex, q: &str| -> Vec<String> {
        index.search(q, 2, Stages::Hash, &|_| true).expect("search").hits.into_iter().map(|h| h.path).collect()
    };
    assert_eq!(paths(&mut index, "how are refund cents rounded, half even?"), ["src/lib.rs", "tests/refund.rs"]);
    assert_eq!(paths(&mut index, "which test checks refund cents rounded half even?")[0], "tests/refund.rs");
    index.set_ranking(Ranking { tests: 1.0, ..Ranking::default() });
    assert_eq!(paths(&mut index, "how are refund cents rounded, half even?")[0], "tests/refund.rs");
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[test]
fn a_refresh_reindexes_only_what_changed_and_search_finds_it() {
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(
        ws.path(),
        "src/stock.rs",
        "/// Minutes a stock reservation is held for an unpaid order.\npub const RESERVATION_HOLD_MINUTES: u32 = 15;\n",
    );
    write(ws.path(), "src/billing.rs", "pub fn capture_payment(order: &str) -> bool {\n    !order.is_empty()\n}\n");
    write(ws.path(), "README.md", "# Shop\n\n## Billing\nPayments are captured once.\n");
    write(ws.path(), "target/junk.rs", "pub fn reservation_junk() {}\n");
    write(ws.path(), ".gitignore", "target/\n");
    let mut index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("open");
    let first = index.refresh(&crate::Silent).expect("refresh");
    assert!(first.rebuilt);
    assert_eq!((first.files, first.indexed), (3, 3), "{first:?}");

    let found = index.search("how long is a stock reservation held", 5, Stages::Hash, &|_| true).expect("search");
    assert_eq!(found.hits[0].pointer, "repo:src/stock.rs#L1-L2");
    assert_eq!(found.hits[0].preview, "pub const RESERVATION_HOLD_MINUTES: u32 = 15;");
    assert!(found.hits.iter().all(|h| !h.path.starts_with("target/")), "ignored files are not indexed");

    // Nothing changed: nothing re-read.
    let again = index.refresh(&crate::Silent).expect("refresh");
    assert_eq!((again.indexed, again.unchanged, again.removed), (0, 3, 0));

    // One file changed, one removed, one added: only those are touched.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(ws.path(), "src/billing.rs", "pub fn refund_payment(order: &str) -> bool {\n    order.len() > 1\n}\n");
    std::fs::remove_file(ws.path().join("README.md")).expect("rm");
    write(ws.path(), "src/cart.py", "def add_item(cart, sku):\n    cart.append(sku)\n");
    let third = index.refresh(&crate::Silent).expect("refresh");
    assert_eq!((third.indexed, third.unchanged, third.removed), (2, 1, 1), "{third:?}");
    assert!(
        index
            .search("capture", 5, Stages::Hash, &|_| true)
            .expect("search")
            .hits
            .iter()
            .all(|h| h.path != "src/billing.rs")
    );
    let refund = index.search("refund", 5, Stages::Hash, &|_| true).expect("search");
    assert_eq!(refund.hits[0].path, "src/billing.rs");

    // Reopened from disk, the index answers the same.
    drop(index);
    let index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("reopen");
    let stats = index.stats().expect("stats");
    assert_eq!((stats.files, stats.languages.get("python").copied()), (3, Some(1)));
    let listed = index.list("src").expect("list");
    assert_eq!(
        listed.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
        ["src/billing.rs", "src/cart.py", "src/stock.rs"]
    );
    assert_eq!(listed[0].symbols, ["refund_payment"]);
    assert_eq!(index.list("src/*.py").expect("glob").len(), 1);
}

#[test]
fn bad_queries_and_ks_are_refused_with_what_to_do() {
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(ws.path(), "a.rs", "fn a() {}\n");
    let mut index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("open");
    index.refresh(&crate::Silent).expect("refresh");
    let err = index.search("the of a", 5, Stages::Hash, &|_| true).expect_err("no words");
    assert_eq!(err.violation().code, ErrorCode::ArgumentInvalid);
    let err = index.search("alpha", 0, Stages::Hash, &|_| true).expect_err("k 0");
    assert!(err.to_string().contains("ask for 1 to 50"), "{err}");
}

#[cfg(unix)]
#[test]
fn symlinks_and_hard_links_out_of_the_workspace_are_not_indexed() {
    let ws = tempfile::tempdir().expect("workspace");
    let outside = tempfile::tempdir().expect("outside");
    let cache = tempfile::tempdir().expect("cache");
    write(outside.path(), "secret.txt", "password hunter2 zebra\n");
    write(ws.path(), "ok.txt", "plain text\n");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("link.txt")).expect("symlink");
    std::fs::hard_link(outside.path().join("secret.txt"), ws.path().join("hard.txt")).expect("hard link");
    let mut index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("open");
    let done = index.refresh(&crate::Silent).expect("refresh");
    assert_eq!(done.files, 1, "{done:?}");
    let found = index.search("zebra", 5, Stages::Hash, &|_| true).expect("search");
    assert!(found.hits.is_empty(), "{found:?}");
}

/// Every line that says something is in some chunk.
fn assert_covered(name: &str, text: &str, chunks: &[Chunk]) {
    for (n, line) in text.lines().enumerate() {
        let line_no = u32::try_from(n + 1).expect("line");
        if line.chars().any(char::is_alphanumeric) {
            assert!(
                chunks.iter().any(|c| c.start <= line_no && line_no <= c.end),
                "{name}: line {line_no} in no chunk"
            );
        }
    }
}

/// The files that once ended the process inside a grammar's scanner (a SIGABRT no Rust code can catch: a YAML
/// sequence of 300 `- ` on one line, a 300-level map, a Python f-string 520 levels deep) are chunked, in windows.
/// Run in this process on purpose: were one to abort again, the test binary dies and the suite fails.
#[test]
fn the_chunker_crash_corpus_is_cut_without_ending_the_process() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chunk-crashes");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        let text = std::fs::read_to_string(&path).expect("read");
        let chunks = chunk_file(&name, &text);
        assert_covered(&name, &text, &chunks);
        seen += 1;
    }
    assert!(seen >= 3, "the corpus is missing: {}", dir.display());
}

/// Containers nested 20,000 deep (Rust modules, TypeScript namespaces) are cut on a thread with a
/// 256 KiB stack: the chunker walks the tree with a stack of its own, not by recursion.
#[test]
fn twenty_thousand_nested_containers_fit_a_small_stack() {
    const DEPTH: usize = 20_000;
    let nested = |open: &dyn Fn(usize) -> String, close: &str| {
        let mut text = String::new();
        for i in 0..DEPTH {
            text.push_str(&open(i));
        }
        text.push_str("fn inner() {}\n");
        for _ in 0..DEPTH {
            text.push_str(close);
        }
        text
    };
    let cases = [
        ("deep.rs", nested(&|i| format!("mod m{i} {{\n"), "}\n")),
        ("deep.ts", nested(&|i| format!("namespace n{i} {{\n"), "}\n")),
    ];
    for (name, text) in cases {
        let worker = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let chunks = chunk_file(name, &text);
                assert_covered(name, &text, &chunks);
                chunks.len()
            })
            .expect("spawn");
        let n = worker.join().expect("no overflow");
        assert!(n > 0, "{name}");
    }
}

/// The index's `.write.lock` is opened like every file lessrt writes: a dangling link left in its place is not
/// followed (nothing is created at its target) and a FIFO is refused without blocking the opener.
#[cfg(unix)]
#[test]
fn the_write_lock_is_never_a_link_or_a_fifo() {
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(ws.path(), "a.rs", "fn a() {}\n");
    let linked = cache.path().join("linked");
    std::fs::create_dir_all(&linked).expect("mkdir");
    let victim = cache.path().join("victim");
    std::os::unix::fs::symlink(&victim, linked.join(".write.lock")).expect("symlink");
    let opened = WorkspaceIndex::open_in(ws.path(), &linked).map(drop);
    assert!(!victim.exists(), "a file was created at the link's target");
    let err = opened.expect_err("a link as the lock is refused");
    assert!(err.to_string().contains("symlink"), "{err}");

    let fifo_dir = cache.path().join("fifo");
    std::fs::create_dir_all(&fifo_dir).expect("mkdir");
    let made = std::process::Command::new("mkfifo").arg(fifo_dir.join(".write.lock")).status().expect("mkfifo");
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let root = ws.path().to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(WorkspaceIndex::open_in(&root, &fifo_dir).map(drop).map_err(|e| e.to_string()));
    });
    let answer = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the open returned: a FIFO blocked it");
    let err = answer.expect_err("a FIFO as the lock is refused");
    assert!(err.contains("not a regular file"), "{err}");
}

/// An index directory holds the index of one workspace: opened for another (`--index-dir` reused), it is refused,
/// saying whose it is and what to do, instead of answering with the other workspace's text.
#[test]
fn an_index_directory_of_another_workspace_is_refused() {
    let a = tempfile::tempdir().expect("workspace a");
    let b = tempfile::tempdir().expect("workspace b");
    let cache = tempfile::tempdir().expect("cache");
    write(a.path(), "a.rs", "pub fn alpha_only() {}\n");
    write(b.path(), "a.rs", "pub fn beta_only() {}\n");
    let mut index = WorkspaceIndex::open_in(a.path(), cache.path()).expect("open a");
    index.refresh(&crate::Silent).expect("refresh a");
    drop(index);
    let err = WorkspaceIndex::open_in(b.path(), cache.path()).expect_err("a's index is not b's");
    assert_eq!(err.violation().code, ErrorCode::ArgumentInvalid, "{err}");
    let a_root = a.path().canonicalize().expect("canonical");
    assert!(err.to_string().contains(&a_root.display().to_string()), "{err}");
    assert!(err.to_string().contains("--index-dir"), "{err}");
    let index = WorkspaceIndex::open_in(a.path(), cache.path()).expect("a's own index opens");
    assert_eq!(index.stats().expect("stats").files, 1);
}

/// A query is capped (a 100,000-word one is refused with what to do, not searched for seconds) and its terms are
/// kept once each, in their order of first appearance.
#[test]
fn a_long_query_is_refused_and_terms_are_kept_once_in_order() {
    assert_eq!(terms::query_terms("zeta alpha zeta beta alpha gamma"), ["zeta", "alpha", "beta", "gamma"]);
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(ws.path(), "a.rs", "pub fn alpha_beta() {}\n");
    let mut index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("open");
    index.refresh(&crate::Silent).expect("refresh");
    let words: String = (0..100_000).map(|i| format!("w{i} ")).collect();
    let err = index.search(&words, 5, Stages::Hash, &|_| true).expect_err("too long");
    assert_eq!(err.violation().code, ErrorCode::ArgumentInvalid, "{err}");
    assert!(err.to_string().contains("at most 2000 characters"), "{}", &err.to_string()[..200]);
    let at_cap = format!("alpha {}", "x".repeat(2000 - 6));
    assert_eq!(at_cap.chars().count(), 2000);
    index.search(&at_cap, 5, Stages::Hash, &|_| true).expect("a query of 2000 characters is searched");
}

/// Search previews, symbols and pointers never show a secret a file holds (`DATABASE_PASSWORD = "…"`, a heading
/// `Deploy password: …`): they are redacted as summaries are. The index is its owner's only (0700/0600).
#[cfg(unix)]
#[test]
fn previews_and_pointers_are_redacted_and_the_index_is_private() {
    use std::os::unix::fs::PermissionsExt;
    const SECRET: &str = "Xk29vLq8zzQ";
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(ws.path(), "settings.py", &format!("DATABASE_PASSWORD = \"{SECRET}\"\n"));
    write(ws.path(), "DEPLOY.md", &format!("# Deploy password: {SECRET}\n\nRun the deploy script.\n"));
    let dir = cache.path().join("index").join("abc");
    let mut index = WorkspaceIndex::open_in(ws.path(), &dir).expect("open");
    index.refresh(&crate::Silent).expect("refresh");
    let found = index.search("database password deploy", 10, Stages::Hash, &|_| true).expect("search");
    assert!(found.hits.len() >= 2, "{found:?}");
    for hit in &found.hits {
        let shown = format!("{} {} {:?}", hit.line(), hit.pointer, hit.symbols);
        assert!(!shown.contains(SECRET), "{shown}");
        index.read(&hit.pointer).expect("the pointer still resolves");
    }
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "the index directory");
    assert_eq!(mode(&dir.join(crate::layout::WORKSPACE_DB)), 0o600, "the index database");
}

/// A Markdown file of 100,000 headings is cut in one pass (each heading's uniqueness and level were once compared
/// with every other heading's: ten billion comparisons).
#[test]
fn a_hundred_thousand_headings_are_cut_in_one_pass() {
    let text: String = (0..100_000).map(|i| format!("## h{}\n", i % 7)).collect();
    let chunks = chunk_file("many.md", &text);
    assert_eq!(chunks.len(), 100_000);
    assert!(chunks.iter().all(|c| c.section.is_none() && c.top_level));
}

/// The search library's own lock files are checked before it opens the index (an outside attack on issue 61's
/// fixes: a FIFO at `.tantivy-meta.lock` hung every search, a dangling link created a file at its target): anything
/// but a regular file there is refused, saying to remove it, without blocking.
#[cfg(unix)]
#[test]
fn the_search_librarys_lock_files_are_never_links_or_fifos() {
    let ws = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    write(ws.path(), "a.rs", "fn a() {}\n");
    let mut index = WorkspaceIndex::open_in(ws.path(), cache.path()).expect("open");
    index.refresh(&crate::progress::Silent).expect("index");
    drop(index);
    let tantivy = cache.path().join(crate::layout::WORKSPACE_TANTIVY_DIR);
    for name in [".tantivy-meta.lock", ".tantivy-writer.lock"] {
        let lock = tantivy.join(name);
        let _ = std::fs::remove_file(&lock);
        let made = std::process::Command::new("mkfifo").arg(&lock).status().expect("mkfifo");
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let (root, dir) = (ws.path().to_owned(), cache.path().to_owned());
        std::thread::spawn(move || {
            let _ = tx.send(WorkspaceIndex::open_in(&root, &dir).map(drop).map_err(|e| e.to_string()));
        });
        let answer = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the open returned: a FIFO blocked it");
        let err = answer.expect_err("a FIFO as the lock is refused");
        assert!(err.contains("not a regular file") && err.contains("remove it"), "{err}");
        std::fs::remove_file(&lock).expect("unfifo");
        let victim = cache.path().join("victim");
        std::os::unix::fs::symlink(&victim, &lock).expect("symlink");
        assert!(WorkspaceIndex::open_in(ws.path(), cache.path()).is_err(), "a link as the lock is refused");
        assert!(!victim.exists(), "nothing created at the link's target");
        std::fs::remove_file(&lock).expect("unlink");
    }
    WorkspaceIndex::open_in(ws.path(), cache.path()).expect("opens again once removed");
}
