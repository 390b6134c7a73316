//! The memory tests that need the embedding model (`scripts/provision-model.sh`): two-stage recall, the vectors and
//! what waits for the model. Compiled with the `provisioned-tests` feature, as `scripts/test.sh` does; a model that is
//! missing then fails them, saying so.

use super::*;

/// A memory with the real embedding model; fails with the fix when it is not provisioned.
fn model_memory(dir: &Path) -> Memory {
    let mut memory = Memory::open(dir).expect("open");
    if let Some(reason) = memory.rerank_unavailable() {
        panic!("these tests need the embedding model; run scripts/provision-model.sh ({reason})");
    }
    memory
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
    // Batches are formed by length: texts given longest first still come back in the order given, each the vector
    // it gets alone (stored texts are multiplied in fp32, whose result does not depend on the batch).
    let shipped = Embedder::load_as(&ModelPaths::from_env(), QueryArithmetic::AsShipped).expect("the model");
    assert_eq!(shipped.int8_matmuls(), 0);
    assert_eq!(shipped.embed_one("The dog chased the ball.").expect("one"), v[0], "batching changes nothing");
    let texts = ["Quarterly revenue fell by ten percent this year.", "A puppy ran after a ball.", "Dogs."];
    let batch = embedder.embed(&texts).expect("embed");
    for (text, vector) in texts.iter().zip(&batch) {
        let alone = shipped.embed_one(text).expect("one");
        assert!(embed::cosine(&alone, vector) > 0.9999, "{text} came back in another place");
    }
}

#[test]
fn a_query_multiplies_the_int8_weights_as_int8_and_lands_beside_its_fp32_vector() {
    let embedder = shared_embedder().expect("the embedding model (run scripts/provision-model.sh)");
    // all-MiniLM-L6-v2: six layers of four attention and two feed-forward products.
    assert_eq!(embedder.int8_matmuls(), 36);
    let texts = ["The dog chased the ball.", "A puppy ran after a ball.", "Quarterly revenue fell by ten percent."];
    let stored = embedder.embed(&texts).expect("embed");
    let queries: Vec<Vec<f32>> = texts.iter().map(|t| embedder.embed_one(t).expect("query")).collect();
    for ((text, query), vector) in texts.iter().zip(&queries).zip(&stored) {
        let norm: f32 = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "a unit vector, got norm {norm}");
        let cosine = embed::cosine(query, vector);
        assert!(cosine > 0.99 && cosine < 0.999_999, "{text}: int8 against fp32 {cosine}");
        assert_eq!(&embedder.embed_one(text).expect("again"), query, "the same query, the same vector");
    }
    let (close, far) = (embed::cosine(&queries[0], &stored[1]), embed::cosine(&queries[0], &stored[2]));
    assert!(close > 0.5 && far < 0.2, "paraphrase {close}, unrelated {far}");
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

#[test]
fn with_both_stages_the_top_k_is_a_prefix_of_the_top_of_a_larger_k() {
    let pool = 24;
    for seed in 1..=4u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut memory = model_memory(dir.path());
        memory.set_recall_pool(pool);
        let (turns, queries) = random_turns(seed, 60 + 20 * seed as usize, 2 + seed as usize % 3);
        memory.put_many(&turns, "p", 0).expect("put");
        assert_top_k_is_a_prefix(&mut memory, &queries, pool);
    }
}
