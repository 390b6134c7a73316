//! Memory tests: recall through the real tantivy index and the real embedding model over the real SQLite store.
//!
//! Stage-1 behaviour is tested with the model left out (`open_without_model`), so those orders do not depend on it;
//! the two-stage tests need the model provisioned (`scripts/provision-model.sh`, as CI does) and fail, saying so,
//! when it is missing.

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

/// A memory with the real embedding model; fails with the fix when it is not provisioned.
fn model_memory(dir: &Path) -> Memory {
    let mut memory = Memory::open(dir).expect("open");
    if let Some(reason) = memory.rerank_unavailable() {
        panic!("these tests need the embedding model; run scripts/provision-model.sh ({reason})");
    }
    memory
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

#[test]
fn projects_are_isolated_and_cold_engrams_leave_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = model_memory(dir.path());
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
        let mut memory = model_memory(dir.path());
        for fact in &facts {
            memory.put(fact, "kelp", 0).expect("put");
        }
        memory.query("migrations seeding dev port", "kelp", None, 4).expect("query")
    };
    assert_eq!(before.stages, ["hash", "rerank"]);
    // Lose both indexes entirely.
    std::fs::remove_dir_all(dir.path().join("recall")).expect("remove index");
    std::fs::remove_dir_all(dir.path().join("vectors")).expect("remove vectors");
    let mut memory = model_memory(dir.path());
    let after = memory.query("migrations seeding dev port", "kelp", None, 4).expect("query");
    assert_eq!(after, before, "same hits, same scores after the rebuild");
    assert_eq!(memory.reindex().expect("reindex"), 4);
    assert_eq!(memory.query("migrations seeding dev port", "kelp", None, 4).expect("query"), before);
    // Damage it: garbage in the index directory is detected and rebuilt too.
    drop(memory);
    std::fs::write(dir.path().join("recall/meta.json"), "not json").expect("damage");
    std::fs::write(dir.path().join("vectors/vectors.usearch"), "not an index").expect("damage");
    let mut memory = model_memory(dir.path());
    assert_eq!(memory.query("migrations seeding dev port", "kelp", None, 4).expect("query"), before);
    // A store changed behind the index's back (by a process that did not update it) is noticed by generation.
    drop(memory);
    let mut store = Store::open(dir.path()).expect("store");
    store.evict("kelp", &facts[0].id).expect("evict");
    drop(store);
    let mut memory = model_memory(dir.path());
    assert!(!ids(&memory.query("dev server port", "kelp", None, 4).expect("query")).contains(&facts[0].id.as_str()));
    assert_eq!(memory.reindex().expect("reindex"), 3);
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
fn supersession_takes_the_old_engram_out_of_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = model_memory(dir.path());
    let old = engram(EngramKind::Fact, "The deploy target is alpha-01.", "sam:decision:deploy-target", &["deploy"]);
    let new = engram(EngramKind::Fact, "The deploy target is now beta-02.", "sam:decision:deploy-target", &["deploy"]);
    memory.put(&old, "", 0).expect("put");
    memory.put(&new, "", 1).expect("put");
    assert!(memory.supersede("", &old.id, &new.id).expect("supersede"));
    assert_eq!(ids(&memory.query("deploy target", "", None, 5).expect("query")), [new.id.as_str()]);
}

#[test]
fn the_model_embeds_paraphrases_closer_than_unrelated_text() {
    let embedder = shared_embedder().expect("the embedding model (run scripts/provision-model.sh)");
    let v = embedder
        .embed(&["The dog chased the ball.", "A puppy ran after a ball.", "Quarterly revenue fell by ten percent."])
        .expect("embed");
    assert_eq!(v.len(), 3);
    for vector in &v {
        assert_eq!(vector.len(), embed::DIMENSIONS);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "unit vectors, got norm {norm}");
    }
    let (close, far) = (embed::cosine(&v[0], &v[1]), embed::cosine(&v[0], &v[2]));
    assert!(close > 0.5 && far < 0.2 && close > far + 0.4, "paraphrase {close}, unrelated {far}");
    assert_eq!(embedder.embed_one("The dog chased the ball.").expect("one"), v[0], "batching changes nothing");
    // Batches are formed by length: texts given longest first still come back in the order given.
    let texts = ["Quarterly revenue fell by ten percent this year.", "A puppy ran after a ball.", "Dogs."];
    let batch = embedder.embed(&texts).expect("embed");
    for (text, vector) in texts.iter().zip(&batch) {
        let alone = embedder.embed_one(text).expect("one");
        assert!(embed::cosine(&alone, vector) > 0.9999, "{text} came back in another place");
    }
}

#[test]
fn rerank_puts_the_semantically_right_engram_first_where_hash_keys_tie() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = model_memory(dir.path());
    let right = engram(EngramKind::Fact, "Kelp note: the puppy chased a ball around the yard.", "sam:notes:1", &[]);
    let wrong = engram(EngramKind::Fact, "Kelp note: the broker bought a bond across the street.", "sam:notes:2", &[]);
    memory.put(&right, "p", 0).expect("put");
    memory.put(&wrong, "p", 10).expect("put (more recent: stage 1 alone prefers it)");
    let question = "kelp note about a dog playing fetch";
    let hash = memory.recall(&RecallRequest::in_project(question, "p", 2).stages(Stages::Hash)).expect("q");
    assert_eq!(hash.hits.len(), 2);
    assert_eq!(hash.hits[0].hash_score, hash.hits[1].hash_score, "the two engrams tie on hash keys");
    assert_eq!(ids(&hash), [wrong.id.as_str(), right.id.as_str()], "stage 1 breaks the tie by recency");
    let both = memory.recall(&RecallRequest::in_project(question, "p", 2)).expect("q");
    assert_eq!(both.stages, ["hash", "rerank"]);
    assert_eq!(both.degraded, None);
    assert_eq!(ids(&both), [right.id.as_str(), wrong.id.as_str()], "the rerank puts the dog first");
    assert!(both.hits[0].cosine > both.hits[1].cosine);
    let semantic = memory.recall(&RecallRequest::in_project("a dog", "p", 1).stages(Stages::Rerank));
    assert_eq!(ids(&semantic.expect("q")), [right.id.as_str()], "the rerank alone finds it without shared keys");
}

#[test]
fn what_waits_for_the_model_is_bounded_and_still_embedded_before_a_rerank() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = model_memory(dir.path());
    memory.flush().expect("the backlog of a new store: nothing");
    memory.set_max_pending(2);
    let notes = [
        "Kelp note: the broker bought a bond across the street.",
        "Kelp note: the puppy chased a ball around the yard.",
        "Kelp note: the invoice totals were reconciled on Friday.",
        "Kelp note: the kettle whistled while the rain fell.",
        "Kelp note: the train left the station twenty minutes late.",
    ];
    let mut put = Vec::new();
    for (i, note) in notes.iter().enumerate() {
        let engram = engram(EngramKind::Fact, note, &format!("sam:notes:{i}"), &[]);
        memory.put(&engram, "p", i as i64).expect("put");
        assert!(memory.n_pending() <= 2, "{} claims held for the model", memory.n_pending());
        put.push(engram);
    }
    assert_eq!(memory.unembedded().expect("count"), 5, "nothing embedded on the way to an acknowledgement");
    // The rerank alone finds the dog: every claim was embedded first, the spilled ones found in the store.
    let semantic = memory.recall(&RecallRequest::in_project("a dog", "p", 1).stages(Stages::Rerank)).expect("q");
    assert_eq!(ids(&semantic), [put[1].id.as_str()]);
    assert_eq!(memory.unembedded().expect("count"), 0);
    let late = memory.recall(&RecallRequest::in_project("a delayed departure", "p", 1).stages(Stages::Rerank));
    assert_eq!(ids(&late.expect("q")), [put[4].id.as_str()]);
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
fn engrams_put_without_the_model_are_embedded_when_it_comes_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = facts();
    {
        let mut memory = Memory::open_without_model(dir.path()).expect("open");
        for fact in &facts {
            memory.put(fact, "kelp", 0).expect("put");
        }
    }
    let mut memory = model_memory(dir.path());
    let recall = memory.recall(&RecallRequest::in_project("web port", "kelp", 1).stages(Stages::Rerank));
    assert_eq!(ids(&recall.expect("query")), [facts[0].id.as_str()], "backfilled on open");
}

#[test]
fn a_revived_engram_is_searchable_again_by_its_kept_vector() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = model_memory(dir.path());
    let fact = &facts()[2];
    memory.put(fact, "kelp", 0).expect("put");
    assert!(memory.evict("kelp", &fact.id).expect("evict"));
    let rerank = |memory: &mut Memory| {
        let request = RecallRequest::in_project("cache expiry", "kelp", 3).stages(Stages::Rerank);
        ids(&memory.recall(&request).expect("query")).iter().map(|s| (*s).to_owned()).collect::<Vec<String>>()
    };
    assert!(rerank(&mut memory).is_empty(), "cold engrams leave stage 2 too");
    assert_eq!(memory.put(fact, "kelp", 5).expect("revive"), PutOutcome::Revived { id: fact.id.clone() });
    assert_eq!(rerank(&mut memory), std::slice::from_ref(&fact.id));
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

/// A backlog larger than one embedding step is embedded and stored in full, step by step.
#[test]
fn a_backlog_of_several_embedding_steps_is_embedded_in_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = model_memory(dir.path());
    let n = EMBED_CHUNK * 2 + 7;
    let engrams: Vec<Valid<Engram>> = (0..n)
        .map(|i| {
            let claim = format!("Module m{i} keeps its cache warm with job j{} every {} minutes.", i % 13, i % 7 + 1);
            engram(EngramKind::Fact, &claim, &format!("repo:src/m{i}.rs#L1-L9"), &[])
        })
        .collect();
    memory.put_many(&engrams, "kelp", 0).expect("bulk");
    memory.flush().expect("embed");
    let missing =
        engrams.iter().filter(|e| memory.store.vector(MODEL_ID, "kelp", &e.id).expect("read").is_none()).count();
    assert_eq!(missing, 0, "every engram of the backlog has its stored vector");
    let recall = memory.query("which job keeps module m300 warm", "kelp", None, 3).expect("query");
    assert_eq!(recall.stages, ["hash", "rerank"]);
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
