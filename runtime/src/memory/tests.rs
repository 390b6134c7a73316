//! Memory tests: recall through the real tantivy index over the real SQLite store.

use super::*;
use crate::engram::EngramKind;
use crate::pointer::Pointer;

fn engram(kind: EngramKind, claim: &str, pointer: &str, tags: &[&str]) -> Valid<Engram> {
    let mut builder = Engram::builder(kind, claim, "agent")
        .pointer(Pointer::parse(pointer).expect("pointer"))
        .created_at("2026-01-01T00:00:00Z");
    for tag in tags {
        builder = builder.tag(*tag);
    }
    builder.build().expect("engram")
}

fn facts() -> Vec<Valid<Engram>> {
    vec![
        engram(
            EngramKind::Fact,
            "The dev server listens on port 5173 unless KELP_PORT is set.",
            "repo:src/config.rs#L13-L14",
            &["port"],
        ),
        engram(
            EngramKind::Fact,
            "Migrations must run before seeding: the seed data needs sightings.depth_m.",
            "repo:src/db/migrate.rs#L1-L5",
            &["migrations"],
        ),
        engram(
            EngramKind::Fact,
            "The cache TTL defaults to 300 seconds (KELP_CACHE_TTL_SECS overrides it).",
            "repo:src/cache.rs#L7-L8",
            &["cache"],
        ),
        engram(
            EngramKind::Decision,
            "Run migrate before seed in the dev command.",
            "repo:src/main.rs#L37-L45",
            &["migrations"],
        ),
    ]
}

fn ids(recall: &Recall) -> Vec<&str> {
    recall.hits.iter().map(|h| h.stored.engram.id.as_str()).collect()
}

#[test]
fn recall_finds_the_engram_a_question_is_about() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open(dir.path()).expect("open");
    let facts = facts();
    for fact in &facts {
        memory.put(fact, "kelp", 0).expect("put");
    }
    let recall = memory.query("which port does the dev server use", "kelp", None, 3).expect("query");
    assert_eq!(recall.stages, ["hash"]);
    assert_eq!(ids(&recall)[0], facts[0].id);
    let recall = memory.query("order of migrations and seeding", "kelp", None, 5).expect("query");
    assert!(ids(&recall)[..2].contains(&facts[1].id.as_str()));
    let recall = memory.query("migrations", "kelp", Some("decision"), 5).expect("query");
    assert_eq!(ids(&recall), [facts[3].id.as_str()], "kind filter");
    let recall = memory.query("repo:src/cache.rs", "kelp", None, 5).expect("query");
    assert_eq!(ids(&recall)[0], facts[2].id, "a pointer finds the engrams citing it");
}

#[test]
fn projects_are_isolated_and_cold_engrams_leave_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open(dir.path()).expect("open");
    let facts = facts();
    memory.put(&facts[0], "kelp", 0).expect("put");
    assert!(memory.query("dev server port", "other", None, 5).expect("query").hits.is_empty());
    let short = engram(EngramKind::Fact, "The staging port is 8443.", "repo:src/config.rs#L20-L21", &["port"]);
    let short = Valid::new(Engram { ttl: crate::Ttl::hours(1), ..short.into_inner() }).expect("valid");
    memory.put(&short, "kelp", 0).expect("put");
    assert_eq!(memory.query("port", "kelp", None, 5).expect("query").hits.len(), 2);
    assert_eq!(memory.evict_expired(3600).expect("evict"), 1);
    assert_eq!(ids(&memory.query("port", "kelp", None, 5).expect("query")), [facts[0].id.as_str()]);
    assert_eq!(memory.get("kelp", &short.id).expect("get").expect("cold but readable").tier, Tier::Cold);
}

#[test]
fn a_missing_or_stale_index_is_rebuilt_with_identical_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = facts();
    let before = {
        let mut memory = Memory::open(dir.path()).expect("open");
        for fact in &facts {
            memory.put(fact, "kelp", 0).expect("put");
        }
        memory.query("migrations seeding dev port", "kelp", None, 4).expect("query")
    };
    // Lose the index entirely.
    std::fs::remove_dir_all(dir.path().join("recall")).expect("remove index");
    let mut memory = Memory::open(dir.path()).expect("reopen rebuilds");
    let after = memory.query("migrations seeding dev port", "kelp", None, 4).expect("query");
    assert_eq!(ids(&after), ids(&before));
    // Damage it: garbage in the index directory is detected and rebuilt too.
    drop(memory);
    std::fs::write(dir.path().join("recall/meta.json"), "not json").expect("damage");
    let mut memory = Memory::open(dir.path()).expect("reopen after damage");
    assert_eq!(ids(&memory.query("migrations seeding dev port", "kelp", None, 4).expect("query")), ids(&before));
    // A store changed behind the index's back (by a process that did not update it) is noticed by generation.
    drop(memory);
    let mut store = Store::open(dir.path()).expect("store");
    store.evict("kelp", &facts[0].id).expect("evict");
    drop(store);
    let mut memory = Memory::open(dir.path()).expect("reopen");
    assert!(!ids(&memory.query("dev server port", "kelp", None, 4).expect("query")).contains(&facts[0].id.as_str()));
    assert_eq!(memory.reindex().expect("reindex"), 3);
}

#[test]
fn supersession_takes_the_old_engram_out_of_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open(dir.path()).expect("open");
    let old = engram(EngramKind::Fact, "The deploy target is alpha-01.", "sam:decision:deploy-target", &["deploy"]);
    let new = engram(EngramKind::Fact, "The deploy target is now beta-02.", "sam:decision:deploy-target", &["deploy"]);
    memory.put(&old, "", 0).expect("put");
    memory.put(&new, "", 1).expect("put");
    assert!(memory.supersede("", &old.id, &new.id).expect("supersede"));
    assert_eq!(ids(&memory.query("deploy target", "", None, 5).expect("query")), [new.id.as_str()]);
}
