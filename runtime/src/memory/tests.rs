//! Memory tests: recall through the real tantivy index over the real SQLite store.
//!
//! Stage-1 behaviour is tested with the model left out (`open_without_model`), so those orders do not depend on it;
//! the two-stage tests, which need the real embedding model, are in `model.rs` (the `provisioned-tests` feature).

use super::*;
use less_contract::EngramKind;
use less_contract::Pointer;

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
    let mut memory = Memory::open_without_model(dir.path()).expect("open");
    let facts = facts();
    for fact in &facts {
        memory.put(fact, "kelp", 0).expect("put");
    }
    let recall = memory.query("which port does the dev server use", "kelp", None, 3).expect("query");
    assert_eq!(recall.stages, ["hash"]);
    assert!(recall.degraded.as_deref().is_some_and(|d| d.contains("without the embedding model")), "never silent");
    assert_eq!(ids(&recall)[0], facts[0].id);
    let recall = memory.query("order of migrations and seeding", "kelp", None, 5).expect("query");
    assert!(ids(&recall)[..2].contains(&facts[1].id.as_str()));
    let recall = memory.query("migrations", "kelp", Some("decision"), 5).expect("query");
    assert_eq!(ids(&recall), [facts[3].id.as_str()], "kind filter");
    let recall = memory.query("repo:src/cache.rs", "kelp", None, 5).expect("query");
    assert_eq!(ids(&recall)[0], facts[2].id, "a pointer finds the engrams citing it");
}

/// Every file below `dir`, with its bytes.
fn files_below(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("read dir").map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// A memory opened to read (`lessrt serve`'s query box, issue 34) answers as a writer does from an index that is
/// current, behind the store or gone, catching up in memory: every file of the store stays as it was, and nothing is
/// created (no copy, no missing index rebuilt on disk).
#[test]
fn a_memory_opened_to_read_answers_in_place_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = facts();
    let question = "migrations seeding dev port cache";
    let answer = |memory: &mut Memory| {
        let recall = memory.query(question, "kelp", None, 4).expect("query");
        ids(&recall).into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let mut writer = Memory::open_without_model(dir.path()).expect("open");
    for fact in &facts[..3] {
        writer.put(fact, "kelp", 0).expect("put");
    }
    let want = answer(&mut writer);
    writer.close().expect("close");
    let untouched = files_below(dir.path());
    let mut reader = Memory::open_to_read(dir.path()).expect("open to read");
    assert_eq!(answer(&mut reader), want, "a current index, read in place");
    assert!(reader.put(&facts[3], "kelp", 0).is_err(), "a reader cannot write");
    drop(reader);
    assert_eq!(files_below(dir.path()), untouched);

    // The store moves on behind the index's back: the reader catches up in memory.
    let mut store = Store::open(dir.path()).expect("store");
    store.put(&facts[3], "kelp", 0).expect("put");
    drop(store);
    let behind = files_below(dir.path());
    let mut reader = Memory::open_to_read(dir.path()).expect("open to read");
    let caught_up = answer(&mut reader);
    assert!(caught_up.contains(&facts[3].id), "{caught_up:?}");
    drop(reader);
    assert_eq!(files_below(dir.path()), behind);

    // The index gone: answered all the same, and not made again on disk.
    std::fs::remove_dir_all(dir.path().join("recall")).expect("remove index");
    let gone = files_below(dir.path());
    let mut reader = Memory::open_to_read(dir.path()).expect("open to read");
    assert_eq!(answer(&mut reader), caught_up);
    drop(reader);
    assert_eq!(files_below(dir.path()), gone);
    assert!(!dir.path().join("recall").exists());
}

#[test]
fn a_missing_model_is_said_never_silent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open_with(dir.path(), Err("no model here".into())).expect("open");
    memory.put(&facts()[0], "kelp", 0).expect("put");
    let recall = memory.query("dev server port", "kelp", None, 3).expect("query");
    assert_eq!(recall.stages, ["hash"]);
    assert_eq!(recall.degraded.as_deref(), Some("rerank skipped: no model here"));
    assert_eq!(recall.hits.len(), 1);
    let rerank_only = memory.recall(&RecallRequest::in_project("port", "kelp", 3).stages(Stages::Rerank));
    assert!(matches!(rerank_only, Err(MemoryError::StageUnavailable(reason)) if reason == "no model here"));
}

#[test]
fn a_large_index_searches_the_selective_keys_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open_without_model(dir.path()).expect("open");
    let filler: Vec<Valid<Engram>> = (0..1_200)
        .map(|n| engram(EngramKind::Fact, &format!("Harbor ledger entry number {n}."), &format!("sam:l:{n}"), &[]))
        .collect();
    memory.put_many(&filler, "p", 0).expect("bulk");
    let rare = engram(EngramKind::Fact, "Harbor zebra crossing moved north.", "sam:z:1", &[]);
    memory.put(&rare, "p", 0).expect("put");
    memory.flush().expect("flush");
    // `harbor` is in every engram: in an index this large it is left out of the search once enough selective keys
    // remain, so only engrams sharing a selective key are candidates.
    let recall = memory.query("harbor zebra crossing moved north", "p", None, 5).expect("query");
    assert_eq!(ids(&recall), [rare.id.as_str()]);
    // A query of common keys only still searches its rarest ones.
    assert_eq!(memory.query("harbor ledger entry", "p", None, 3).expect("query").hits.len(), 3);
}

/// Writes garbage over every file of `dir` whose name ends with `ext`; returns how many.
fn damage(dir: &Path, ext: &str) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("index dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == ext) {
            std::fs::write(&path, b"\x00garbage, not a tantivy file\xff".repeat(40)).expect("damage");
            n += 1;
        }
    }
    n
}

#[test]
fn garbage_in_the_index_files_is_detected_and_rebuilt_from_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = facts();
    let before = {
        let mut memory = Memory::open_without_model(dir.path()).expect("open");
        memory.put_many(&facts, "kelp", 0).expect("put");
        memory.query("migrations seeding dev port", "kelp", None, 4).expect("query")
    };
    assert_eq!(before.hits.len(), 3, "three of the four share keys with the question");
    for ext in ["term", "idx", "store", "fast"] {
        assert!(damage(&dir.path().join("recall"), ext) > 0, "no .{ext} file to damage");
        let mut memory = Memory::open_without_model(dir.path()).expect("a damaged index does not stop the open");
        assert_eq!(memory.stats().expect("stats").hot, 4);
        assert_eq!(memory.query("migrations seeding dev port", "kelp", None, 4).expect("query"), before, ".{ext}");
    }
    // `reindex` replaces whatever is there, whatever it holds.
    damage(&dir.path().join("recall"), "term");
    std::fs::write(dir.path().join("recall/meta.json"), "{\"not\": \"an index\"}").expect("damage");
    let mut memory = Memory::open_without_model(dir.path()).expect("open");
    assert_eq!(memory.reindex().expect("reindex"), 4);
    assert_eq!(memory.query("migrations seeding dev port", "kelp", None, 4).expect("query"), before);
}

#[test]
fn two_memories_on_one_store_see_each_others_writes_and_wait_for_the_write_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = facts();
    let mut first = Memory::open_without_model(dir.path()).expect("open");
    let mut second = Memory::open_without_model(dir.path()).expect("open beside it");
    first.put(&facts[0], "kelp", 0).expect("put");
    first.commit().expect("commit");
    assert_eq!(ids(&second.query("dev server port", "kelp", None, 1).expect("query")), [facts[0].id.as_str()]);
    second.put(&facts[1], "kelp", 0).expect("put");
    // A writer holds the index's write lock for a while: the other one waits for it instead of failing.
    let holder = {
        let recall = dir.path().join("recall");
        let (locked, held) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut index = RecallIndex::open(&recall).expect("open");
            let write = index.write().expect("lock");
            locked.send(()).expect("send");
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(write);
        });
        held.recv().expect("locked");
        handle
    };
    second.commit().expect("waits for the lock, then commits");
    holder.join().expect("holder");
    let recall = first.query("migrations seeding", "kelp", None, 4).expect("query");
    assert!(ids(&recall).contains(&facts[1].id.as_str()), "{:?}", ids(&recall));
    assert_eq!(first.query("migrations seeding", "kelp", None, 4).expect("again"), recall);
}

#[cfg(feature = "provisioned-tests")]
mod model;

/// A corpus of `n` turns in `sessions` sessions (so adjacent-turn and same-source terms apply), each a few words of a
/// small vocabulary (so many engrams share keys and scores tie), and queries of the same words.
pub(super) fn random_turns(seed: u64, n: usize, sessions: usize) -> (Vec<Valid<Engram>>, Vec<String>) {
    const WORDS: [&str; 24] = [
        "harbor",
        "lantern",
        "deploy",
        "region",
        "cache",
        "ticket",
        "garden",
        "painting",
        "river",
        "budget",
        "sunday",
        "concert",
        "migrate",
        "server",
        "recipe",
        "camping",
        "violin",
        "office",
        "puppy",
        "museum",
        "yesterday",
        "release",
        "lake",
        "novel",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mut words = |count: usize| (0..count).map(|_| WORDS[next(WORDS.len())]).collect::<Vec<_>>().join(" ");
    let turns = (0..n)
        .map(|i| {
            let claim = format!("{} {}", words(3), words(2));
            let pointer = format!("sam:c:D{}:{}", i % sessions + 1, i / sessions + 1);
            Engram::builder(EngramKind::Fact, claim, if i % 2 == 0 { "ann" } else { "bob" })
                .pointer(Pointer::parse(&pointer).expect("pointer"))
                .created_at("2026-01-01T00:00:00Z")
                .build()
                .expect("engram")
        })
        .collect();
    let queries =
        (0..6).map(|q| if q % 3 == 0 { format!("when did ann {}", words(2)) } else { words(1 + q % 3) }).collect();
    (turns, queries)
}

/// Checks, for each query, that the top `k` is the first `k` of the top `pool` for every `k` up to the pool.
pub(super) fn assert_top_k_is_a_prefix(memory: &mut Memory, queries: &[String], pool: usize) {
    for query in queries {
        let full = memory.query(query, "p", None, pool).expect("query");
        let full = ids(&full);
        for k in 1..pool {
            let top = memory.query(query, "p", None, k).expect("query");
            let want = &full[..k.min(full.len())];
            assert_eq!(ids(&top), want, "query {query:?}: the top {k} is not a prefix of the top {pool}");
        }
    }
}

#[test]
fn the_top_k_is_a_prefix_of_the_top_of_a_larger_k() {
    // More engrams than the pool, so the cut decides something; the pool small to keep the test fast.
    let pool = 24;
    for seed in 1..=12u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut memory = Memory::open_without_model(dir.path()).expect("open");
        memory.set_recall_pool(pool);
        let (turns, queries) = random_turns(seed, 40 + 10 * seed as usize, 1 + seed as usize % 4);
        memory.put_many(&turns, "p", 0).expect("put");
        assert_top_k_is_a_prefix(&mut memory, &queries, pool);
    }
}

#[test]
fn cached_rows_last_only_as_long_as_the_store_generation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open_without_model(dir.path()).expect("open");
    let facts = facts();
    memory.put_many(&facts, "kelp", 0).expect("put");
    let key = vec![("kelp".to_owned(), facts[0].id.clone()), ("kelp".to_owned(), "e_missing".to_owned())];
    let mut cache = RowCache::default();
    let generation = memory.store.generation().expect("generation");
    cache.at_generation(generation);
    let rows = cache.get_many(&memory.store, &key).expect("rows");
    assert_eq!(rows.len(), 1, "a missing row is left out");
    assert_eq!(rows[0].superseded_by, None);
    assert!(memory.supersede("kelp", &facts[0].id, &facts[1].id).expect("supersede"));
    let moved = memory.store.generation().expect("generation");
    assert!(moved > generation, "a write moves the generation on");
    cache.at_generation(generation);
    assert_eq!(cache.get_many(&memory.store, &key).expect("rows")[0].superseded_by, None, "read from the cache");
    cache.at_generation(moved);
    let fresh = cache.get_many(&memory.store, &key).expect("rows");
    assert_eq!(fresh[0].superseded_by.as_deref(), Some(facts[1].id.as_str()), "the new generation reads the store");
}

#[test]
fn a_recall_after_another_process_changed_a_row_returns_the_row_as_it_is_now() {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = facts();
    let mut first = Memory::open_without_model(dir.path()).expect("open");
    let mut second = Memory::open_without_model(dir.path()).expect("open beside it");
    first.put_many(&facts, "kelp", 0).expect("put");
    let scope_of_hit = |memory: &mut Memory| {
        let recall = memory.query("dev server port", "kelp", None, 1).expect("query");
        assert_eq!(ids(&recall), [facts[0].id.as_str()]);
        recall.hits[0].stored.engram.scope
    };
    assert_eq!(scope_of_hit(&mut first), Scope::Run, "read once, and kept by the first memory");
    let operator = Principal::operator("ops", &["kelp"]);
    second.promote(&operator, &facts[0].id, Scope::Project).expect("promote").expect("found");
    assert_eq!(scope_of_hit(&mut first), Scope::Project, "the other process's write is seen, not the kept row");
}
