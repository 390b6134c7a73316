//! Lossless memory: every message is kept verbatim, and summaries form a DAG over them (session → arc → epoch).
//!
//! - `archive.rs` — the tables: immutable raw messages, summary nodes and their edges, segments, events.
//! - `summarize.rs` — the async [`Summarizer`] seam, the default [`Extractive`] summarizer, [`escalate`] (normal →
//!   aggressive → deterministic truncation) and the [`Driver`] that waits for it from synchronous code.
//! - `gate.rs` — the significance gate.
//! - `expand.rs` — `expand`, `expand_query` and `impact`.
//! - `transcript.rs` — chat transcripts (JSON array or JSONL) to messages.
//! - `actor.rs` — the `SummarizerSupervisor` and its session, arc and epoch summarizer actors.
//!
//! [`Condenser`] holds the rules of building (what is pending, when an arc or an epoch forms) over an [`Archive`];
//! [`Dag`] adds the message index that `expand_query` recalls from: each message is also an engram (its text in
//! chunks of at most 500 characters, `sam:msg:<id>` as its pointer) in a [`Memory`] of its own, under
//! `<dir>/archive-index/`, in project `dag:<project>`. That index is derived: it records the last message it holds
//! and catches up on open.

pub(crate) mod actor;
pub(crate) mod archive;
pub(crate) mod expand;
pub(crate) mod gate;
pub(crate) mod summarize;
pub(crate) mod transcript;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use archive::{
    Archive, ArchiveStats, DagEvent, EVENT_KINDS, MESSAGE_FRAMING_TOKENS, NewMessage, Node, NodeKind, RawMessage,
    Segment,
};
pub use expand::{Answer, Child, Citation, Expansion, Impact, ImpactItem};
pub use gate::{GateConfig, GateReport};
pub use summarize::{
    Attempt, Class, Driver, Extractive, Level, MARKERS, SummarizeError, Summarizer, Summary, SummaryFuture,
    SummaryInput, SummaryItem, day, escalate, level_confidence,
};
pub use transcript::{MAX_MESSAGE_BYTES, MAX_NAME_CHARS, check_archivable, check_name, parse_transcript};

use crate::context::{redact, redact_all};
use crate::memory::{Memory, MemoryError, StoreError};
use crate::progress::{Progress, silent};
use archive::{NewNode, node_id};
use less_contract::Ttl;
use less_contract::Valid;
use less_contract::{Encoding, TokenCounter};
use less_contract::{Engram, EngramKind, MAX_CLAIM_CHARS, Scope, Source};
use less_contract::{Pointer, PointerType};

/// Errors of the DAG.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DagError {
    /// The archive failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The message index failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// No node or message has this id.
    #[error("no node or message {0}; `lessrt dag show` lists the top nodes")]
    NotFound(String),
}

/// How the DAG grows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DagConfig {
    /// An arc condenses this many session nodes of a project (default 8).
    pub arc_every: usize,
    /// An epoch condenses this many arcs of a project (default 4).
    pub epoch_every: usize,
    /// Target tokens of a session summary.
    pub session_target: u32,
    /// Target tokens of an arc summary.
    pub arc_target: u32,
    /// Target tokens of an epoch summary.
    pub epoch_target: u32,
    /// The significance gate.
    pub gate: GateConfig,
}

impl Default for DagConfig {
    fn default() -> DagConfig {
        DagConfig {
            arc_every: 8,
            epoch_every: 4,
            session_target: 320,
            arc_target: 400,
            epoch_target: 480,
            gate: GateConfig::default(),
        }
    }
}

impl DagConfig {
    fn target(&self, kind: NodeKind) -> u32 {
        match kind {
            NodeKind::Session => self.session_target,
            NodeKind::Arc => self.arc_target,
            NodeKind::Epoch => self.epoch_target,
        }
    }
}

/// Latest engrams of a project the gate compares a part with.
const KNOWN_CLAIMS: usize = 500;

/// What a build did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BuildReport {
    /// Session nodes made.
    pub sessions: usize,
    /// Session parts the gate skipped.
    pub skipped: usize,
    /// Skipped parts summarized by a backfill.
    pub backfilled: usize,
    /// Arcs made.
    pub arcs: usize,
    /// Epochs made.
    pub epochs: usize,
    /// Summaries that needed level 2 or 3.
    pub escalated: usize,
    /// Summaries that fell through to level 3, the deterministic truncation (the summarizer failed or overran twice).
    pub truncated: usize,
}

impl BuildReport {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &BuildReport) {
        self.sessions += other.sessions;
        self.skipped += other.skipped;
        self.backfilled += other.backfilled;
        self.arcs += other.arcs;
        self.epochs += other.epochs;
        self.escalated += other.escalated;
        self.truncated += other.truncated;
    }
}

/// The building rules over an archive: summarize pending session parts (through the gate), then condense orphan
/// sessions into arcs and orphan arcs into epochs.
#[derive(Clone)]
pub struct Condenser {
    config: DagConfig,
    summarizer: Arc<dyn Summarizer>,
    counter: &'static TokenCounter,
    /// Where long builds report how far they got (sessions, arcs, epochs made).
    progress: Arc<dyn Progress>,
    /// Waits for the summarizer (the condenser works on the blocking pool or in a synchronous command).
    driver: Arc<Driver>,
}

impl std::fmt::Debug for Condenser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condenser").field("config", &self.config).field("summarizer", &self.summarizer.name()).finish()
    }
}

impl Condenser {
    /// A condenser with `config` and `summarizer`.
    pub fn new(config: DagConfig, summarizer: Arc<dyn Summarizer>) -> Condenser {
        Condenser {
            config,
            summarizer,
            counter: TokenCounter::shared(Encoding::default()),
            progress: silent(),
            driver: Arc::default(),
        }
    }

    /// The same condenser, reporting its progress to `progress` (phases `summarizing sessions`, `backfilling
    /// sessions`, `making arcs`, `making epochs`; in nodes).
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Condenser {
        self.progress = progress;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &DagConfig {
        &self.config
    }

    /// Everything pending: ended session parts, then arcs and epochs of every project.
    pub fn build(&self, archive: &mut Archive, now: i64) -> Result<BuildReport, StoreError> {
        let mut report = self.summarize_pending(archive, now)?;
        for project in archive.projects()? {
            report.add(&self.condense(archive, &project, now)?);
        }
        Ok(report)
    }

    /// Summarizes (or skips, by the gate) the unprocessed messages of every ended session.
    pub fn summarize_pending(&self, archive: &mut Archive, now: i64) -> Result<BuildReport, StoreError> {
        let mut report = BuildReport::default();
        let pending = archive.pending_sessions()?;
        let total = pending.len() as u64;
        for (n, (project, session, from)) in pending.into_iter().enumerate() {
            self.progress.update("summarizing sessions", n as u64, total);
            report.add(&self.summarize_session(archive, &project, &session, from, now)?);
        }
        self.progress.update("summarizing sessions", total, total);
        Ok(report)
    }

    /// Summarizes the messages of `session` from turn `from` on (one part), unless the gate skips them.
    pub fn summarize_session(
        &self,
        archive: &mut Archive,
        project: &str,
        session: &str,
        from: i64,
        now: i64,
    ) -> Result<BuildReport, StoreError> {
        let mut report = BuildReport::default();
        let messages = archive.session_messages(project, session, from)?;
        let (Some(first), Some(last)) = (messages.first(), messages.last()) else { return Ok(report) };
        let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        let gate = gate::assess(
            &self.config.gate,
            &texts,
            || archive.known_claims(project, KNOWN_CLAIMS),
            || {
                let recent = archive.recent_messages(project, first.seq, self.config.gate.recent_messages)?;
                Ok(recent.into_iter().map(|m| m.content).collect())
            },
        )?;
        let gate_json = serde_json::to_value(&gate)
            // A report with no JSON form (a non-finite score) is a failed write, never a stored `null`.
            .map_err(|err| StoreError::Sqlite(rusqlite::Error::ToSqlConversionFailure(Box::new(err))))?;
        let mut segment = Segment {
            project: project.to_owned(),
            session: session.to_owned(),
            first_turn: first.turn,
            last_turn: last.turn,
            outcome: "skipped".to_owned(),
            node: None,
            gate: gate_json.clone(),
        };
        if gate.skip {
            archive.insert_segment(&segment, None)?;
            let detail = serde_json::json!({
                "project": project, "session": session, "first_turn": first.turn, "last_turn": last.turn,
                "messages": messages.len(), "gate": gate_json,
            });
            archive.log(now, "session_skipped", &detail)?;
            tracing::info!(target: "less.dag", project, session, messages = messages.len(), ?gate, "session_skipped");
            report.skipped += 1;
            return Ok(report);
        }
        let (node, summary) = self.session_node(project, session, &messages);
        segment.outcome = "summarized".to_owned();
        segment.node = Some(node.node.id.clone());
        archive.insert_segment(&segment, Some(&node))?;
        self.log_made(archive, &node, &summary, now, "session_summarized")?;
        report.sessions += 1;
        report.escalated += usize::from(summary.level > 1);
        report.truncated += usize::from(summary.level > 2);
        Ok(report)
    }

    /// Summarizes skipped parts (of `session` only, when given) past the gate, then condenses what they complete.
    pub fn backfill(&self, archive: &mut Archive, session: Option<&str>, now: i64) -> Result<BuildReport, StoreError> {
        let mut report = BuildReport::default();
        let mut projects = std::collections::BTreeSet::new();
        let skipped = archive.skipped_segments(session)?;
        let total = skipped.len() as u64;
        for (n, mut segment) in skipped.into_iter().enumerate() {
            self.progress.update("backfilling sessions", n as u64, total);
            let messages =
                archive.session_range(&segment.project, &segment.session, segment.first_turn, segment.last_turn)?;
            if messages.is_empty() {
                continue;
            }
            let (node, summary) = self.session_node(&segment.project, &segment.session, &messages);
            segment.outcome = "backfilled".to_owned();
            segment.node = Some(node.node.id.clone());
            archive.insert_segment(&segment, Some(&node))?;
            self.log_made(archive, &node, &summary, now, "backfilled")?;
            report.backfilled += 1;
            report.escalated += usize::from(summary.level > 1);
            report.truncated += usize::from(summary.level > 2);
            projects.insert(segment.project);
        }
        self.progress.update("backfilling sessions", total, total);
        for project in projects {
            report.add(&self.condense(archive, &project, now)?);
        }
        Ok(report)
    }

    /// Arcs from every `arc_every` orphan session nodes of `project`, then epochs from every `epoch_every` orphan
    /// arcs.
    pub fn condense(&self, archive: &mut Archive, project: &str, now: i64) -> Result<BuildReport, StoreError> {
        let mut report = self.condense_level(archive, project, NodeKind::Arc, now)?;
        report.add(&self.condense_level(archive, project, NodeKind::Epoch, now)?);
        Ok(report)
    }

    /// Makes nodes of `kind` (arc or epoch) while enough orphans of the level below wait.
    pub fn condense_level(
        &self,
        archive: &mut Archive,
        project: &str,
        kind: NodeKind,
        now: i64,
    ) -> Result<BuildReport, StoreError> {
        let (below, every) = match kind {
            NodeKind::Arc => (NodeKind::Session, self.config.arc_every.max(1)),
            NodeKind::Epoch => (NodeKind::Arc, self.config.epoch_every.max(1)),
            NodeKind::Session => return Ok(BuildReport::default()),
        };
        let mut report = BuildReport::default();
        // Orphans are read once: each node made here takes the next `every` of them, oldest first.
        let orphans = archive.orphans(project, below)?;
        let phase = if kind == NodeKind::Arc { "making arcs" } else { "making epochs" };
        let total = (orphans.len() / every) as u64;
        for (n, children) in orphans.chunks_exact(every).enumerate() {
            self.progress.update(phase, n as u64, total);
            let items: Vec<SummaryItem> = children
                .iter()
                .map(|c| SummaryItem {
                    id: c.id.clone(),
                    role: c.kind.as_str().to_owned(),
                    content: c.content.clone(),
                    tokens: c.token_count,
                    at: c.earliest_at,
                })
                .collect();
            let input = SummaryInput { kind, project, session: None, items: &items };
            let summary =
                self.redacted(self.driver.escalate(&*self.summarizer, &input, self.config.target(kind), self.counter));
            let ids: Vec<String> = children.iter().map(|c| c.id.clone()).collect();
            let node = NewNode {
                node: self.node(
                    kind,
                    project,
                    None,
                    &ids,
                    &summary,
                    children.iter().map(|c| (c.earliest_at, c.latest_at, c.first_seq)),
                ),
                children: ids,
                messages: Vec::new(),
            };
            archive.insert_node(&node)?;
            let event = if kind == NodeKind::Arc { "arc_built" } else { "epoch_built" };
            self.log_made(archive, &node, &summary, now, event)?;
            match kind {
                NodeKind::Arc => report.arcs += 1,
                _ => report.epochs += 1,
            }
            report.escalated += usize::from(summary.level > 1);
            report.truncated += usize::from(summary.level > 2);
        }
        self.progress.update(phase, total, total);
        Ok(report)
    }

    /// A node of `kind` covering `ids`, with `summary`; `spans` are each covered item's (earliest, latest, first
    /// archive position).
    fn node(
        &self,
        kind: NodeKind,
        project: &str,
        session: Option<&str>,
        ids: &[String],
        summary: &Summary,
        spans: impl Iterator<Item = (i64, i64, i64)> + Clone,
    ) -> Node {
        Node {
            id: node_id(kind, project, ids),
            project: project.to_owned(),
            kind,
            depth: kind.depth(),
            session: session.map(str::to_owned),
            content: summary.content.clone(),
            token_count: summary.tokens,
            input_tokens: summary.input_tokens,
            earliest_at: spans.clone().map(|s| s.0).min().unwrap_or(0),
            latest_at: spans.clone().map(|s| s.1).max().unwrap_or(0),
            level: summary.level,
            confidence: summary.confidence,
            summarizer: self.summarizer_name(summary.level),
            first_seq: spans.map(|s| s.2).min().unwrap_or(0),
        }
    }

    /// The summary with any secret or address left in it redacted (a summarizer may restate what it was given).
    fn redacted(&self, mut summary: Summary) -> Summary {
        let text = redact(&summary.content).text;
        if text != summary.content {
            summary.tokens = self.counter.count(&text);
            summary.content = text;
        }
        summary
    }

    fn summarizer_name(&self, level: u8) -> String {
        if level == 3 { "truncation".to_owned() } else { self.summarizer.name().to_owned() }
    }

    fn session_node(&self, project: &str, session: &str, messages: &[RawMessage]) -> (NewNode, Summary) {
        // The summarizer reads the messages redacted (it may be a model behind a provider's API), and what it writes
        // is redacted again: summaries are what agents read instead of the raw messages, which stay verbatim.
        let redacted = redact_all(messages.iter().map(|m| m.content.as_str()));
        let items: Vec<SummaryItem> = messages
            .iter()
            .zip(redacted)
            .map(|(m, content)| SummaryItem {
                id: m.id.clone(),
                role: m.name.clone().unwrap_or_else(|| m.role.clone()),
                tokens: if content == m.content { m.tokens } else { self.counter.count(&content) + 4 },
                content,
                at: m.at,
            })
            .collect();
        let input = SummaryInput { kind: NodeKind::Session, project, session: Some(session), items: &items };
        let summary =
            self.redacted(self.driver.escalate(&*self.summarizer, &input, self.config.session_target, self.counter));
        let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
        let node = NewNode {
            node: self.node(
                NodeKind::Session,
                project,
                Some(session),
                &ids,
                &summary,
                messages.iter().map(|m| (m.at, m.at, m.seq)),
            ),
            children: Vec::new(),
            messages: messages.iter().map(|m| m.seq).collect(),
        };
        (node, summary)
    }

    fn log_made(
        &self,
        archive: &Archive,
        node: &NewNode,
        summary: &Summary,
        now: i64,
        event: &str,
    ) -> Result<(), StoreError> {
        let n = &node.node;
        let detail = serde_json::json!({
            "node": n.id, "project": n.project, "kind": n.kind, "session": n.session,
            "tokens": n.token_count, "input_tokens": n.input_tokens, "level": n.level,
            "confidence": n.confidence, "attempts": summary.attempts,
        });
        archive.log(now, event, &detail)?;
        if summary.level > 1 {
            archive.log(now, "escalated", &detail)?;
            tracing::warn!(target: "less.dag", node = %n.id, level = n.level, "summary escalated");
        }
        tracing::info!(target: "less.dag", node = %n.id, kind = n.kind.as_str(), tokens = n.token_count,
            input_tokens = n.input_tokens, level = n.level, "{event}");
        Ok(())
    }
}

/// The archive, the condenser and the message index, for the CLI and tests (the actors hold the same parts apart).
pub struct Dag {
    archive: Archive,
    condenser: Condenser,
    index: Memory,
    dir: PathBuf,
}

impl std::fmt::Debug for Dag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dag").field("dir", &self.dir).finish()
    }
}

/// Where the message index of the archive in `dir` lives.
pub fn index_dir(dir: &Path) -> PathBuf {
    dir.join(crate::layout::ARCHIVE_INDEX_DIR)
}

impl Dag {
    /// Opens the archive in `dir` (the memory store's directory) with the default summarizer; the message index
    /// loads the embedding model on first need, when it is provisioned.
    pub fn open(dir: &Path, config: DagConfig) -> Result<Dag, DagError> {
        let index = Memory::open(&index_dir(dir))?;
        Dag::open_with(dir, Condenser::new(config, Arc::new(Extractive)), index)
    }

    /// Opens with a given condenser and message index (a model-less index: hash recall only).
    pub fn open_with(dir: &Path, condenser: Condenser, index: Memory) -> Result<Dag, DagError> {
        let archive = Archive::open(dir)?;
        let mut dag = Dag { archive, condenser, index, dir: dir.to_owned() };
        dag.catch_up_index()?;
        Ok(dag)
    }

    /// Opens the archive in `dir` to read it (`lessrt serve`): the archive read-only, the message index as given
    /// (`lessrt serve` gives [`Memory::open_to_read`], which catches an index up in memory, never on disk);
    /// messages the index does not hold yet (archived by a process that died before indexing them) are not found
    /// until a writer opens the archive.
    pub fn open_to_read(dir: &Path, index: Memory) -> Result<Dag, DagError> {
        let archive = Archive::open_read_only(dir)?;
        let condenser = Condenser::new(DagConfig::default(), Arc::new(Extractive));
        Ok(Dag { archive, condenser, index, dir: dir.to_owned() })
    }

    /// The archive.
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    /// The archive, mutably (tests).
    pub fn archive_mut(&mut self) -> &mut Archive {
        &mut self.archive
    }

    /// The condenser.
    pub fn condenser(&self) -> &Condenser {
        &self.condenser
    }

    /// The message index.
    pub fn index_mut(&mut self) -> &mut Memory {
        &mut self.index
    }

    /// Archives `messages` in `session` of `project` and indexes them; returns those stored now (the rest were
    /// already archived).
    pub fn ingest(
        &mut self,
        project: &str,
        session: &str,
        messages: &[NewMessage],
        now: i64,
    ) -> Result<Vec<RawMessage>, DagError> {
        let counter = self.condenser.counter;
        let stored = self.archive.append(project, session, messages, now, &|text| counter.count(text))?;
        self.index_stored(&stored, now)?;
        Ok(stored)
    }

    /// [`Dag::ingest`] that also ends the session, in the archive's same transaction: a process killed on the way
    /// leaves the whole transcript archived in an ended session (indexed by the next open if the kill came before
    /// the index's commit), or nothing.
    pub fn ingest_and_end(
        &mut self,
        project: &str,
        session: &str,
        messages: &[NewMessage],
        now: i64,
    ) -> Result<Vec<RawMessage>, DagError> {
        let counter = self.condenser.counter;
        let stored = self.archive.append_and_end(project, session, messages, now, &|text| counter.count(text))?;
        self.index_stored(&stored, now)?;
        Ok(stored)
    }

    fn index_stored(&mut self, stored: &[RawMessage], now: i64) -> Result<(), DagError> {
        index_messages(&mut self.index, stored, now)?;
        if let Some(last) = stored.last() {
            self.write_indexed(last.seq);
        }
        Ok(())
    }

    /// Marks `session` ended.
    pub fn end_session(&mut self, project: &str, session: &str) -> Result<(), DagError> {
        Ok(self.archive.end_session(project, session)?)
    }

    /// Builds everything pending.
    pub fn build(&mut self, now: i64) -> Result<BuildReport, DagError> {
        Ok(self.condenser.build(&mut self.archive, now)?)
    }

    /// Summarizes skipped parts past the gate.
    pub fn backfill(&mut self, session: Option<&str>, now: i64) -> Result<BuildReport, DagError> {
        Ok(self.condenser.backfill(&mut self.archive, session, now)?)
    }

    /// Commits the message index (no embedding: messages are embedded before the first query that reranks).
    pub fn flush(&mut self) -> Result<(), DagError> {
        Ok(self.index.save()?)
    }

    fn indexed_path(&self) -> PathBuf {
        index_dir(&self.dir).join("indexed-seq")
    }

    fn write_indexed(&self, seq: i64) {
        // Losing this file only costs a re-index of messages already indexed (their engrams are deduplicated), but
        // of all of them: it is replaced whole (written beside it, then renamed over it), so a process killed
        // while writing leaves the old position, never an empty file that sends the next open through the whole
        // archive.
        let path = self.indexed_path();
        if let Err(err) = crate::files::write_whole(&path, seq.to_string().as_bytes()) {
            tracing::warn!(target: "less.dag", "message index position not saved: {err}");
        }
    }

    /// Indexes archived messages the index does not hold yet (a crash between the archive's commit and the index's,
    /// or messages archived by another process).
    fn catch_up_index(&mut self) -> Result<(), DagError> {
        let done: i64 =
            std::fs::read_to_string(self.indexed_path()).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        let missing = self.archive.messages_after(done)?;
        if let Some(last) = missing.last() {
            index_messages(&mut self.index, &missing, last.at)?;
            self.write_indexed(last.seq);
        }
        Ok(())
    }
}

/// The project a message's engrams are filed under in the message index.
pub fn index_project(project: &str) -> String {
    format!("dag:{project}")
}

/// Files `messages` in the message index: each message's text in chunks of at most 500 characters (prefixed with
/// the speaker), pointing at the message.
pub fn index_messages(index: &mut Memory, messages: &[RawMessage], now: i64) -> Result<(), MemoryError> {
    let mut by_project: std::collections::BTreeMap<&str, Vec<Valid<Engram>>> = Default::default();
    for message in messages {
        by_project.entry(&message.project).or_default().extend(message_engrams(message));
    }
    for (project, engrams) in by_project {
        index.put_many(&engrams, &index_project(project), now)?;
    }
    Ok(())
}

fn message_engrams(message: &RawMessage) -> Vec<Valid<Engram>> {
    let speaker = message.name.as_deref().unwrap_or(&message.role);
    let speaker = if speaker.trim().is_empty() { "unknown" } else { speaker };
    let Ok(pointer) = Pointer::new(PointerType::Sam, &format!("msg:{}", message.id), None) else { return Vec::new() };
    let room = MAX_CLAIM_CHARS.saturating_sub(speaker.chars().count() + 2).max(100);
    let created_at = rfc3339(message.at);
    // The index is a derived view: it holds the message redacted (a secret is neither stored twice nor findable).
    chunks(&redact(&message.content).text, room)
        .into_iter()
        .filter_map(|chunk| {
            Engram::builder(EngramKind::Fact, format!("{speaker}: {chunk}"), speaker)
                .pointer(pointer.clone())
                .scope(Scope::Project)
                .source(Source::Sam)
                .confidence(1.0)
                .ttl(Ttl::days(36_500))
                .tag("dag:message")
                .created_at(created_at.clone())
                .build()
                .ok()
        })
        .collect()
}

/// `text` in pieces of at most `max` characters, cut at whitespace when possible.
fn chunks(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut len = 0usize;
    for word in text.split_whitespace() {
        let wlen = word.chars().count();
        if len > 0 && len + 1 + wlen > max {
            out.push(std::mem::take(&mut current));
            len = 0;
        }
        if wlen > max {
            // One word longer than a chunk: split it by characters.
            let chars: Vec<char> = word.chars().collect();
            for piece in chars.chunks(max) {
                out.push(piece.iter().collect());
            }
            continue;
        }
        if len > 0 {
            current.push(' ');
            len += 1;
        }
        current.push_str(word);
        len += wlen;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn rfc3339(at: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(crate::now_rfc3339)
}
