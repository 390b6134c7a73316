//! Access rules and hygiene through the real SQLite store and the real tantivy index, and the `MemoryActor` round
//! trip. Times are unix seconds passed in (or an injected clock): nothing sleeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::*;
use crate::memory::actor::{
    EngramRef, MemoryActor, MemoryArgs, MemoryMsg, PromoteRequest, PutRequest, QueryRequest, SupersedeRequest,
};
use crate::memory::store::{Store, Tier};
use less_contract::Pointer;
use less_contract::Ttl;
use less_contract::{Engram, EngramKind, MemorySettings, Scope};

struct Spec<'a> {
    kind: EngramKind,
    claim: &'a str,
    by: &'a str,
    scope: Scope,
    pointers: &'a [&'a str],
    tags: &'a [&'a str],
    confidence: f64,
    ttl: Ttl,
}

impl Default for Spec<'_> {
    fn default() -> Self {
        Spec {
            kind: EngramKind::Fact,
            claim: "",
            by: "dev",
            scope: Scope::Project,
            pointers: &["repo:src/config.rs#L13-L14"],
            tags: &[],
            confidence: 0.9,
            ttl: Ttl::days(7),
        }
    }
}

fn engram(spec: Spec<'_>) -> Valid<Engram> {
    let mut builder = Engram::builder(spec.kind, spec.claim, spec.by)
        .scope(spec.scope)
        .confidence(spec.confidence)
        .ttl(spec.ttl)
        .created_at("2026-01-01T00:00:00Z");
    for pointer in spec.pointers {
        builder = builder.pointer(Pointer::parse(pointer).expect("pointer"));
    }
    for tag in spec.tags {
        builder = builder.tag(*tag);
    }
    builder.build().expect("engram")
}

fn open() -> (tempfile::TempDir, Memory) {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = Memory::open(dir.path()).expect("open");
    (dir, memory)
}

fn ids(recall: &Recall) -> Vec<&str> {
    let mut ids: Vec<&str> = recall.hits.iter().map(|h| h.stored.engram.id.as_str()).collect();
    ids.sort_unstable();
    ids
}

fn sorted(mut ids: Vec<&str>) -> Vec<&str> {
    ids.sort_unstable();
    ids
}

fn code(err: MemoryError) -> ErrorCode {
    err.refusal_code().unwrap_or_else(|| panic!("a refusal, not {err}"))
}

fn q(k: usize) -> QueryOptions {
    QueryOptions { k, ..QueryOptions::default() }
}

/// A lead over `dev` in project `a`, run `r1`.
fn lead() -> Principal {
    Principal::agent("lead", "lead", "a", "r1").parent_of(["dev"])
}

#[test]
fn projects_runs_and_org_scope_decide_what_is_visible() {
    let (_dir, mut memory) = open();
    let dev_a1 = Principal::agent("dev", "programmer", "a", "r1");
    let dev_a2 = Principal::agent("dev", "programmer", "a", "r2");
    let dev_b = Principal::agent("dev-b", "programmer", "b", "r9");
    let project_a = engram(Spec { claim: "The dev port is 5173 in project a.", ..Spec::default() });
    let run_a =
        engram(Spec { claim: "The dev port was moved to 5174 for this run.", scope: Scope::Run, ..Spec::default() });
    let project_b = engram(Spec { claim: "The dev port is 4000 in project b.", by: "dev-b", ..Spec::default() });
    let org = engram(Spec {
        claim: "Every dev port is documented in the runbook.",
        by: "lead",
        scope: Scope::Org,
        ..Spec::default()
    });
    memory.put_as(&dev_a1, &project_a, "a", 0).expect("put");
    memory.put_as(&dev_a1, &run_a, "a", 0).expect("put");
    memory.put_as(&dev_b, &project_b, "b", 0).expect("put");
    memory.put_as(&lead(), &org, "a", 0).expect("a parent writes org directly");

    let in_a1 = memory.query_as(&dev_a1, "dev port", &q(10)).expect("query");
    assert_eq!(ids(&in_a1), sorted(vec![&project_a.id, &run_a.id, &org.id]));
    let in_a2 = memory.query_as(&dev_a2, "dev port", &q(10)).expect("query");
    assert_eq!(ids(&in_a2), sorted(vec![&project_a.id, &org.id]), "run scope stays in its run");
    let in_b = memory.query_as(&dev_b, "dev port", &q(10)).expect("query");
    assert_eq!(ids(&in_b), sorted(vec![&project_b.id, &org.id]), "org is read from every project, a's never");
    let only_org = QueryOptions { scope: Some(Scope::Org), ..q(10) };
    assert_eq!(ids(&memory.query_as(&dev_b, "dev port", &only_org).expect("query")), [org.id.as_str()]);

    // Reading another project's engram by id, or naming its project in a query, is refused.
    assert_eq!(code(memory.get_as(&dev_b, &project_a.id).expect_err("denied")), ErrorCode::ScopeDenied);
    assert_eq!(code(memory.get_as(&dev_a2, &run_a.id).expect_err("another run")), ErrorCode::ScopeDenied);
    let other = QueryOptions { project: Some("a".to_owned()), ..q(10) };
    assert_eq!(code(memory.query_as(&dev_b, "dev port", &other).expect_err("denied")), ErrorCode::ScopeDenied);
    assert_eq!(memory.get_as(&dev_b, &org.id).expect("org").expect("present").project, "a");
    assert!(memory.get_as(&dev_b, "eg_missing").expect("missing is not denied").is_none());
    // Writing into a project one is not a member of is refused too.
    let stray = engram(Spec { claim: "Written into the wrong project.", by: "dev-b", ..Spec::default() });
    assert_eq!(code(memory.put_as(&dev_b, &stray, "a", 0).expect_err("denied")), ErrorCode::ScopeDenied);
    // The project's trusted view still sees org engrams from elsewhere.
    assert!(ids(&memory.query("dev port", "b", None, 10).expect("query")).contains(&org.id.as_str()));
}

#[test]
fn role_tags_restrict_reads_to_those_roles_and_the_creator() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let other_dev = Principal::agent("dev2", "programmer", "a", "r1");
    let reviewer = Principal::agent("rev", "reviewer", "a", "r1");
    let secret =
        engram(Spec { claim: "The staging token rotates weekly.", tags: &["role:programmer"], ..Spec::default() });
    memory.put_as(&dev, &secret, "a", 0).expect("put");
    assert_eq!(ids(&memory.query_as(&other_dev, "staging token", &q(5)).expect("query")), [secret.id.as_str()]);
    assert!(memory.query_as(&reviewer, "staging token", &q(5)).expect("query").hits.is_empty());
    assert_eq!(code(memory.get_as(&reviewer, &secret.id).expect_err("denied")), ErrorCode::ScopeDenied);
    let reviewers_own =
        engram(Spec { claim: "Review notes on the token.", by: "rev", tags: &["role:lead"], ..Spec::default() });
    memory.put_as(&reviewer, &reviewers_own, "a", 0).expect("put");
    assert_eq!(
        ids(&memory.query_as(&reviewer, "token", &q(5)).expect("query")),
        [reviewers_own.id.as_str()],
        "a creator reads its own role-restricted engram"
    );
}

#[test]
fn only_a_parent_promotes_and_only_above_the_floor() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let sure = engram(Spec { claim: "Migrations run before seeding.", confidence: 0.95, ..Spec::default() });
    let unsure = engram(Spec { claim: "The cache may be disabled in CI.", confidence: 0.6, ..Spec::default() });
    memory.put_as(&dev, &sure, "a", 0).expect("put");
    memory.put_as(&dev, &unsure, "a", 0).expect("put");

    // A child may not promote, not even its own engram; nothing changes.
    let err = memory.promote(&dev, &sure.id, Scope::Org).expect_err("child");
    assert_eq!(code(err), ErrorCode::ScopeDenied);
    assert_eq!(memory.get_as(&dev, &sure.id).expect("get").expect("there").engram.scope, Scope::Project);
    // Nor write at org scope directly.
    let direct = engram(Spec { claim: "Seeding needs migration 3.", scope: Scope::Org, ..Spec::default() });
    assert_eq!(code(memory.put_as(&dev, &direct, "a", 0).expect_err("child")), ErrorCode::ScopeDenied);
    assert!(memory.get_as(&dev, &direct.id).expect("get").is_none(), "a refused put stores nothing");
    // A parent below the floor is refused, and the message names the floor.
    let err = memory.promote(&lead(), &unsure.id, Scope::Org).expect_err("below floor");
    assert!(err.to_string().contains("0.8"), "{err}");
    assert_eq!(code(err), ErrorCode::ScopeDenied);
    // A parent of the creator above the floor promotes; another project then reads it.
    let promoted = memory.promote(&lead(), &sure.id, Scope::Org).expect("promote").expect("present");
    assert_eq!((promoted.engram.scope, promoted.promoted_by.as_deref()), (Scope::Org, Some("lead")));
    let outsider = Principal::agent("dev-b", "programmer", "b", "r9");
    assert_eq!(ids(&memory.query_as(&outsider, "migrations seeding", &q(5)).expect("query")), [sure.id.as_str()]);
    assert_eq!(memory.get_as(&outsider, &sure.id).expect("get").expect("visible").engram.scope, Scope::Org);
    // Scopes only widen; promoting to the same scope changes nothing.
    assert!(memory.promote(&lead(), &sure.id, Scope::Org).expect("same").is_some());
    assert_eq!(code(memory.promote(&lead(), &sure.id, Scope::Project).expect_err("narrower")), ErrorCode::ScopeDenied);
    // A parent of someone else is not a parent of this creator.
    let other_lead = Principal::agent("lead2", "lead", "a", "r1").parent_of(["someone"]);
    assert_eq!(
        code(memory.promote(&other_lead, &unsure.id, Scope::Global).expect_err("not parent")),
        ErrorCode::ScopeDenied
    );
    // The floor is configurable.
    memory.set_policy(MemoryPolicy { promotion_floor: 0.5, ..MemoryPolicy::default() });
    assert_eq!(
        memory.promote(&lead(), &unsure.id, Scope::Global).expect("promote").expect("there").engram.scope,
        Scope::Global
    );
    // Putting the promoted engram again as first written is a duplicate, not a second copy.
    assert!(matches!(memory.put_as(&dev, &sure, "a", 5).expect("put").outcome, PutOutcome::Duplicate { .. }));
}

#[test]
fn run_to_project_is_a_promotion_by_the_parent_above_the_floor() {
    // LESS §8.1: the promotion path run → project → org is controlled by the parent; §13.2: the floor holds for
    // every promotion beyond run scope.
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let sure = engram(Spec { claim: "The build needs protoc 25.", scope: Scope::Run, ..Spec::default() });
    let unsure =
        engram(Spec { claim: "The flaky test may be a race.", scope: Scope::Run, confidence: 0.6, ..Spec::default() });
    memory.put_as(&dev, &sure, "a", 0).expect("put");
    memory.put_as(&dev, &unsure, "a", 0).expect("put");
    let scope_of = |memory: &Memory, id: &str| memory.get_as(&lead(), id).expect("get").expect("there").engram.scope;

    // The creator may not widen its own engram to project; nothing changes.
    let err = memory.promote(&dev, &sure.id, Scope::Project).expect_err("creator");
    assert_eq!(code(err), ErrorCode::ScopeDenied);
    assert_eq!(scope_of(&memory, &sure.id), Scope::Run);
    // The parent below the floor is refused, saying so.
    let err = memory.promote(&lead(), &unsure.id, Scope::Project).expect_err("below the floor");
    assert!(err.to_string().contains("below the promotion floor 0.8 for project"), "{err}");
    assert_eq!(scope_of(&memory, &unsure.id), Scope::Run);
    // The parent above the floor promotes; another run of the project then reads it.
    let promoted = memory.promote(&lead(), &sure.id, Scope::Project).expect("promote").expect("present");
    assert_eq!((promoted.engram.scope, promoted.promoted_by.as_deref()), (Scope::Project, Some("lead")));
    let next_run = Principal::agent("dev", "programmer", "a", "r2");
    assert_eq!(ids(&memory.query_as(&next_run, "protoc build", &q(5)).expect("query")), [sure.id.as_str()]);
    // A parent promotes its own run engram too (it controls its subtree), under the same floor.
    let own =
        engram(Spec { claim: "Releases are cut on Thursdays.", by: "lead", scope: Scope::Run, ..Spec::default() });
    memory.put_as(&lead(), &own, "a", 0).expect("put");
    assert!(memory.promote(&lead(), &own.id, Scope::Project).expect("own").is_some());
}

#[test]
fn with_project_writes_off_a_child_writes_run_scope_and_its_parent_promotes() {
    let (_dir, mut memory) = open();
    let settings = MemorySettings { writes: Some(vec![Scope::Run]), ..MemorySettings::default() };
    memory.set_policy(MemoryPolicy::from_settings(&settings));
    assert!(!memory.policy().project_writes);
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let direct = engram(Spec { claim: "The API base path is /v2.", ..Spec::default() });
    let err = memory.put_as(&dev, &direct, "a", 0).expect_err("a child's project write");
    assert!(err.to_string().contains("keep the engram at run scope"), "{err}");
    assert_eq!(code(err), ErrorCode::ScopeDenied);
    assert!(memory.get_as(&lead(), &direct.id).expect("get").is_none(), "a refused put stores nothing");
    let at_run = engram(Spec { claim: "The API base path is /v2.", scope: Scope::Run, ..Spec::default() });
    memory.put_as(&dev, &at_run, "a", 0).expect("run scope is always written");
    // A parent writes project scope directly: a promotion at write time, above the floor only.
    let lead_low = engram(Spec { claim: "Maybe drop /v1.", by: "lead", confidence: 0.5, ..Spec::default() });
    assert_eq!(code(memory.put_as(&lead(), &lead_low, "a", 0).expect_err("below floor")), ErrorCode::ScopeDenied);
    let lead_sure = engram(Spec { claim: "/v1 is retired in March.", by: "lead", ..Spec::default() });
    memory.put_as(&lead(), &lead_sure, "a", 0).expect("a parent's project write above the floor");
    // What a settings table leaves out keeps the default.
    let floor = MemorySettings { promotion_floor: Some(0.3), ..MemorySettings::default() };
    let policy = MemoryPolicy::from_settings(&floor);
    assert_eq!(policy, MemoryPolicy { promotion_floor: 0.3, ..MemoryPolicy::default() });
}

#[test]
fn a_role_limited_to_some_scopes_reads_nothing_wider() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let run = engram(Spec { claim: "This run pins the toolchain to 1.95.", scope: Scope::Run, ..Spec::default() });
    let project = engram(Spec { claim: "The project's toolchain is stable.", ..Spec::default() });
    memory.put_as(&dev, &run, "a", 0).expect("put");
    memory.put_as(&dev, &project, "a", 0).expect("put");
    let tester = Principal::agent("qa", "tester", "a", "r1").reading(Some(vec![Scope::Run]));
    assert_eq!(ids(&memory.query_as(&tester, "toolchain", &q(5)).expect("query")), [run.id.as_str()]);
    assert_eq!(code(memory.get_as(&tester, &project.id).expect_err("a wider scope")), ErrorCode::ScopeDenied);
    let asking = QueryOptions { scope: Some(Scope::Project), ..q(5) };
    let err = memory.query_as(&tester, "toolchain", &asking).expect_err("asks for a scope it does not read");
    assert!(err.to_string().contains("reads only run engrams"), "{err}");
    // Unlimited, the same role reads both.
    let open_tester = Principal { reads: None, ..tester };
    assert_eq!(ids(&memory.query_as(&open_tester, "toolchain", &q(5)).expect("query")).len(), 2);
}

#[test]
fn expired_engrams_go_cold_are_read_by_id_and_by_a_cold_query_and_come_back() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let short = engram(Spec { claim: "The cache TTL is 300 s.", ttl: Ttl::hours(1), ..Spec::default() });
    memory.put_as(&dev, &short, "a", 0).expect("put");
    assert_eq!(memory.evict_expired(3600).expect("evict"), 1);
    assert!(memory.query_as(&dev, "cache ttl", &q(5)).expect("query").hits.is_empty(), "out of normal recall");
    let cold = QueryOptions { include_cold: true, ..q(5) };
    let recall = memory.query_as(&dev, "cache ttl", &cold).expect("cold query");
    assert_eq!((ids(&recall), recall.hits[0].stored.tier), (vec![short.id.as_str()], Tier::Cold));
    let by_id = memory.get_as(&dev, &short.id).expect("get").expect("readable");
    assert_eq!((by_id.tier, by_id.cold_reason.as_deref()), (Tier::Cold, Some("expired")));
    // The same engram put again is hot again, with a fresh TTL.
    assert!(matches!(memory.put_as(&dev, &short, "a", 4000).expect("put").outcome, PutOutcome::Revived { .. }));
    assert_eq!(ids(&memory.query_as(&dev, "cache ttl", &q(5)).expect("query")), [short.id.as_str()]);
    // Evicted by hand, by its creator; another agent without authority may not.
    let stranger = Principal::agent("other", "programmer", "a", "r1");
    assert_eq!(code(memory.evict_as(&stranger, &short.id).expect_err("denied")), ErrorCode::ScopeDenied);
    assert!(memory.evict_as(&dev, &short.id).expect("evict"));
    assert_eq!(memory.get_as(&dev, &short.id).expect("get").expect("there").cold_reason.as_deref(), Some("evicted"));
}

#[test]
fn a_newer_engram_for_the_same_subject_supersedes_the_older_one() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let old =
        engram(Spec { claim: "The deploy target is alpha-01.", tags: &["subject:deploy-target"], ..Spec::default() });
    let new =
        engram(Spec { claim: "The deploy target is beta-02.", tags: &["subject:Deploy-Target"], ..Spec::default() });
    memory.put_as(&dev, &old, "a", 0).expect("put");
    let report = memory.put_as(&dev, &new, "a", 1).expect("put");
    assert_eq!((report.superseded, report.contradictions.len()), (vec![old.id.clone()], 0));
    let old_row = memory.get_as(&dev, &old.id).expect("get").expect("old");
    let new_row = memory.get_as(&dev, &new.id).expect("get").expect("new");
    assert_eq!((old_row.tier, old_row.superseded_by.as_deref()), (Tier::Cold, Some(new.id.as_str())));
    assert_eq!(new_row.supersedes.as_deref(), Some(old.id.as_str()));
    assert_eq!(ids(&memory.query_as(&dev, "deploy target", &q(5)).expect("query")), [new.id.as_str()]);
    let cold = QueryOptions { include_cold: true, ..q(5) };
    assert_eq!(memory.query_as(&dev, "deploy target", &cold).expect("query").hits.len(), 2);
    // A correction by an agent that may not modify the engram (not its creator, not a parent of its creator) is a
    // second opinion: it supersedes nothing (issue 61: any client replaced a decision this way).
    let stranger = Principal::agent("stranger", "ops", "a", "r1");
    let forged = engram(Spec {
        claim: "The deploy target is evil-00.",
        by: "stranger",
        tags: &["subject:deploy-target", "correction"],
        ..Spec::default()
    });
    let report = memory.put_as(&stranger, &forged, "a", 2).expect("put");
    assert!(report.superseded.is_empty(), "{:?}", report.superseded);
    assert_eq!(memory.get_as(&dev, &new.id).expect("get").expect("there").tier, Tier::Hot);
    // Nor does one that names the creator of the engram it would replace: `created_by` is declared, not proven.
    let posing = engram(Spec {
        claim: "The deploy target is evil-01.",
        by: "dev",
        tags: &["subject:deploy-target"],
        ..Spec::default()
    });
    assert!(memory.put_as(&stranger, &posing, "a", 2).expect("put").superseded.is_empty());
    assert_eq!(memory.get_as(&dev, &new.id).expect("get").expect("there").tier, Tier::Hot);
    // A parent's correction supersedes its child's.
    let mut ops = Principal::agent("ops", "ops", "a", "r1");
    ops.parent_of = vec!["dev".to_owned()];
    let fix = engram(Spec {
        claim: "The deploy target is gamma-03.",
        by: "ops",
        tags: &["subject:deploy-target", "correction"],
        ..Spec::default()
    });
    let report = memory.put_as(&ops, &fix, "a", 2).expect("put");
    // It replaces dev's (and what names dev as its creator); the stranger's claim stays beside it, a contradiction.
    assert!(report.superseded.contains(&new.id), "{:?}", report.superseded);
    assert_eq!(report.contradictions.len(), 1);
    // A run-scoped engram does not hide a project-wide one from readers of other runs.
    let narrow = engram(Spec {
        claim: "The deploy target is a local VM.",
        by: "ops",
        scope: Scope::Run,
        tags: &["subject:deploy-target"],
        ..Spec::default()
    });
    assert!(memory.put_as(&ops, &narrow, "a", 3).expect("put").superseded.is_empty());
    assert_eq!(memory.get_as(&ops, &fix.id).expect("get").expect("there").tier, Tier::Hot);
}

#[test]
fn a_run_scoped_engram_put_again_in_another_run_is_a_copy_of_that_run_and_never_a_takeover() {
    let (_dir, mut memory) = open();
    let in_r1 = Principal::agent("dev", "programmer", "a", "r1");
    let in_r2 = Principal::agent("dev", "programmer", "a", "r2");
    let e = engram(Spec { claim: "Seeding needs migration 3.", scope: Scope::Run, ..Spec::default() });
    memory.put_as(&in_r1, &e, "a", 0).expect("put");
    assert!(memory.query_as(&in_r2, "seeding migration", &q(5)).expect("query").hits.is_empty());
    let copy = run_copy_id(&e.id, "r2");
    assert_eq!(memory.put_as(&in_r2, &e, "a", 1).expect("put").outcome, PutOutcome::Stored { id: copy.clone() });
    assert_eq!(ids(&memory.query_as(&in_r2, "seeding migration", &q(5)).expect("query")), [copy.as_str()]);
    assert_eq!(memory.put_as(&in_r2, &e, "a", 2).expect("again").outcome, PutOutcome::Duplicate { id: copy.clone() });
    // The owner keeps its engram, private to its run, untouched.
    let own = memory.get_as(&in_r1, &e.id).expect("the owner reads it").expect("there");
    assert_eq!((own.run.as_str(), own.stored_at, own.engram.id.as_str()), ("r1", 0, e.id.as_str()));
    assert_eq!(ids(&memory.query_as(&in_r1, "seeding migration", &q(5)).expect("query")), [e.id.as_str()]);
    // The later run reads its own copy by the plain id, never the other run's row.
    let theirs = memory.get_as(&in_r2, &e.id).expect("get").expect("its copy");
    assert_eq!((theirs.run.as_str(), theirs.engram.id.as_str()), ("r2", copy.as_str()));
    let in_r3 = Principal::agent("dev", "programmer", "a", "r3");
    assert_eq!(code(memory.get_as(&in_r3, &e.id).expect_err("a third run holds nothing")), ErrorCode::ScopeDenied);
    // Cold in its run, the owner's engram is still not revived by another run.
    assert!(memory.evict_as(&in_r1, &e.id).expect("evict"));
    let in_r4 = Principal::agent("dev", "programmer", "a", "r4");
    let outcome = memory.put_as(&in_r4, &e, "a", 3).expect("put").outcome;
    assert_eq!(outcome, PutOutcome::Stored { id: run_copy_id(&e.id, "r4") });
    let own = memory.get_as(&in_r1, &e.id).expect("get").expect("there");
    assert_eq!((own.run.as_str(), own.tier), ("r1", Tier::Cold));
    // A project-scoped put of the same claim does not take the private one over either.
    let wide = engram(Spec { claim: "Seeding needs migration 3.", scope: Scope::Project, ..Spec::default() });
    assert_eq!(wide.id, e.id, "the same claim has the same id at any scope");
    let outcome = memory.put_as(&in_r2, &wide, "a", 4).expect("put").outcome;
    assert!(matches!(&outcome, PutOutcome::Stored { id } | PutOutcome::Duplicate { id } if *id != e.id), "{outcome:?}");
    assert_eq!(memory.get_as(&in_r1, &e.id).expect("get").expect("there").run, "r1");
}

#[test]
fn the_same_id_for_another_claim_is_refused_and_nothing_changes() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let first = engram(Spec { claim: "The port is 5173.", ..Spec::default() });
    memory.put_as(&dev, &first, "a", 0).expect("put");
    let mut other = (*engram(Spec { claim: "The port is 8080.", ..Spec::default() })).clone();
    other.id.clone_from(&first.id);
    let other = Valid::new(other).expect("valid");
    let err = memory.put_as(&dev, &other, "a", 1).expect_err("conflict");
    assert_eq!(code(err), ErrorCode::IdConflict);
    assert_eq!(memory.get_as(&dev, &first.id).expect("get").expect("there").engram.claim, "The port is 5173.");
    assert_eq!(memory.stats().expect("stats").hot, 1, "nothing stored");
    // The trusted bulk path says so too, with the same code.
    let err = memory.put_many(&[other], "a", 2).expect_err("conflict");
    assert_eq!(err.refusal_code(), Some(ErrorCode::IdConflict));
    // The same claim under the same id at another scope is the same engram: a duplicate, not a conflict.
    let wider = Valid::new(Engram { scope: Scope::Org, ..(*first).clone() }).expect("valid");
    let outcome = memory.put_as(&lead(), &wider, "a", 3).expect("put").outcome;
    assert_eq!(outcome, PutOutcome::Duplicate { id: first.id.clone() });
}

#[test]
fn same_content_is_stored_once() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let e = engram(Spec { claim: "Port is 5173.", ..Spec::default() });
    assert!(matches!(memory.put_as(&dev, &e, "a", 0).expect("put").outcome, PutOutcome::Stored { .. }));
    assert_eq!(memory.put_as(&dev, &e, "a", 1).expect("again").outcome, PutOutcome::Duplicate { id: e.id.clone() });
    assert_eq!(memory.stats().expect("stats").hot, 1);
}

#[test]
fn a_contradiction_between_sources_is_one_risk_engram_citing_both() {
    let (_dir, mut memory) = open();
    let config = Principal::agent("config", "programmer", "a", "r1");
    let docs = Principal::agent("docs", "writer", "a", "r1");
    let from_code = engram(Spec {
        claim: "The dev server port is 5173.",
        by: "config",
        pointers: &["repo:src/config.rs#L13-L14", "artifact:docs/RUNBOOK.md#sec=Ports"],
        tags: &["subject:dev-port"],
        ..Spec::default()
    });
    let from_runbook = engram(Spec {
        claim: "The dev server port is 3000.",
        by: "docs",
        pointers: &["artifact:docs/RUNBOOK.md#sec=Ports", "repo:README.md#L10-L12"],
        tags: &["subject:dev-port"],
        ..Spec::default()
    });
    memory.put_as(&config, &from_code, "a", 0).expect("put");
    let report = memory.put_as(&docs, &from_runbook, "a", 1).expect("put");
    assert!(report.superseded.is_empty(), "another source does not supersede");
    let [risk_id] = report.contradictions.as_slice() else { panic!("one contradiction: {report:?}") };
    for id in [&from_code.id, &from_runbook.id] {
        assert_eq!(memory.get_as(&config, id).expect("get").expect("there").tier, Tier::Hot, "both stay hot");
    }
    let risk = memory.get_as(&config, risk_id).expect("get").expect("risk").engram;
    assert_eq!(risk.kind, EngramKind::Risk);
    assert!(risk.tags.iter().flatten().any(|t| t == "contradiction"));
    assert!(risk.claim.contains(&from_code.id) && risk.claim.contains(&from_runbook.id), "{}", risk.claim);
    let mut cited: Vec<String> = risk.pointers.iter().map(ToString::to_string).collect();
    cited.sort();
    assert_eq!(
        cited,
        ["artifact:docs/RUNBOOK.md#sec=Ports", "repo:README.md#L10-L12", "repo:src/config.rs#L13-L14"],
        "the union of both sides' pointers, each once"
    );
    // The same pair never yields a second risk: revived, the runbook engram meets the same contradiction.
    assert!(memory.evict_as(&docs, &from_runbook.id).expect("evict"));
    let again = memory.put_as(&docs, &from_runbook, "a", 2).expect("revive");
    assert_eq!(again.contradictions, std::slice::from_ref(risk_id));
    assert_eq!(memory.stats().expect("stats").hot_by_kind.get("risk"), Some(&1));
    // A third source agreeing with the code contradicts only the runbook: one new pair, one new risk.
    let qa = Principal::agent("qa", "tester", "a", "r1");
    let echo = engram(Spec {
        claim: "The dev server port is 5173.",
        by: "qa",
        pointers: &["repo:docs/ports.md#L1-L2"],
        tags: &["subject:dev-port"],
        ..Spec::default()
    });
    let report = memory.put_as(&qa, &echo, "a", 3).expect("put");
    assert_eq!(report.contradictions.len(), 1, "{report:?}");
    assert_ne!(&report.contradictions[0], risk_id);
    assert_eq!(memory.stats().expect("stats").hot_by_kind.get("risk"), Some(&2));
}

#[test]
fn over_the_rate_limit_nothing_is_stored_until_the_window_moves_on() {
    let (_dir, mut memory) = open();
    memory.set_policy(MemoryPolicy { puts_per_window: 3, window_secs: 60, ..MemoryPolicy::default() });
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let claims = ["Claim one.", "Claim two.", "Claim three.", "Claim four."];
    let engrams: Vec<Valid<Engram>> = claims.iter().map(|c| engram(Spec { claim: c, ..Spec::default() })).collect();
    for (t, e) in engrams.iter().take(3).enumerate() {
        memory.put_as(&dev, e, "a", t as i64).expect("within the limit");
    }
    // A duplicate costs nothing, but the fourth new engram is refused and not stored.
    let err = memory.put_as(&dev, &engrams[3], "a", 10).expect_err("over the limit");
    assert!(err.to_string().contains("retry in 50 s"), "{err}");
    assert_eq!(code(err), ErrorCode::RateLimited);
    assert!(memory.get_as(&dev, &engrams[3].id).expect("get").is_none());
    assert_eq!(memory.stats().expect("stats").hot, 3);
    // Others are not limited by dev's writes, nor are operators.
    let other = Principal::agent("other", "programmer", "a", "r1");
    memory
        .put_as(&other, &engram(Spec { claim: "Another writer.", by: "other", ..Spec::default() }), "a", 10)
        .expect("other");
    // Once the first put leaves the window, dev may write again.
    assert_eq!(code(memory.put_as(&dev, &engrams[3], "a", 59).expect_err("still inside")), ErrorCode::RateLimited);
    assert!(matches!(memory.put_as(&dev, &engrams[3], "a", 60).expect("allowed").outcome, PutOutcome::Stored { .. }));
}

#[test]
fn a_version_one_store_is_migrated_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e =
        engram(Spec { claim: "The deploy target is alpha-01.", tags: &["subject:deploy-target"], ..Spec::default() });
    {
        let conn = rusqlite::Connection::open(dir.path().join("memory.sqlite3")).expect("sqlite");
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema_version', '1'), ('generation', '1');
             CREATE TABLE engrams (id TEXT NOT NULL, content_hash TEXT NOT NULL, project TEXT NOT NULL,
                 scope TEXT NOT NULL, kind TEXT NOT NULL, created_by TEXT NOT NULL, stored_at INTEGER NOT NULL,
                 expires_at INTEGER NOT NULL, confidence REAL NOT NULL, tier TEXT NOT NULL, cold_reason TEXT,
                 superseded_by TEXT, supersedes TEXT, doc TEXT NOT NULL, PRIMARY KEY (project, id));",
        )
        .expect("v1 layout");
        conn.execute(
            "INSERT INTO engrams VALUES (?1, 'h', 'a', 'project', 'fact', 'dev', 0, 999999, 0.9, 'hot', NULL, NULL,
                                         NULL, ?2)",
            rusqlite::params![e.id, serde_json::to_string(&*e).expect("json")],
        )
        .expect("v1 row");
    }
    let mut memory = Memory::open(dir.path()).expect("migrated");
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let row = memory.get_as(&dev, &e.id).expect("get").expect("kept");
    assert_eq!((row.written_by.as_str(), row.run.as_str()), ("dev", ""));
    let new =
        engram(Spec { claim: "The deploy target is beta-02.", tags: &["subject:deploy-target"], ..Spec::default() });
    let superseded = memory.put_as(&dev, &new, "a", 1).expect("put").superseded;
    assert_eq!(superseded, std::slice::from_ref(&e.id), "subject read from v1 tags");
}

#[tokio::test]
async fn the_memory_actor_answers_every_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let now = Arc::new(AtomicI64::new(0));
    let clock_now = now.clone();
    let args = MemoryArgs {
        dir: dir.path().join("memory"),
        policy: MemoryPolicy { puts_per_window: 2, ..MemoryPolicy::default() },
        clock: Arc::new(move || clock_now.load(Ordering::SeqCst)),
        remove_on_stop: true,
        sweep_every: 3600,
    };
    let (actor, handle) = ractor::Actor::spawn(None, MemoryActor, args).await.expect("spawn");
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let put = |who: &Principal, e: &Valid<Engram>| {
        Box::new(PutRequest { who: who.clone(), engram: e.clone(), project: "a".to_owned() })
    };
    let old =
        engram(Spec { claim: "The deploy target is alpha-01.", tags: &["subject:deploy-target"], ..Spec::default() });
    let new = engram(Spec { claim: "The deploy target is beta-02.", ..Spec::default() });
    let third = engram(Spec { claim: "A third claim in the same minute.", ..Spec::default() });

    let report = ractor::call!(actor, MemoryMsg::Put, put(&dev, &old)).expect("call").expect("put");
    assert_eq!(report.outcome, PutOutcome::Stored { id: old.id.clone() });
    ractor::call!(actor, MemoryMsg::Put, put(&dev, &new)).expect("call").expect("put");
    // Expected failures are values in the reply; the actor lives on.
    let refused = ractor::call!(actor, MemoryMsg::Put, put(&dev, &third)).expect("call").expect_err("rate limited");
    assert_eq!(refused.refusal_code(), Some(ErrorCode::RateLimited));
    now.store(61, Ordering::SeqCst);
    ractor::call!(actor, MemoryMsg::Put, put(&dev, &third)).expect("call").expect("the injected clock moved on");

    let query = Box::new(QueryRequest { who: dev.clone(), text: "deploy target".to_owned(), options: q(5) });
    let recall = ractor::call!(actor, MemoryMsg::Query, query).expect("call").expect("query");
    assert_eq!(ids(&recall), sorted(vec![&old.id, &new.id]));
    let got = ractor::call!(actor, MemoryMsg::Get, dev.clone(), old.id.clone()).expect("call").expect("get");
    assert_eq!(got.expect("there").engram, *crate::memory::keys::with_stored_keys(&old));
    let outsider = Principal::agent("x", "programmer", "b", "r1");
    let denied = ractor::call!(actor, MemoryMsg::Get, outsider, old.id.clone()).expect("call").expect_err("denied");
    assert_eq!(denied.refusal_code(), Some(ErrorCode::ScopeDenied));

    let by_child = Box::new(PromoteRequest {
        who: dev.clone(),
        target: EngramRef::Subject("deploy-target".to_owned()),
        to: Scope::Org,
    });
    let denied = ractor::call!(actor, MemoryMsg::Promote, by_child).expect("call").expect_err("child");
    assert_eq!(denied.refusal_code(), Some(ErrorCode::ScopeDenied));
    let by_lead = Box::new(PromoteRequest {
        who: lead(),
        target: EngramRef::Subject("deploy-target".to_owned()),
        to: Scope::Org,
    });
    let promoted = ractor::call!(actor, MemoryMsg::Promote, by_lead).expect("call").expect("promote");
    assert_eq!(promoted.expect("found").engram.scope, Scope::Org);

    let supersede = Box::new(SupersedeRequest { who: dev.clone(), old: old.id.clone(), new: new.id.clone() });
    assert!(ractor::call!(actor, MemoryMsg::Supersede, supersede).expect("call").expect("supersede"));
    assert!(ractor::call!(actor, MemoryMsg::Evict, dev.clone(), third.id.clone()).expect("call").expect("evict"));
    now.store(61 + 8 * 86_400, Ordering::SeqCst);
    // The sweep is due on the clock: it ran before this message, so nothing is left for an explicit one.
    assert_eq!(ractor::call!(actor, MemoryMsg::EvictExpired).expect("call").expect("expired"), 0, "swept already");
    let got = ractor::call!(actor, MemoryMsg::Get, dev.clone(), new.id.clone()).expect("call").expect("get");
    assert_eq!(got.expect("there").cold_reason.as_deref(), Some("expired"), "new's TTL ran out");
    let stats = ractor::call!(actor, MemoryMsg::Stats).expect("call").expect("stats");
    assert_eq!((stats.hot, stats.cold), (0, 3));

    actor.stop(None);
    handle.await.expect("stopped");
    assert!(!dir.path().join("memory").exists(), "a scratch store is removed at stop");
}

#[test]
fn an_expired_engram_leaves_recall_and_the_hot_count_when_its_ttl_runs_out() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let short = engram(Spec {
        claim: "The staging token rotates hourly.",
        ttl: Ttl::parse("PT2S").expect("ttl"),
        ..Spec::default()
    });
    memory.put_as(&dev, &short, "a", 1_000).expect("put");
    let at = |now: i64| QueryOptions { now: Some(now), ..q(5) };
    assert_eq!(ids(&memory.query_as(&dev, "staging token", &at(1_001)).expect("query")), [short.id.as_str()]);
    // Past its TTL and not yet swept to the cold tier: out of recall and of the hot count all the same.
    assert!(memory.query_as(&dev, "staging token", &at(1_004)).expect("query").hits.is_empty());
    let cold = QueryOptions { include_cold: true, ..at(1_004) };
    assert_eq!(ids(&memory.query_as(&dev, "staging token", &cold).expect("cold query")), [short.id.as_str()]);
    let stats = memory.stats_at(1_004).expect("stats");
    assert_eq!((stats.hot, stats.cold, stats.hot_by_kind.len()), (0, 1, 0));
    assert_eq!(memory.stats_at(1_001).expect("stats").hot, 1);
    assert_eq!(memory.evict_expired(1_004).expect("sweep"), 1);
    assert_eq!(memory.stats().expect("stats").hot, 0, "moved: cold by the stored tier too");
}

#[tokio::test]
async fn the_memory_actor_sweeps_expired_engrams_on_its_clock_and_when_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let now = Arc::new(AtomicI64::new(1_000));
    let clock_now = now.clone();
    let args = MemoryArgs {
        sweep_every: 1,
        ..MemoryArgs::new(dir.path().join("memory"), Arc::new(move || clock_now.load(Ordering::SeqCst)), false)
    };
    let (actor, handle) = ractor::Actor::spawn(None, MemoryActor, args).await.expect("spawn");
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let short = engram(Spec {
        claim: "The staging token rotates hourly.",
        ttl: Ttl::parse("PT2S").expect("ttl"),
        ..Spec::default()
    });
    let put = Box::new(PutRequest { who: dev.clone(), engram: short.clone(), project: "a".to_owned() });
    ractor::call!(actor, MemoryMsg::Put, put).expect("call").expect("put");
    let query = || Box::new(QueryRequest { who: dev.clone(), text: "staging token".to_owned(), options: q(5) });
    assert_eq!(ractor::call!(actor, MemoryMsg::Query, query()).expect("call").expect("query").hits.len(), 1);
    now.store(1_004, Ordering::SeqCst);
    // No message arrives: the timer wakes the actor and the sweep, due on the injected clock, moves the engram.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let store = Store::open(&dir.path().join("memory")).expect("open the store beside the actor");
        if store.get("a", &short.id).expect("get").expect("there").tier == Tier::Cold {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the idle actor never swept the expired engram");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ractor::call!(actor, MemoryMsg::Query, query()).expect("call").expect("query").hits.is_empty());
    let stats = ractor::call!(actor, MemoryMsg::Stats).expect("call").expect("stats");
    assert_eq!((stats.hot, stats.cold), (0, 1));
    actor.stop(None);
    handle.await.expect("stopped");
}

#[tokio::test]
async fn the_memory_actor_leaves_expired_engrams_out_of_queries_between_sweeps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let now = Arc::new(AtomicI64::new(1_000));
    let clock_now = now.clone();
    let args = MemoryArgs {
        sweep_every: 3_600,
        ..MemoryArgs::new(dir.path().join("memory"), Arc::new(move || clock_now.load(Ordering::SeqCst)), false)
    };
    let (actor, handle) = ractor::Actor::spawn(None, MemoryActor, args).await.expect("spawn");
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let short = engram(Spec {
        claim: "The staging token rotates hourly.",
        ttl: Ttl::parse("PT2S").expect("ttl"),
        ..Spec::default()
    });
    let put = Box::new(PutRequest { who: dev.clone(), engram: short.clone(), project: "a".to_owned() });
    ractor::call!(actor, MemoryMsg::Put, put).expect("call").expect("put");
    now.store(1_004, Ordering::SeqCst);
    let query = Box::new(QueryRequest { who: dev.clone(), text: "staging token".to_owned(), options: q(5) });
    assert!(ractor::call!(actor, MemoryMsg::Query, query).expect("call").expect("query").hits.is_empty());
    let got = ractor::call!(actor, MemoryMsg::Get, dev.clone(), short.id.clone()).expect("call").expect("get");
    assert_eq!(got.expect("there").tier, Tier::Hot, "not swept yet: the next sweep is an hour away");
    let stats = ractor::call!(actor, MemoryMsg::Stats).expect("call").expect("stats");
    assert_eq!((stats.hot, stats.cold), (0, 1), "counted cold all the same");
    now.store(4_600, Ordering::SeqCst);
    let got = ractor::call!(actor, MemoryMsg::Get, dev.clone(), short.id.clone()).expect("call").expect("get");
    assert_eq!(got.expect("there").cold_reason.as_deref(), Some("expired"), "swept once the period passed");
    actor.stop(None);
    handle.await.expect("stopped");
}

#[test]
fn a_k_out_of_range_is_refused_and_recall_caps_it() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    memory.put_as(&dev, &engram(Spec { claim: "The port is 5173.", ..Spec::default() }), "a", 0).expect("put");
    for k in [0, MAX_K + 1, usize::MAX] {
        assert_eq!(code(memory.query_as(&dev, "port", &q(k)).expect_err("refused")), ErrorCode::ArgumentInvalid);
    }
    assert_eq!(memory.query_as(&dev, "port", &q(MAX_K)).expect("the cap itself").hits.len(), 1);
    // The trusted path caps instead of sizing anything by the number.
    assert_eq!(memory.query("port", "a", None, usize::MAX).expect("capped").hits.len(), 1);
}

/// A question is bounded like a search query (an outside attack on issue 61's fixes: a 400,000-word recall took
/// seconds and hundreds of megabytes): past the cap it is refused with its code, and what fits is answered.
#[test]
fn a_question_past_the_cap_is_refused() {
    let (_dir, mut memory) = open();
    let dev = Principal::agent("dev", "programmer", "a", "r1");
    let long = "word ".repeat(crate::workspace::MAX_QUERY_CHARS / 5 + 1);
    assert_eq!(code(memory.query_as(&dev, &long, &q(5)).expect_err("too long")), ErrorCode::ArgumentInvalid);
    assert!(memory.query_as(&dev, &long[..crate::workspace::MAX_QUERY_CHARS], &q(5)).is_ok());
}
