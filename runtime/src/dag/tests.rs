//! DAG tests over the real SQLite archive: `less-eval`'s 64-session corpus, invariants as properties (acyclic,
//! lossless, summaries smaller than their input, escalation converging), the gate and backfill, expansion and impact,
//! the actors. `expand_query` uses the real embedding model when it is provisioned, hash recall otherwise.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;

use less_eval::corpus::CORPUS_START;

use super::*;
use crate::memory::Memory;

/// A session of `less-eval`'s corpus with this crate's [`NewMessage`]s (`less-eval` is built against its own copy
/// of the runtime, so its sessions are taken apart field by field).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CorpusSession {
    project: String,
    session: String,
    messages: Vec<NewMessage>,
}

fn session_of(s: less_eval::corpus::CorpusSession) -> CorpusSession {
    let messages = s
        .messages
        .into_iter()
        .map(|m| NewMessage { role: m.role, content: m.content, name: m.name, at: m.at })
        .collect();
    CorpusSession { project: s.project, session: s.session, messages }
}

fn corpus(
    projects: &[&str],
    sessions_per_project: usize,
    messages_per_session: usize,
    seed: u64,
) -> Vec<CorpusSession> {
    let sessions = less_eval::corpus::corpus(projects, sessions_per_project, messages_per_session, seed);
    sessions.into_iter().map(session_of).collect()
}

fn trivial_session(project: &str, session: &str, at: i64) -> CorpusSession {
    session_of(less_eval::corpus::trivial_session(project, session, at))
}

fn counter() -> &'static TokenCounter {
    TokenCounter::shared(Encoding::default())
}

fn load(archive: &mut Archive, sessions: &[CorpusSession]) {
    for s in sessions {
        archive.append(&s.project, &s.session, &s.messages, CORPUS_START, &|t| counter().count(t)).expect("succeeds");
        archive.end_session(&s.project, &s.session).expect("succeeds");
    }
}

fn condenser(config: DagConfig) -> Condenser {
    Condenser::new(config, Arc::new(Extractive))
}

/// Checks the DAG's invariants and returns the messages reachable from the top nodes.
fn check_dag(archive: &Archive) -> HashSet<String> {
    let nodes = archive.all_nodes().expect("succeeds");
    let mut parents: HashMap<String, usize> = HashMap::new();
    for node in &nodes {
        let children = archive.children(&node.id).expect("succeeds");
        let messages = archive.node_messages(&node.id).expect("succeeds");
        match node.kind {
            NodeKind::Session => {
                assert!(children.is_empty(), "{} has child nodes", node.id);
                assert!(!messages.is_empty(), "{} has no messages", node.id);
                let input: u32 = messages.iter().map(|m| m.tokens).sum();
                assert_eq!(node.input_tokens, input, "{}: input is the sum of its messages", node.id);
            }
            _ => {
                assert!(messages.is_empty());
                assert!(!children.is_empty());
                let input: u32 = children.iter().map(|c| c.token_count).sum();
                assert_eq!(node.input_tokens, input, "{}: input is the sum of its children", node.id);
                for child in &children {
                    // Edges go one level down only: no cycle is possible.
                    assert_eq!(child.depth + 1, node.depth, "{} -> {}", node.id, child.id);
                    assert_eq!(child.project, node.project);
                    *parents.entry(child.id.clone()).or_default() += 1;
                }
            }
        }
        assert!(node.token_count < node.input_tokens, "{}: {} !< {}", node.id, node.token_count, node.input_tokens);
        assert_eq!(node.token_count, counter().count(&node.content));
        assert!((1..=3).contains(&node.level));
        assert_eq!(node.confidence, level_confidence(node.level));
    }
    assert!(parents.values().all(|&n| n == 1), "a node has two parents");
    // Walk from the tops: every node is visited exactly once (a tree per top: acyclic), every message found.
    let mut visited = HashSet::new();
    let mut messages = HashSet::new();
    let mut stack: Vec<String> = archive.tops(None).expect("succeeds").into_iter().map(|n| n.id).collect();
    while let Some(id) = stack.pop() {
        assert!(visited.insert(id.clone()), "{id} reached twice");
        for child in archive.children(&id).expect("succeeds") {
            stack.push(child.id);
        }
        for m in archive.node_messages(&id).expect("succeeds") {
            assert!(messages.insert(m.id), "a message in two session nodes");
        }
    }
    assert_eq!(visited.len(), nodes.len(), "every node is reachable from a top");
    messages
}

fn skipped_messages(archive: &Archive) -> HashSet<String> {
    let mut out = HashSet::new();
    for segment in archive.skipped_segments(None).expect("succeeds") {
        for m in archive
            .session_range(&segment.project, &segment.session, segment.first_turn, segment.last_turn)
            .expect("succeeds")
        {
            out.insert(m.id);
        }
    }
    out
}

fn all_ids(archive: &Archive) -> HashSet<String> {
    archive.all_messages().expect("succeeds").into_iter().map(|m| m.id).collect()
}

#[test]
fn sixty_four_sessions_build_eight_arcs_and_two_epochs() {
    let dir = tempfile::tempdir().expect("succeeds");
    let mut archive = Archive::open(dir.path()).expect("succeeds");
    let sessions = corpus(&["alpha", "beta"], 32, 10, 7);
    load(&mut archive, &sessions);
    let report = condenser(DagConfig::default()).build(&mut archive, CORPUS_START).expect("succeeds");
    assert_eq!(report.skipped, 0, "{report:?}");
    assert_eq!((report.sessions, report.arcs, report.epochs), (64, 8, 2), "{report:?}");
    let stats = archive.stats().expect("succeeds");
    assert_eq!((stats.messages, stats.session_nodes, stats.arcs, stats.epochs), (640, 64, 8, 2));
    assert_eq!(stats.pending_messages, 0);
    let tops = archive.tops(None).expect("succeeds");
    assert_eq!(
        tops.iter().map(|n| (n.project.as_str(), n.kind)).collect::<Vec<_>>(),
        [("alpha", NodeKind::Epoch), ("beta", NodeKind::Epoch)]
    );
    assert_eq!(check_dag(&archive), all_ids(&archive), "lossless: every message under a top node");
    // Depth-aware content: sessions keep commands and errors, epochs only architecture, pivots and constraints.
    let nodes = archive.all_nodes().expect("succeeds");
    let labels = |kind: NodeKind| -> BTreeSet<String> {
        nodes
            .iter()
            .filter(|n| n.kind == kind)
            .flat_map(|n| n.content.lines().skip(1).filter_map(|l| l.strip_prefix("- ")?.split_once(':')))
            .map(|(label, _)| label.to_owned())
            .collect()
    };
    assert!(labels(NodeKind::Session).contains("error"), "{:?}", labels(NodeKind::Session));
    assert!(!labels(NodeKind::Arc).contains("error"));
    let text_of = |kind: NodeKind| -> String {
        nodes.iter().filter(|n| n.kind == kind).map(|n| n.content.as_str()).collect::<Vec<_>>().join("\n")
    };
    assert!(text_of(NodeKind::Session).contains("`cargo test -p "), "sessions keep the commands run");
    assert!(!text_of(NodeKind::Arc).contains("`cargo test -p "), "arcs drop command-level detail");
    let epoch = labels(NodeKind::Epoch);
    assert!(
        !epoch.is_empty()
            && epoch.iter().all(|l| ["architecture", "pivot", "constraint", "decision"].contains(&l.as_str())),
        "{epoch:?}"
    );
    // Session summary lines cite their messages.
    let session = nodes.iter().find(|n| n.kind == NodeKind::Session).expect("succeeds");
    let cited = session.content.lines().filter(|l| l.contains("(sam:msg:m-")).count();
    assert!(cited > 0, "{}", session.content);
    // Building again changes nothing; the same corpus in another archive gets the same node ids.
    assert_eq!(
        condenser(DagConfig::default()).build(&mut archive, CORPUS_START).expect("succeeds"),
        BuildReport::default()
    );
    let other = tempfile::tempdir().expect("succeeds");
    let mut again = Archive::open(other.path()).expect("succeeds");
    load(&mut again, &sessions);
    condenser(DagConfig::default()).build(&mut again, CORPUS_START).expect("succeeds");
    let ids = |a: &Archive| a.all_nodes().expect("succeeds").into_iter().map(|n| (n.id, n.content)).collect::<Vec<_>>();
    assert_eq!(ids(&archive), ids(&again), "deterministic");
}

#[test]
fn raw_messages_are_immutable_and_deduplicated() {
    let dir = tempfile::tempdir().expect("succeeds");
    let mut archive = Archive::open(dir.path()).expect("succeeds");
    let s = &corpus(&["alpha"], 1, 6, 1)[0];
    let first = archive.append(&s.project, &s.session, &s.messages, 0, &|t| counter().count(t)).expect("succeeds");
    assert_eq!(first.len(), 6);
    // The same transcript again: nothing new. Two equal messages in one batch are both kept.
    assert!(
        archive.append(&s.project, &s.session, &s.messages, 0, &|t| counter().count(t)).expect("succeeds").is_empty()
    );
    let twice = vec![s.messages[0].clone(), s.messages[0].clone()];
    assert_eq!(archive.append(&s.project, "other", &twice, 0, &|t| counter().count(t)).expect("succeeds").len(), 2);
    let conn = rusqlite::Connection::open(dir.path().join("memory.sqlite3")).expect("succeeds");
    let update = conn.execute("UPDATE dag_messages SET content = 'changed'", []);
    assert!(update.expect_err("fails").to_string().contains("immutable"));
    let delete = conn.execute("DELETE FROM dag_messages", []);
    assert!(delete.expect_err("fails").to_string().contains("never deleted"));
    assert_eq!(archive.all_messages().expect("succeeds").len(), 8);
    assert_eq!(first[0].tokens, counter().count(&s.messages[0].content) + MESSAGE_FRAMING_TOKENS);
}

#[test]
fn gate_skips_trivial_sessions_keeps_them_and_backfill_summarizes_them() {
    let dir = tempfile::tempdir().expect("succeeds");
    let mut archive = Archive::open(dir.path()).expect("succeeds");
    let mut sessions = corpus(&["alpha"], 7, 10, 3);
    sessions.insert(2, trivial_session("alpha", "small-talk-1", CORPUS_START + 10));
    sessions.push(trivial_session("alpha", "small-talk-2", CORPUS_START + 20));
    load(&mut archive, &sessions);
    let config = DagConfig::default();
    let report = condenser(config.clone()).build(&mut archive, CORPUS_START).expect("succeeds");
    assert_eq!((report.sessions, report.skipped, report.arcs), (7, 2, 0), "{report:?}");
    let skips = archive.events(Some("session_skipped")).expect("succeeds");
    assert_eq!(skips.len(), 2);
    assert_eq!(skips[0].detail["session"], "small-talk-1");
    assert_eq!(skips[0].detail["gate"]["substantive"], 0);
    // The raw record is kept; the skipped messages are not under any node.
    let reachable = check_dag(&archive);
    let skipped = skipped_messages(&archive);
    assert_eq!(skipped.len(), 10);
    assert!(reachable.is_disjoint(&skipped));
    assert_eq!(&reachable | &skipped, all_ids(&archive));
    assert_eq!(archive.session_messages("alpha", "small-talk-2", 0).expect("succeeds").len(), 5);
    // Backfill one session, then the rest: the eighth session node completes an arc.
    let one = condenser(config.clone()).backfill(&mut archive, Some("small-talk-2"), CORPUS_START).expect("succeeds");
    assert_eq!((one.backfilled, one.arcs), (1, 1), "{one:?}");
    let rest = condenser(config).backfill(&mut archive, None, CORPUS_START).expect("succeeds");
    assert_eq!(rest.backfilled, 1);
    assert_eq!(check_dag(&archive), all_ids(&archive));
    assert_eq!(archive.events(Some("backfilled")).expect("succeeds").len(), 2);
    // Disabled gate: nothing is skipped.
    let other = tempfile::tempdir().expect("succeeds");
    let mut archive = Archive::open(other.path()).expect("succeeds");
    load(&mut archive, &[trivial_session("alpha", "t", 0)]);
    let mut config = DagConfig::default();
    config.gate.enabled = false;
    assert_eq!(condenser(config).build(&mut archive, 0).expect("succeeds").sessions, 1);
}

#[test]
fn a_session_that_continues_after_its_summary_gets_a_second_part() {
    let dir = tempfile::tempdir().expect("succeeds");
    let mut archive = Archive::open(dir.path()).expect("succeeds");
    let s = &corpus(&["alpha"], 2, 10, 5);
    load(&mut archive, &s[..1]);
    let b = condenser(DagConfig::default());
    assert_eq!(b.build(&mut archive, 0).expect("succeeds").sessions, 1);
    archive.append("alpha", &s[0].session, &s[1].messages, 0, &|t| counter().count(t)).expect("succeeds");
    assert_eq!(archive.stats().expect("succeeds").pending_messages, 10);
    assert_eq!(b.build(&mut archive, 0).expect("succeeds").sessions, 1);
    let segments = archive.segments_of("alpha", &s[0].session).expect("succeeds");
    assert_eq!(segments.iter().map(|g| (g.first_turn, g.last_turn)).collect::<Vec<_>>(), [(0, 9), (10, 19)]);
    assert_eq!(check_dag(&archive), all_ids(&archive));
}

/// A summarizer that misbehaves in every way a real one can: errors, panics, empty or oversized output.
struct Chaos(u64);

impl Summarizer for Chaos {
    fn name(&self) -> &str {
        "chaos"
    }

    fn summarize<'a>(&'a self, input: SummaryInput<'a>, level: Level, target: u32) -> SummaryFuture<'a> {
        let salt = self.0 ^ (input.items.len() as u64) ^ u64::from(target) ^ (level as u64);
        let answer = match salt % 6 {
            0 => Err(SummarizeError("model unavailable".into())),
            1 => panic!("summarizer bug"),
            2 => Ok(String::new()),
            3 => Ok(input.items.iter().map(|i| i.content.repeat(2)).collect::<Vec<_>>().join("\n")),
            4 => return Box::pin(async { panic!("summarizer bug, while it is awaited") }),
            _ => Ok("short".to_owned()),
        };
        Box::pin(std::future::ready(answer))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn escalation_terminates_and_never_grows(
        contents in proptest::collection::vec("[a-z ]{0,200}", 1..12),
        target in 1u32..400,
        seed in any::<u64>(),
    ) {
        let items: Vec<SummaryItem> = contents
            .iter()
            .enumerate()
            .map(|(i, c)| SummaryItem {
                id: format!("m-{i:012}"),
                role: "user".into(),
                content: c.clone(),
                tokens: counter().count(c) + MESSAGE_FRAMING_TOKENS,
                at: 0,
            })
            .collect();
        let input = SummaryInput { kind: NodeKind::Session, project: "p", session: Some("s"), items: &items };
        let input_tokens = input.tokens();
        for summarizer in [&Chaos(seed) as &dyn Summarizer, &Extractive] {
            let summary = Driver::default().escalate(summarizer, &input, target, counter());
            prop_assert!((1..=3).contains(&summary.level));
            prop_assert_eq!(summary.attempts.len(), usize::from(summary.level));
            prop_assert!(summary.tokens < input_tokens, "{} !< {}", summary.tokens, input_tokens);
            prop_assert_eq!(summary.tokens, counter().count(&summary.content));
            prop_assert_eq!(summary.input_tokens, input_tokens);
            let effective = target.min(input_tokens - 1).max(1);
            let bound = if summary.level == 1 { effective } else { (effective / 2).max(1) };
            prop_assert!(summary.tokens <= bound);
        }
    }

    #[test]
    fn any_corpus_gives_a_lossless_acyclic_dag(
        n_projects in 1usize..3,
        n_sessions in 1usize..14,
        n_messages in 1usize..12,
        trivial in proptest::collection::vec(any::<bool>(), 14),
        arc_every in 1usize..5,
        epoch_every in 1usize..4,
        seed in any::<u64>(),
    ) {
        let projects = ["alpha", "beta"];
        let mut sessions = corpus(&projects[..n_projects], n_sessions, n_messages, seed);
        for (i, t) in trivial.iter().enumerate().filter(|(_, t)| **t).take(n_sessions) {
            let _ = t;
            sessions.insert(i.min(sessions.len()), trivial_session(projects[i % n_projects], &format!("t{i}"), i as i64));
        }
        let dir = tempfile::tempdir().expect("succeeds");
        let mut archive = Archive::open(dir.path()).expect("succeeds");
        load(&mut archive, &sessions);
        let config = DagConfig { arc_every, epoch_every, ..DagConfig::default() };
        let b = condenser(config);
        let report = b.build(&mut archive, 0).expect("succeeds");
        let reachable = check_dag(&archive);
        let skipped = skipped_messages(&archive);
        prop_assert!(reachable.is_disjoint(&skipped));
        prop_assert_eq!(&reachable | &skipped, all_ids(&archive));
        prop_assert_eq!(report.sessions + report.skipped, sessions.len());
        // Arcs form exactly when enough sessions wait.
        for project in &projects[..n_projects] {
            let sessions_of = archive.all_nodes().expect("succeeds").iter().filter(|n| n.project == *project && n.kind == NodeKind::Session).count();
            prop_assert_eq!(archive.orphans(project, NodeKind::Session).expect("succeeds").len(), sessions_of % arc_every);
        }
        b.backfill(&mut archive, None, 0).expect("succeeds");
        prop_assert_eq!(check_dag(&archive), all_ids(&archive));
    }
}

#[test]
fn expand_walks_down_to_the_raw_messages() {
    let dir = tempfile::tempdir().expect("succeeds");
    let index = Memory::open_without_model(&index_dir(dir.path())).expect("succeeds");
    let mut config = DagConfig::default();
    config.gate.enabled = false;
    let mut dag = Dag::open_with(dir.path(), condenser(config), index).expect("succeeds");
    for s in corpus(&["alpha"], 32, 6, 11) {
        dag.ingest(&s.project, &s.session, &s.messages, 0).expect("succeeds");
        dag.end_session(&s.project, &s.session).expect("succeeds");
    }
    dag.build(0).expect("succeeds");
    let top = dag.archive().tops(None).expect("succeeds").remove(0);
    assert_eq!(top.kind, NodeKind::Epoch);
    let arcs = dag.expand(&top.id).expect("succeeds");
    assert_eq!(arcs.children.len(), 4);
    let Child::Node(arc) = &arcs.children[0] else { panic!("an arc") };
    let sessions = dag.expand(&arc.id).expect("succeeds");
    assert_eq!(sessions.parent.as_deref(), Some(top.id.as_str()));
    assert_eq!(sessions.children.len(), 8);
    let Child::Node(session) = &sessions.children[0] else { panic!("a session") };
    let messages = dag.expand(&session.id).expect("succeeds");
    assert_eq!(messages.children.len(), 6);
    let Child::Message(m) = &messages.children[0] else { panic!("a message") };
    let message = dag.expand(&format!("sam:msg:{}", m.id)).expect("succeeds");
    assert_eq!(message.parent.as_deref(), Some(session.id.as_str()));
    assert!(message.children.is_empty());
    assert_eq!(dag.path_of_message(&m.id).expect("succeeds"), [top.id.clone(), arc.id.clone(), session.id.clone()]);
    assert!(matches!(dag.expand("S-000000000000"), Err(DagError::NotFound(_))));
}

#[test]
fn expand_query_answers_from_an_old_raw_message_within_budget() {
    let dir = tempfile::tempdir().expect("succeeds");
    // The real model when provisioned (CI provisions it), else hash recall alone.
    let mut dag = Dag::open(dir.path(), DagConfig::default()).expect("succeeds");
    let mut sessions = corpus(&["alpha", "beta"], 16, 8, 21);
    let needle = "Marta mentioned that her cat goes by Pixel and naps on the warm rack server.";
    sessions[2].messages[3].content = needle.to_owned();
    let old = sessions[2].clone();
    for s in &sessions {
        dag.ingest(&s.project, &s.session, &s.messages, 0).expect("succeeds");
        dag.end_session(&s.project, &s.session).expect("succeeds");
    }
    let report = dag.build(0).expect("succeeds");
    assert_eq!((report.sessions, report.arcs), (32, 4));
    // The answer is in no summary: only the raw message has it.
    assert!(dag.archive().all_nodes().expect("succeeds").iter().all(|n| !n.content.contains("Pixel")));
    let needle_id = dag.archive().session_messages(&old.project, &old.session, 3).expect("succeeds")[0].id.clone();
    for budget in [200u32, 60, 24] {
        let answer = dag.expand_query("What is the name of Marta's cat?", budget, None).expect("succeeds");
        assert!(answer.tokens <= budget, "{} > {budget}", answer.tokens);
        assert_eq!(answer.tokens, counter().count(&answer.text));
        let first = &answer.citations[0];
        assert_eq!(first.message, needle_id, "{answer:#?}");
        assert!(answer.text.contains("Pixel"), "{}", answer.text);
        assert!(answer.text.contains(&format!("sam:msg:{needle_id}")));
        // Cited with its path from the top (an arc here: 8 sessions per arc, 4 arcs per epoch) to its session.
        assert_eq!(first.path.len(), 2, "{:?}", first.path);
        assert_eq!(first.path, dag.path_of_message(&needle_id).expect("succeeds"));
        assert!(answer.nodes.contains(&first.path[0]));
    }
    // Only the other project: the message is not there.
    let answer = dag.expand_query("What is the name of Marta's cat?", 200, Some("beta")).expect("succeeds");
    assert!(answer.citations.iter().all(|c| c.project == "beta"));
    assert!(!answer.text.contains("Pixel"));
}

#[test]
fn impact_finds_dependents_by_layer_above_the_confidence_floor() {
    use less_contract::{Engram, EngramKind};
    let dir = tempfile::tempdir().expect("succeeds");
    let p = |t: &str| Pointer::parse(t).expect("succeeds");
    let mut memory = Memory::open_without_model(dir.path()).expect("succeeds");
    let e1 = Engram::builder(EngramKind::Decision, "capture is idempotent per order", "programmer")
        .pointer(p("repo:src/billing.rs#L10-L40"))
        .confidence(0.9)
        .build()
        .expect("succeeds");
    let e2 = Engram::builder(EngramKind::Fact, "refunds rely on idempotent capture", "reviewer")
        .pointer(p(&format!("sam:engram:{}", e1.id)))
        .confidence(0.8)
        .build()
        .expect("succeeds");
    let weak = Engram::builder(EngramKind::Fact, "maybe the retry loop is wrong", "reviewer")
        .pointer(p("repo:src/billing.rs#L14-L18"))
        .confidence(0.3)
        .build()
        .expect("succeeds");
    for e in [&e1, &e2, &weak] {
        memory.put(e, "shop", 0).expect("succeeds");
    }
    drop(memory);
    let index = Memory::open_without_model(&index_dir(dir.path())).expect("succeeds");
    let config = DagConfig { arc_every: 1, epoch_every: 1, ..DagConfig::default() };
    let mut dag = Dag::open_with(dir.path(), condenser(config), index).expect("succeeds");
    let report = serde_json::json!({"type": "task_result", "engrams": [{
        "kind": "decision", "claim": "capture keeps one row per order id",
        "pointers": ["repo:src/billing.rs#L12-L20"]}]});
    let mut messages =
        vec![NewMessage { role: "programmer".into(), content: report.to_string(), name: None, at: Some(0) }];
    for i in 0..6 {
        messages.push(NewMessage {
            role: "manager".into(),
            content: format!("Thanks, noted {i}. Looking at it now, one moment please."),
            name: None,
            at: Some(i),
        });
    }
    dag.ingest("shop", "s1", &messages, 0).expect("succeeds");
    dag.end_session("shop", "s1").expect("succeeds");
    let built = dag.build(0).expect("succeeds");
    assert_eq!((built.sessions, built.arcs, built.epochs), (1, 1, 1), "{built:?}");
    let session = dag.archive().orphans("shop", NodeKind::Session).expect("succeeds");
    assert!(session.is_empty());
    let nodes = dag.archive().all_nodes().expect("succeeds");
    let find = |kind: NodeKind| nodes.iter().find(|n| n.kind == kind).expect("succeeds").id.clone();
    assert!(nodes.iter().all(|n| n.level == 1), "{nodes:#?}");

    let impact = dag.impact(&p("repo:src/billing.rs#L15-L16"), 0.5).expect("succeeds");
    let layer =
        |n: u8| -> BTreeSet<String> { impact.items.iter().filter(|i| i.layer == n).map(|i| i.id.clone()).collect() };
    let (session, arc, epoch) = (find(NodeKind::Session), find(NodeKind::Arc), find(NodeKind::Epoch));
    // The raw message whose report cites an overlapping span (L12-L20).
    let first = dag.archive().session_messages("shop", "s1", 0).expect("succeeds")[0].id.clone();
    // Layer 1: the engram citing an overlapping span, the raw message citing one, and every summary citing it (the
    // session's; the arc's too, as arcs keep decisions); layer 2: the engram citing that engram, and the nodes
    // above; layer 3: the rest.
    assert!(layer(1).is_superset(&BTreeSet::from([e1.id.clone(), first.clone(), session.clone()])), "{impact:#?}");
    assert!(layer(2).contains(&e2.id), "{impact:#?}");
    let everything: BTreeSet<String> = impact.items.iter().map(|i| i.id.clone()).collect();
    let expected = [&e1.id, &e2.id, &first, &session, &arc, &epoch].map(|id| id.clone());
    assert_eq!(everything, BTreeSet::from(expected));
    let message = impact.items.iter().find(|i| i.id == first).expect("the message");
    assert_eq!((message.kind.as_str(), message.project.as_str()), ("message", "shop"));
    assert!(message.text.contains("capture keeps one row per order id"), "{message:?}");
    let layer_of = |id: &str| impact.items.iter().find(|i| i.id == id).expect("succeeds").layer;
    assert!(layer_of(&arc) <= layer_of(&session) + 1 && layer_of(&epoch) <= layer_of(&arc) + 1);
    assert!(impact.items.windows(2).all(|w| w[0].layer <= w[1].layer), "layer by layer");
    assert!(
        impact
            .items
            .iter()
            .all(|i| i.label == ["will_break", "likely_affected", "may_need_testing"][usize::from(i.layer - 1)])
    );
    // The weak engram appears only when the floor allows it.
    assert!(!impact.items.iter().any(|i| i.id == weak.id));
    let all = dag.impact(&p("repo:src/billing.rs#L15-L16"), 0.0).expect("succeeds");
    assert!(all.items.iter().any(|i| i.id == weak.id && i.layer == 1), "{all:#?}");
    // A span nothing cites: nothing depends on it.
    assert!(dag.impact(&p("repo:src/billing.rs#L100-L120"), 0.0).expect("succeeds").items.is_empty());
    // A raw message: its session node, then up the DAG.
    let by_message = dag.impact(&p(&format!("sam:msg:{first}")), 0.5).expect("succeeds");
    // (The arc keeps the decision line citing that message, so it is a direct dependent too.)
    let kinds: BTreeMap<&str, u8> = by_message.items.iter().map(|i| (i.kind.as_str(), i.layer)).collect();
    assert_eq!(kinds.keys().copied().collect::<Vec<_>>(), ["arc", "epoch", "session"]);
    assert_eq!(kinds["session"], 1);
    assert!(kinds["epoch"] <= kinds["arc"] + 1);
}

#[test]
fn transcripts_parse_or_say_what_is_wrong() {
    let jsonl = "{\"role\":\"user\",\"content\":\"hi\",\"at\":\"2026-01-05T09:00:00Z\"}\n\n{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}],\"name\":\"bot\"}\n";
    let messages = parse_transcript(jsonl).expect("succeeds");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].at, Some(CORPUS_START));
    assert_eq!(messages[1].content, "a\nb");
    assert_eq!(parse_transcript("[{\"role\":\"user\",\"content\":\"x\",\"at\":5}]").expect("succeeds")[0].at, Some(5));
    let bad = parse_transcript("{\"role\":\"user\",\"content\":\"ok\"}\n{\"role\": oops}\n").expect_err("fails");
    assert_eq!(bad.code, crate::ErrorCode::JsonMalformed);
    assert!(bad.message.starts_with("line 2:"), "{}", bad.message);
    let bad = parse_transcript("[{\"content\":\"no role\"}]").expect_err("fails");
    assert_eq!((bad.code, bad.path.as_str()), (crate::ErrorCode::TranscriptInvalid, "/0/role"));
    let bad = parse_transcript("[{\"role\":\"user\",\"content\":\"x\",\"at\":\"yesterday\"}]").expect_err("fails");
    assert_eq!(bad.path, "/0/at");
    assert!(bad.message.contains("RFC 3339"));
    assert_eq!(parse_transcript("42").expect_err("fails").path, "/0");
    assert_eq!(parse_transcript(" \n").expect_err("fails").code, crate::ErrorCode::TranscriptInvalid);
}

#[test]
fn summarizer_actors_build_what_runs_record() {
    use crate::dag::actor::{ArchiveQueue, SummarizerArgs, SummarizerMsg, SummarizerSupervisor};
    use ractor::Actor;
    let dir = tempfile::tempdir().expect("succeeds");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("succeeds");
    rt.block_on(async {
        let config = DagConfig { arc_every: 4, epoch_every: 2, ..DagConfig::default() };
        // A summarizer that always fails: every node falls back to the deterministic level, nothing blocks.
        struct Broken;
        impl Summarizer for Broken {
            fn name(&self) -> &str {
                "broken"
            }
            fn summarize<'a>(&'a self, _: SummaryInput<'a>, _: Level, _: u32) -> SummaryFuture<'a> {
                Box::pin(std::future::ready(Err(SummarizeError("down".into()))))
            }
        }
        for (summarizer, sub) in [(Arc::new(Extractive) as Arc<dyn Summarizer>, "ok"), (Arc::new(Broken), "broken")] {
            let args = SummarizerArgs {
                dir: dir.path().join(sub),
                condenser: Condenser::new(config.clone(), summarizer),
                clock: Arc::new(|| 0),
                index: false,
            };
            let (actor, handle) = Actor::spawn(None, SummarizerSupervisor, args).await.expect("succeeds");
            for s in corpus(&["alpha"], 8, 8, 9) {
                let queue = Arc::new(ArchiveQueue::new(s.project.clone(), s.session.clone()));
                for m in s.messages {
                    queue.push(m, &actor).await.expect("the summarizers hear of it");
                }
                actor
                    .send_message(SummarizerMsg::EndSession { project: s.project.clone(), session: s.session.clone() })
                    .expect("succeeds");
            }
            let report = ractor::call!(actor, SummarizerMsg::Drain).expect("succeeds");
            assert_eq!((report.sessions, report.arcs, report.epochs), (8, 2, 1), "{sub}: {report:?}");
            actor.stop(None);
            handle.await.expect("succeeds");
            let archive = Archive::open(&dir.path().join(sub)).expect("succeeds");
            assert_eq!(check_dag(&archive), all_ids(&archive));
            let levels: BTreeSet<u8> = archive.all_nodes().expect("succeeds").iter().map(|n| n.level).collect();
            if sub == "broken" {
                assert_eq!(levels, BTreeSet::from([3]));
                assert_eq!(archive.events(Some("escalated")).expect("succeeds").len(), 11);
            } else {
                assert!(levels.contains(&1));
            }
        }
    });
}

/// The archive and the engrams share one SQLite file: writes from both, at the same time, all succeed (a deferred
/// transaction upgraded to a write after the other connection's commit used to fail with "database is locked").
#[test]
fn the_archive_and_the_engrams_write_the_same_file_at_once() {
    use less_contract::{Engram, EngramKind};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    let mut memory = Memory::open_without_model(dir.path()).expect("memory");
    let writer = std::thread::spawn(move || {
        let mut archive = Archive::open(&path).expect("archive");
        for s in corpus(&["shop"], 60, 3, 1) {
            archive.append(&s.project, &s.session, &s.messages, 0, &|t| counter().count(t)).expect("append");
        }
    });
    for i in 0..60 {
        let e = Engram::builder(EngramKind::Fact, format!("the dev server {i} listens on port {}", 8000 + i), "dev")
            .pointer(Pointer::parse("repo:src/config.rs#L13-L14").expect("pointer"))
            .build()
            .expect("engram");
        memory.put(&e, "shop", 0).expect("a put beside archive writes");
    }
    writer.join().expect("archive writer");
    assert_eq!(memory.stats().expect("stats").hot, 60);
    let recall = memory.query("which port does the dev server 7 use", "shop", None, 5).expect("query");
    assert!(!recall.hits.is_empty());
}

/// Secrets in archived messages (issue 17): the raw messages keep them verbatim, but the summaries at every level,
/// the message index and `expand_query`'s answers — what agents read — hold credential references instead.
#[test]
fn summaries_answers_and_the_message_index_are_redacted_and_raw_messages_are_not() {
    let dir = tempfile::tempdir().expect("succeeds");
    let index = Memory::open_without_model(&index_dir(dir.path())).expect("succeeds");
    let mut dag = Dag::open_with(dir.path(), condenser(DagConfig { arc_every: 2, ..DagConfig::default() }), index)
        .expect("succeeds");
    let secrets = [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        "S3cr3tPass",
        "xoxb-1234567890-AbCdEfGhIjKl",
        "sk-proj-4fT9qLmN2xR7vB1cZ8wK3pY6",
        "AIzaSyD4x9Qw2Er5Ty7Ui8Op1As3Df6Gh9Jk0Lz",
        "Zq8!mK2#pL",
    ];
    let say = |content: &str| NewMessage { role: "user".to_owned(), content: content.to_owned(), name: None, at: None };
    for (n, session) in ["s1", "s2"].iter().enumerate() {
        let messages = vec![
            say(&format!("Decision: deploy with AWS key {} and the ghp token {} from now on.", secrets[0], secrets[1])),
            say(&format!("Fact: the database URL is postgres://admin:{}@db.internal/app for session {n}.", secrets[2])),
            say(&format!("Decision: the bot posts with {} and the model key {}.", secrets[3], secrets[4])),
            say(&format!("Constraint: the maps key {} must stay in the vault.", secrets[5])),
            say(&format!("Fact: the admin password is {} until Friday.", secrets[6])),
            say("Decision: the release train leaves every Thursday from the canary rack."),
        ];
        dag.ingest("shop", session, &messages, 0).expect("succeeds");
        dag.end_session("shop", session).expect("succeeds");
    }
    let built = dag.build(0).expect("succeeds");
    assert_eq!((built.sessions, built.arcs), (2, 1), "{built:?}");
    let leaks = |text: &str| secrets.iter().filter(|s| text.contains(*s)).map(|s| s.to_string()).collect::<Vec<_>>();
    let nodes = dag.archive().all_nodes().expect("succeeds");
    assert_eq!(nodes.len(), 3);
    for node in &nodes {
        assert!(leaks(&node.content).is_empty(), "{} leaks {:?}:\n{}", node.id, leaks(&node.content), node.content);
        assert!(node.content.contains("credential_ref:credential:"), "{}:\n{}", node.id, node.content);
    }
    let answer =
        dag.expand_query("which key does the bot post with and what is the database URL", 400, None).expect("succeeds");
    assert!(!answer.citations.is_empty());
    assert!(leaks(&answer.text).is_empty(), "{:?}:\n{}", leaks(&answer.text), answer.text);
    assert!(answer.text.contains("credential_ref:credential:"), "{}", answer.text);
    // The message index never stored them.
    let stored = crate::memory::Store::open(&index_dir(dir.path())).expect("succeeds");
    for engram in stored.all(crate::memory::Tier::Hot).expect("succeeds") {
        assert!(leaks(&engram.engram.claim).is_empty(), "{}", engram.engram.claim);
    }
    // Lossless: the archive keeps every message verbatim.
    let raw = dag.archive().session_messages("shop", "s1", 0).expect("succeeds");
    let all: String = raw.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
    assert_eq!(leaks(&all).len(), secrets.len(), "{all}");
}

/// A run's archive queue holds at most `ARCHIVE_BACKLOG` messages: past that, a delivery waits until the archive
/// takes the queue, and then every message, the waiting one included, is archived.
#[test]
fn a_runs_archive_queue_is_bounded_and_loses_nothing() {
    use crate::dag::actor::{ARCHIVE_BACKLOG, ArchiveQueue, SummarizerArgs, SummarizerMsg, SummarizerSupervisor};
    use ractor::{Actor, ActorProcessingErr, ActorRef};
    /// Takes nothing: what a summarizer that lags behind looks like to the queue.
    struct Idle;
    impl Actor for Idle {
        type Msg = SummarizerMsg;
        type State = ();
        type Arguments = ();
        async fn pre_start(&self, _: ActorRef<SummarizerMsg>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }
    let dir = tempfile::tempdir().expect("succeeds");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("succeeds");
    rt.block_on(async {
        let args = SummarizerArgs {
            dir: dir.path().to_owned(),
            condenser: Condenser::new(DagConfig::default(), Arc::new(Extractive)),
            clock: Arc::new(|| 0),
            index: false,
        };
        let (archive, archive_handle) = Actor::spawn(None, SummarizerSupervisor, args).await.expect("succeeds");
        let (idle, idle_handle) = Actor::spawn(None, Idle, ()).await.expect("succeeds");
        let queue = Arc::new(ArchiveQueue::new("p", "s"));
        let say = |i: usize| NewMessage { role: "dev".into(), content: format!("message {i}"), name: None, at: None };
        for i in 0..ARCHIVE_BACKLOG {
            queue.push(say(i), &idle).await.expect("the idle actor hears of it");
        }
        let (q, idle2) = (queue.clone(), idle.clone());
        let waiting = tokio::spawn(async move { q.push(say(ARCHIVE_BACKLOG), &idle2).await.is_ok() });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "a full queue makes the next delivery wait");
        // The archive takes the queue: room again, the waiting message goes in, and a second sync archives it.
        ractor::call!(archive, SummarizerMsg::Sync, queue.clone()).expect("succeeds");
        assert!(waiting.await.expect("the waiting delivery goes on"));
        ractor::call!(archive, SummarizerMsg::Sync, queue.clone()).expect("succeeds");
        archive.stop(None);
        idle.stop(None);
        archive_handle.await.expect("succeeds");
        idle_handle.await.expect("succeeds");
    });
    let archive = Archive::open(dir.path()).expect("succeeds");
    let messages = archive.session_messages("p", "s", 0).expect("succeeds");
    assert_eq!(messages.len(), ARCHIVE_BACKLOG + 1);
    assert!(messages.iter().enumerate().all(|(i, m)| m.content == format!("message {i}")), "in order");
}

/// Summarizers that failed cannot be told of a delivery: the message stays queued (the caller hears it was not
/// woken), and the replacement archives it with the rest; nothing is dropped for want of summarizers.
#[test]
fn a_delivery_while_the_summarizers_are_down_waits_for_their_replacement() {
    use crate::dag::actor::{ArchiveQueue, NotWoken, SummarizerArgs, SummarizerMsg, SummarizerSupervisor};
    use ractor::Actor;
    let dir = tempfile::tempdir().expect("succeeds");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("succeeds");
    let args = || SummarizerArgs {
        dir: dir.path().to_owned(),
        condenser: Condenser::new(DagConfig::default(), Arc::new(Extractive)),
        clock: Arc::new(|| 0),
        index: false,
    };
    let say = |i: usize| NewMessage { role: "dev".into(), content: format!("message {i}"), name: None, at: None };
    rt.block_on(async {
        let queue = Arc::new(ArchiveQueue::new("p", "s"));
        let (first, first_handle) = Actor::spawn(None, SummarizerSupervisor, args()).await.expect("succeeds");
        queue.push(say(0), &first).await.expect("heard");
        ractor::call!(first, SummarizerMsg::Sync, queue.clone()).expect("succeeds");
        // They fail.
        let _ = first.send_message(SummarizerMsg::Fail);
        let _ = first_handle.await;
        assert_eq!(queue.push(say(1), &first).await, Err(NotWoken));
        assert_eq!(queue.push(say(2), &first).await, Ok(()), "a wake-up is owed already");
        assert_eq!(queue.len(), 2, "both wait for the replacement");
        let (second, second_handle) = Actor::spawn(None, SummarizerSupervisor, args()).await.expect("succeeds");
        second.send_message(SummarizerMsg::RecordQueued(queue.clone())).expect("succeeds");
        ractor::call!(second, SummarizerMsg::Sync, queue.clone()).expect("succeeds");
        assert!(queue.is_empty());
        second.stop(None);
        second_handle.await.expect("succeeds");
    });
    let archive = Archive::open(dir.path()).expect("succeeds");
    let contents: Vec<String> =
        archive.session_messages("p", "s", 0).expect("succeeds").into_iter().map(|m| m.content).collect();
    assert_eq!(contents, ["message 0", "message 1", "message 2"]);
}

/// The levels are supervised rest_for_one (`crate::supervision`): a failed arc level is started again with the epoch
/// level above it, the session level below keeps running; past the intensity the supervisor fails itself, so its own
/// supervisor hears of it, instead of restarting forever.
#[test]
fn a_failed_level_restarts_the_levels_above_it_and_a_crash_loop_escalates() {
    use crate::dag::actor::{SummarizerArgs, SummarizerMsg, SummarizerSupervisor};
    use crate::supervision::MAX_RESTARTS;
    use ractor::Actor;
    let dir = tempfile::tempdir().expect("succeeds");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("succeeds");
    let args = SummarizerArgs {
        dir: dir.path().to_owned(),
        condenser: Condenser::new(DagConfig::default(), Arc::new(Extractive)),
        clock: Arc::new(|| 0),
        index: false,
    };
    rt.block_on(async {
        let (supervisor, handle) = Actor::spawn(None, SummarizerSupervisor, args).await.expect("succeeds");
        // Fails the arc level and waits for its replacement; None once the supervisor is gone.
        let fail_arc = |before: Vec<ractor::ActorId>| {
            let supervisor = supervisor.clone();
            async move {
                supervisor.send_message(SummarizerMsg::FailLevel(NodeKind::Arc)).ok()?;
                for _ in 0..500 {
                    let now = ractor::call!(supervisor, SummarizerMsg::Levels).ok()?;
                    if now[1] != before[1] {
                        return Some(now);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                panic!("the arc level was not started again")
            }
        };
        let before = ractor::call!(supervisor, SummarizerMsg::Levels).expect("answers");
        let after = fail_arc(before.clone()).await.expect("restarted");
        assert_eq!(after[0], before[0], "the session level below the failed one keeps running");
        assert_ne!(after[2], before[2], "the epoch level above it was started again with it");
        // The restarted levels work: a drain goes through all three.
        ractor::call!(supervisor, SummarizerMsg::Drain).expect("the restarted levels answer");
        // A crash loop: past the intensity the supervisor fails instead of restarting again.
        let mut levels = after;
        for _ in 1..MAX_RESTARTS {
            levels = fail_arc(levels).await.expect("restarted within the intensity");
        }
        assert_eq!(fail_arc(levels).await, None, "one failure past the intensity ends the supervisor");
        let ended = tokio::time::timeout(std::time::Duration::from_secs(60), handle).await;
        assert!(ended.is_ok(), "the supervisor escalated (ended) after {} failures of one level", MAX_RESTARTS + 1);
    });
}
