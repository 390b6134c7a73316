//! A synthetic, deterministic corpus of engineering conversations, for tests, benches and demos of the DAG: each
//! session mixes decisions, constraints, obligations, errors, commands, outcomes and small talk about a rotating set
//! of components, so the summarizer, the gate and recall have real work to do.

use less_runtime::dag::NewMessage;

use crate::rng::Rng;

/// One session of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusSession {
    /// Its project.
    pub project: String,
    /// Its id.
    pub session: String,
    /// Its messages, in order.
    pub messages: Vec<NewMessage>,
}

const COMPONENTS: &[&str] = &[
    "billing",
    "ledger",
    "gateway",
    "scheduler",
    "indexer",
    "auth",
    "search",
    "notifier",
    "exporter",
    "importer",
    "renderer",
    "planner",
    "tracker",
    "archiver",
    "mailer",
    "resolver",
    "catalog",
    "quota",
    "audit",
    "checkout",
];
const TECH: &[&str] = &[
    "postgres",
    "sqlite",
    "redis",
    "kafka",
    "nats",
    "tantivy",
    "grpc",
    "axum",
    "tokio",
    "rocksdb",
    "s3",
    "clickhouse",
    "duckdb",
    "etcd",
    "minio",
];
const ERRORS: &[&str] = &[
    "a deadlock",
    "an overflow",
    "a timeout",
    "a null dereference",
    "a schema mismatch",
    "a race",
    "an OOM kill",
    "a stale cache",
    "a missing index",
    "a panic in serde",
];
const ENVS: &[&str] = &["staging", "canary", "eu-west", "us-east", "preprod"];
const SMALL_TALK: &[&str] =
    &["Thanks, that helps.", "Sounds good to me.", "Ok, let me look.", "Great, thank you!", "Sure, one moment."];

/// Start of the corpus' clock: 2026-01-05T09:00:00Z.
pub const CORPUS_START: i64 = 1_767_603_600;

/// `sessions_per_project` sessions of `messages_per_session` messages for each project, a day apart, messages a
/// minute apart; the same arguments give the same corpus.
pub fn corpus(
    projects: &[&str],
    sessions_per_project: usize,
    messages_per_session: usize,
    seed: u64,
) -> Vec<CorpusSession> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for n in 0..sessions_per_project {
        for (p, project) in projects.iter().enumerate() {
            let start = CORPUS_START + (n as i64) * 86_400 + (p as i64) * 3_600;
            let session = format!("{project}-s{n:04}");
            let messages = (0..messages_per_session)
                .map(|i| {
                    let role = if i % 2 == 0 { "user" } else { "assistant" };
                    NewMessage {
                        role: role.to_owned(),
                        content: line(&mut rng),
                        name: Some(if i % 2 == 0 { "dana".to_owned() } else { "assistant".to_owned() }),
                        at: Some(start + 60 * i as i64),
                    }
                })
                .collect();
            out.push(CorpusSession { project: (*project).to_owned(), session, messages });
        }
    }
    out
}

fn line(rng: &mut Rng) -> String {
    let c = rng.pick(COMPONENTS);
    let t = rng.pick(TECH);
    let t2 = rng.pick(TECH);
    let e = rng.pick(ERRORS);
    let env = rng.pick(ENVS);
    let n = 10 + rng.below(990);
    match rng.below(11) {
        0 => format!("We decided to move the {c} onto {t}, since the current setup cannot keep up in {env}."),
        1 => format!("The {c} must never write to {t} without a schema review; that rule stays."),
        2 => format!("TODO: add load tests for the {c} against {t} before the {env} rollout, ticket {n}."),
        3 => format!(
            "Running `cargo test -p {c}` failed with {e} in src/{c}/store.rs line {n}. Stack trace points at the {t} client."
        ),
        4 => format!("Fixed {e} in the {c}; the whole suite passes now on {env}."),
        5 => format!("The {c} service listens on port {} and keeps its state in {t}.", 7000 + n),
        6 => format!("Let's switch the {c} storage layer to {t2} instead of {t}; the migration plan is in ticket {n}."),
        7 => format!("How long does the {c} migration take on the {env} cluster with {t}?"),
        8 => format!("About {n} seconds per shard on {env}; {t} copies in parallel, so the {c} stays readable."),
        9 => format!("The {c} architecture keeps one writer per shard and a {t} replica per region for reads."),
        _ => (*rng.pick(SMALL_TALK)).to_owned(),
    }
}

/// A trivial session (greetings and thanks): what the significance gate skips.
pub fn trivial_session(project: &str, session: &str, at: i64) -> CorpusSession {
    let texts = ["hi", "Hello! How can I help today?", "nothing really, thanks", "Ok, have a nice day!", "bye"];
    let messages = texts
        .iter()
        .enumerate()
        .map(|(i, text)| NewMessage {
            role: if i % 2 == 0 { "user" } else { "assistant" }.to_owned(),
            content: (*text).to_owned(),
            name: None,
            at: Some(at + 30 * i as i64),
        })
        .collect();
    CorpusSession { project: project.to_owned(), session: session.to_owned(), messages }
}
