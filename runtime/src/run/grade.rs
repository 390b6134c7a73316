//! Grading the scenario's tasks from what the agents actually delivered, strictly.
//!
//! A task is solved when one engram that its agent delivered (a `Delivered` event in the ledger: refused messages
//! never count) and that answers that task (an `Answer` event: the runtime records which task an engram answers)
//! - cites, for every gold citation, a pointer that locates it ([`covers`]: the same source, an overlapping span at
//!   most [`MAX_WIDTH_FACTOR`] times the gold's length or [`MIN_WIDTH_LINES`] lines, whichever is larger) and that
//!   the agent or one of its descendants read ([`Reads`]: dereferenced, or pasted to it by a baseline);
//! - states every gold term and matches every gold pattern, and matches none of the gold's `wrong` patterns;
//! - does not contradict itself ([`contradiction`]: a yes and a no to a yes/no question, or one statement made and
//!   denied, `X is skipped … X is not skipped`);
//! - and locates a gold span in code with more than a comment: a citation whose lines are all comment lines
//!   (`//`, `///`, `//!`, `/* */`) of the cited source file locates only a gold span that is itself comment lines.
//!
//! The grader reads the ledger only, never the scenario's steps, so a scripted answer and a model's answer are graded
//! alike. Both wire modes deliver the same typed message (the baseline's wire text restates it as prose), so LESS and
//! the baselines are graded by the same rule; only what counts as read differs, as the modes differ in what reaches
//! an agent.

use serde::{Deserialize, Serialize};

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use crate::run::ledger::Event;
use crate::run::wire::Document;
use less_contract::Engram;
use less_contract::{OneOf, Scenario, Task, TaskKind, WireMode};
use less_contract::{Pointer, PointerType};

/// A citation may be this many times as long as the gold span it locates…
pub const MAX_WIDTH_FACTOR: u32 = 3;
/// …or this many lines, whichever is larger.
pub const MIN_WIDTH_LINES: u32 = 40;

/// The graded tasks of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// Tasks graded (all of the scenario's).
    pub graded: u32,
    /// Tasks solved.
    pub solved: u32,
    /// One verdict per task, in the scenario's order.
    pub items: Vec<TaskVerdict>,
}

/// One task's verdict, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskVerdict {
    /// The task.
    pub id: String,
    /// Its kind.
    pub kind: TaskKind,
    /// The agent expected to answer.
    pub agent: String,
    /// Its role.
    pub role: String,
    /// Whether a delivered engram of the agent satisfies the gold answer.
    pub solved: bool,
    /// The engram that solved it, or the closest one the agent delivered (none if it delivered no engram).
    pub answer: Option<Answer>,
    /// What was found, or what the closest answer lacks.
    pub evidence: String,
    /// Where an unsolved task was lost on the way from search to answer (`None` when solved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Unsolved, and an engram the agent delivered for this task states the asked value (every gold term and
    /// pattern, no wrong one) whatever it cites: a right citation away from solved. Never set on a solved task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stated: bool,
}

/// Where an unsolved task was lost, from the ledger of the agents at or below its agent: the first step of
/// search → read → cite → state that did not reach the gold answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// No search answer held a span overlapping every gold citation, and nobody read them.
    NotFound,
    /// A search found the gold spans, and nobody read them all.
    FoundNotRead,
    /// The gold spans were read, and the closest answer cites something else (or too wide a span).
    ReadNotCited,
    /// The closest answer cites the gold, and its claim lacks the asked value (or states a wrong one).
    ClaimMisses,
    /// The closest answer would do, and it answers another task.
    OtherTask,
    /// The agent delivered no engram at all.
    Unanswered,
}

impl Failure {
    /// Every kind, in the order of the way from search to answer.
    pub const ALL: [Failure; 6] = [
        Failure::NotFound,
        Failure::FoundNotRead,
        Failure::ReadNotCited,
        Failure::ClaimMisses,
        Failure::OtherTask,
        Failure::Unanswered,
    ];

    /// Its name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::NotFound => "not found",
            Failure::FoundNotRead => "found, not read",
            Failure::ReadNotCited => "read, not cited",
            Failure::ClaimMisses => "cited, claim misses",
            Failure::OtherTask => "answers another task",
            Failure::Unanswered => "unanswered",
        }
    }
}

/// A delivered engram, as graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The message that carried it.
    pub msg_id: String,
    /// The engram's id.
    pub engram: String,
    /// Its claim.
    pub claim: String,
    /// Its pointers, in text form.
    pub pointers: Vec<String>,
}

/// Grades every task of `scenario` against the delivered messages among `events` of a run in `mode`.
pub fn grade(scenario: &Scenario, mode: WireMode, events: &[Event]) -> TaskReport {
    let reads = Reads::new(scenario, mode, events);
    let answers = answers(events);
    let places = GoldPlaces::new(scenario);
    // A task without a gold answer is a question only (`lessrt ask` hands its question down that way): never graded.
    let items: Vec<TaskVerdict> = scenario
        .tasks
        .iter()
        .filter(|task| !(task.gold.cites.is_empty() && task.gold.terms.is_empty() && task.gold.patterns.is_empty()))
        .map(|task| {
            let readers: Vec<&str> = scenario
                .agents
                .iter()
                .filter(|a| scenario.is_at_or_below(&a.id, &task.agent))
                .map(|a| a.id.as_str())
                .collect();
            let read = |pointer: &Pointer| readers.iter().any(|agent| reads.holds(agent, pointer));
            let found = |gold: &Pointer| {
                events.iter().any(|e| match e {
                    Event::Search { agent, returned, code: None, .. } if readers.contains(&agent.as_str()) => {
                        returned.iter().filter_map(|t| Pointer::parse(t).ok()).any(|hit| overlaps(&hit, gold))
                    }
                    _ => false,
                })
            };
            let (mut verdict, closest) = grade_task(task, events, &answers, &read, &places);
            if !verdict.solved {
                verdict.failure = Some(failure_of(task, closest.as_ref(), &read, &found, &|t| places.of(t)));
                verdict.stated = stated(task, events, &answers);
            }
            verdict.role = scenario.agent(&task.agent).map(|a| a.role.clone()).unwrap_or_default();
            verdict
        })
        .collect();
    TaskReport { graded: items.len() as u32, solved: items.iter().filter(|v| v.solved).count() as u32, items }
}

/// A bare answer's verdict: what [`AnswerGrader::grade`] says of a claim and its citations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerVerdict {
    /// The task it answers.
    pub task: String,
    /// Whether the claim and its citations satisfy the gold answer.
    pub solved: bool,
    /// What was found, or what the answer lacks.
    pub evidence: String,
    /// Where an unsolved answer falls short: `read, not cited` (its citations) or `cited, claim misses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// The grader for answers outside a run (`lessrt grade --claims`): the claim and citation rules of [`grade`], with
/// every cited pointer taken as read and the engram taken as answering the task it names.
pub struct AnswerGrader<'s> {
    scenario: &'s Scenario,
    places: GoldPlaces,
}

impl<'s> AnswerGrader<'s> {
    /// A grader of `scenario`'s tasks (its workspace read for diff lines and comment lines).
    pub fn new(scenario: &'s Scenario) -> AnswerGrader<'s> {
        AnswerGrader { scenario, places: GoldPlaces::new(scenario) }
    }

    /// The verdict on `claim` citing `pointers` as an answer to task `task`; `None` for a task the scenario does not
    /// grade.
    pub fn grade(&self, task: &str, claim: &str, pointers: &[Pointer]) -> Option<AnswerVerdict> {
        let task = self.scenario.tasks.iter().find(|t| t.id == task)?;
        let miss = judge(task, claim, pointers, &|_| true, &self.places);
        let cited = miss.cites.is_empty() && miss.wide.is_empty() && miss.comment.is_empty();
        let failure = if !cited {
            Some(Failure::ReadNotCited)
        } else if !miss.claim.is_empty() {
            Some(Failure::ClaimMisses)
        } else {
            None
        };
        let evidence = if failure.is_none() {
            let cites: Vec<String> = pointers.iter().map(ToString::to_string).collect();
            format!("cites {}", cites.join(" + "))
        } else {
            miss.describe()
        };
        Some(AnswerVerdict { task: task.id.clone(), solved: failure.is_none(), evidence, failure })
    }
}

/// Where each gold citation of a scenario's tasks is, and what the lines a citation names are: the pointer itself,
/// and for the part of a diff that touches a path (`diff:<a>..<b>#<path>`) also the same lines of the diff file as
/// the index cuts it (`repo:diffs/<a>..<b>.diff#L<x>-L<y>`), so an agent that found the diff by search and cites its
/// lines is graded like one that cited the diff pointer; and which lines of a cited source file are comments, read
/// through the scenario's workspace once per file.
pub(crate) struct GoldPlaces {
    diff_lines: HashMap<String, Pointer>,
    resolver: Option<crate::resolver::Resolver>,
    /// Each source file read so far: its lines' kinds, or `None` when it cannot be read.
    kinds: RefCell<HashMap<String, Option<Vec<LineKind>>>>,
}

impl GoldPlaces {
    /// The places of `scenario`'s gold citations, its workspace read through a [`crate::resolver::Resolver`].
    pub(crate) fn new(scenario: &Scenario) -> GoldPlaces {
        let mut diff_lines = HashMap::new();
        let Ok(resolver) = crate::resolver::Resolver::new(&scenario.workspace) else {
            return GoldPlaces::none();
        };
        for task in &scenario.tasks {
            for text in task.gold.cites.iter().flat_map(|entry| entry.options()) {
                let Ok(gold) = Pointer::parse(text) else { continue };
                let (PointerType::Diff, Some(path)) = (gold.ty(), gold.span()) else { continue };
                let file = format!("diffs/{}.diff", gold.reference());
                let Ok(whole) = Pointer::parse(&format!("repo:{file}")) else { continue };
                let Ok(diff) = resolver.read_unpinned(&whole, &()) else { continue };
                if let Some((start, end)) = crate::resolver::diff_lines(&diff, path)
                    && let Ok(lines) = Pointer::parse(&format!("repo:{file}#L{start}-L{end}"))
                {
                    diff_lines.insert(text.clone(), lines);
                }
            }
        }
        GoldPlaces { diff_lines, resolver: Some(resolver), kinds: RefCell::default() }
    }

    /// No workspace: a gold citation is its pointer alone, and no line is known to be a comment.
    pub(crate) fn none() -> GoldPlaces {
        GoldPlaces { diff_lines: HashMap::new(), resolver: None, kinds: RefCell::default() }
    }

    /// The pointers a gold citation's text stands for.
    fn of(&self, text: &str) -> Vec<Pointer> {
        Pointer::parse(text).ok().into_iter().chain(self.diff_lines.get(text).cloned()).collect()
    }

    /// Whether `pointer` names lines of a source file with `//` comments that are all comment lines ([`comment_only`]);
    /// false for whatever cannot be read or is not such a file.
    fn comment_only(&self, pointer: &Pointer) -> bool {
        let Some((start, end)) = pointer.line_range() else { return false };
        let file = matches!(pointer.ty(), PointerType::Repo | PointerType::Artifact);
        if !file || !has_slash_comments(pointer.location()) {
            return false;
        }
        let Some(resolver) = &self.resolver else { return false };
        let mut kinds = self.kinds.borrow_mut();
        let lines = kinds.entry(pointer.location().to_owned()).or_insert_with(|| {
            let whole = Pointer::parse(&format!("repo:{}", pointer.location())).ok()?;
            resolver.read_unpinned(&whole, &()).ok().map(|text| line_kinds(&text))
        });
        lines.as_deref().is_some_and(|lines| comment_only(lines, start, end))
    }
}

/// What a line of source is, for the comment rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind {
    /// Whitespace only.
    Blank,
    /// A `//` line comment (`///`, `//!` included) or a line inside or of a `/* */` block comment.
    Comment,
    /// Anything else.
    Code,
}

/// Whether a file's name says its language comments with `//` and `/* */` (Rust and the C family).
fn has_slash_comments(path: &str) -> bool {
    const EXTENSIONS: [&str; 14] =
        ["rs", "c", "h", "cc", "cpp", "hpp", "go", "java", "js", "ts", "tsx", "jsx", "kt", "swift"];
    path.rsplit_once('.').is_some_and(|(_, ext)| EXTENSIONS.contains(&ext))
}

/// The kind of each line of `text` (a `/* */` block followed across lines; a line that opens or closes one and has
/// code outside it is code).
pub(crate) fn line_kinds(text: &str) -> Vec<LineKind> {
    let mut in_block = false;
    text.lines()
        .map(|line| {
            let trimmed = line.trim();
            if in_block {
                if let Some(after) = trimmed.split_once("*/").map(|(_, after)| after.trim()) {
                    in_block = false;
                    return if after.is_empty() || after.starts_with("//") {
                        LineKind::Comment
                    } else {
                        LineKind::Code
                    };
                }
                return LineKind::Comment;
            }
            if trimmed.is_empty() {
                LineKind::Blank
            } else if trimmed.starts_with("//") {
                LineKind::Comment
            } else if let Some(rest) = trimmed.strip_prefix("/*") {
                match rest.split_once("*/") {
                    None => {
                        in_block = true;
                        LineKind::Comment
                    }
                    Some((_, after)) if after.trim().is_empty() => LineKind::Comment,
                    Some(_) => LineKind::Code,
                }
            } else {
                LineKind::Code
            }
        })
        .collect()
}

/// Whether lines `start..=end` (1-based) of a file whose lines are `kinds` hold a comment and no code (blank lines
/// aside); false for a range outside the file.
pub(crate) fn comment_only(kinds: &[LineKind], start: u32, end: u32) -> bool {
    let (Some(first), Some(last)) = ((start as usize).checked_sub(1), (end as usize).checked_sub(1)) else {
        return false;
    };
    let Some(span) = kinds.get(first..=last.min(kinds.len().saturating_sub(1))) else { return false };
    span.contains(&LineKind::Comment) && !span.contains(&LineKind::Code)
}

/// Which task each engram answers, from the runtime's `Answer` events: engram id → task ids.
fn answers(events: &[Event]) -> HashMap<&str, HashSet<&str>> {
    let mut answers: HashMap<&str, HashSet<&str>> = HashMap::new();
    for event in events {
        if let Event::Answer { engram, task, .. } = event {
            answers.entry(engram.as_str()).or_default().insert(task.as_str());
        }
    }
    answers
}

/// What reached each agent as content, from the ledger: its granted dereferences in every mode; in the baselines
/// also what was pasted to it (its briefs' packs for its role, the spans a report to it cites, the hits of its
/// searches). The whole-file baseline pastes packed files whole.
pub struct Reads {
    by_agent: HashMap<String, Vec<Pointer>>,
}

impl Reads {
    /// Collects the reads of a run in `mode`.
    pub fn new(scenario: &Scenario, mode: WireMode, events: &[Event]) -> Reads {
        let mut by_agent: HashMap<String, Vec<Pointer>> = HashMap::new();
        let parse =
            |texts: &[String]| -> Vec<Pointer> { texts.iter().filter_map(|t| Pointer::parse(t).ok()).collect() };
        let pasted = mode != WireMode::Less;
        for event in events {
            let (agent, read): (&str, Vec<Pointer>) = match event {
                Event::Deref { agent, pointers, granted: true, code: None, .. } => (agent, parse(pointers)),
                Event::Search { agent, returned, code: None, .. } if pasted => (agent, parse(returned)),
                Event::Delivered { to, doc, .. } if pasted => match doc.as_ref() {
                    Document::Brief(brief) => {
                        let role = scenario.agent(to).map(|a| a.role.as_str()).unwrap_or_default();
                        let pack = brief.pointer_packs.get(role).into_iter().flatten().map(|p| &p.0);
                        let whole = mode == WireMode::VerbatimWhole;
                        (to, pack.map(|p| if whole { p.whole() } else { p.clone() }).collect())
                    }
                    Document::Message(_) => {
                        (to, doc.engrams().iter().flat_map(|e| e.pointers.iter().cloned()).collect())
                    }
                    Document::Grant(_) => continue,
                },
                _ => continue,
            };
            by_agent.entry(agent.to_owned()).or_default().extend(read);
        }
        Reads { by_agent }
    }

    /// Whether `agent` read the whole of what `pointer` names.
    pub fn holds(&self, agent: &str, pointer: &Pointer) -> bool {
        self.by_agent.get(agent).is_some_and(|read| read.iter().any(|r| contains(r, pointer)))
    }
}

/// Whether reading `read` read all of `cited`: the same source, and `cited`'s lines inside `read`'s (or the same
/// section, diff path or test; a whole source holds every span of it).
fn contains(read: &Pointer, cited: &Pointer) -> bool {
    on_place(cited, read, |(c1, c2), (r1, r2)| r1 <= c1 && c2 <= r2)
}

/// How far one engram is from the gold answer.
#[derive(Default)]
struct Miss {
    /// The engram answers another task, or none.
    task: Option<String>,
    /// Gold citations located by no citation at all.
    cites: Vec<String>,
    /// Gold citations located only by citations wider than the width rule allows.
    wide: Vec<String>,
    /// Gold citations located only by citations nobody at or below the agent read.
    unread: Vec<String>,
    /// Gold spans of code located only by citations of comment lines.
    comment: Vec<String>,
    /// What its claim lacks.
    claim: ClaimMiss,
}

impl Miss {
    fn count(&self) -> usize {
        usize::from(self.task.is_some())
            + self.cites.len()
            + self.wide.len()
            + self.unread.len()
            + self.comment.len()
            + self.claim.count()
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(task) = &self.task {
            parts.push(task.clone());
        }
        if !self.cites.is_empty() {
            parts.push(format!("cites nothing overlapping {}", self.cites.join(", ")));
        }
        if !self.wide.is_empty() {
            parts.push(format!(
                "cites only spans too wide for {} (at most {MAX_WIDTH_FACTOR}× its length or {MIN_WIDTH_LINES} lines)",
                self.wide.join(", ")
            ));
        }
        if !self.unread.is_empty() {
            parts.push(format!("cites {} without having read it", self.unread.join(", ")));
        }
        if !self.comment.is_empty() {
            parts.push(format!("cites only comment lines for the code of {}", self.comment.join(", ")));
        }
        parts.extend(self.claim.describe());
        parts.join("; ")
    }
}

fn grade_task(
    task: &Task,
    events: &[Event],
    answers: &HashMap<&str, HashSet<&str>>,
    read: &dyn Fn(&Pointer) -> bool,
    places: &GoldPlaces,
) -> (TaskVerdict, Option<Miss>) {
    let mut best: Option<(Miss, Answer)> = None;
    for (msg_id, engram) in delivered_by(events, &task.agent) {
        let answer = Answer {
            msg_id: msg_id.to_owned(),
            engram: engram.id.clone(),
            claim: engram.claim.clone(),
            pointers: engram.pointers.iter().map(ToString::to_string).collect(),
        };
        let mut miss = judge(task, &answer.claim, &engram.pointers, read, places);
        miss.task = match answers.get(engram.id.as_str()) {
            Some(tasks) if tasks.contains(task.id.as_str()) => None,
            Some(tasks) => {
                let mut others: Vec<&str> = tasks.iter().copied().collect();
                others.sort_unstable();
                Some(format!("answers {}, not {}", others.join(", "), task.id))
            }
            None => Some(format!("answers no task (not {})", task.id)),
        };
        if miss.count() == 0 {
            let evidence = format!("{} in {} cites {}", answer.engram, answer.msg_id, answer.pointers.join(" + "));
            return (verdict(task, true, Some(answer), evidence), None);
        }
        // The closest miss is kept, the earliest among equals, so the evidence is stable.
        if best.as_ref().is_none_or(|(m, _)| miss.count() < m.count()) {
            best = Some((miss, answer));
        }
    }
    match best {
        Some((miss, answer)) => {
            let evidence = format!("closest: {} in {} {}", answer.engram, answer.msg_id, miss.describe());
            (verdict(task, false, Some(answer), evidence), Some(miss))
        }
        None => (verdict(task, false, None, format!("{} delivered no engram", task.agent)), None),
    }
}

/// Where an unsolved `task` was lost, given what its closest answer lacks (`None`: no answer): `read` says what the
/// agents at or below its agent read, `found` whether a search answer of theirs held a span overlapping a gold
/// citation.
fn failure_of(
    task: &Task,
    closest: Option<&Miss>,
    read: &dyn Fn(&Pointer) -> bool,
    found: &dyn Fn(&Pointer) -> bool,
    places: &dyn Fn(&str) -> Vec<Pointer>,
) -> Failure {
    let Some(miss) = closest else { return Failure::Unanswered };
    // Every gold citation, through one of its alternatives.
    let every = |step: &dyn Fn(&Pointer) -> bool| {
        task.gold.cites.iter().all(|entry| entry.options().iter().flat_map(|t| places(t)).any(|g| step(&g)))
    };
    if !every(read) {
        return if every(found) { Failure::FoundNotRead } else { Failure::NotFound };
    }
    if !(miss.cites.is_empty() && miss.wide.is_empty() && miss.unread.is_empty() && miss.comment.is_empty()) {
        Failure::ReadNotCited
    } else if !miss.claim.is_empty() {
        Failure::ClaimMisses
    } else {
        Failure::OtherTask
    }
}

fn verdict(task: &Task, solved: bool, answer: Option<Answer>, evidence: String) -> TaskVerdict {
    TaskVerdict {
        id: task.id.clone(),
        kind: task.kind,
        agent: task.agent.clone(),
        role: String::new(),
        solved,
        answer,
        evidence,
        failure: None,
        stated: false,
    }
}

/// Whether an engram `task`'s agent delivered for that task (an `Answer` event names it) states the asked value,
/// whatever it cites (never for a task whose gold asks no term or pattern: there is nothing to state).
fn stated(task: &Task, events: &[Event], answers: &HashMap<&str, HashSet<&str>>) -> bool {
    let asks = !(task.gold.terms.is_empty() && task.gold.patterns.is_empty());
    asks && delivered_by(events, &task.agent)
        .filter(|(_, engram)| answers.get(engram.id.as_str()).is_some_and(|tasks| tasks.contains(task.id.as_str())))
        .any(|(_, engram)| ClaimMiss::of(task, &engram.claim).is_empty())
}

/// What `claim` citing `cited` lacks of `task`'s gold answer, when `read` says which citations were read and
/// `places` where the gold is and which cited lines are comments.
fn judge(task: &Task, claim: &str, cited: &[Pointer], read: &dyn Fn(&Pointer) -> bool, places: &GoldPlaces) -> Miss {
    let mut miss = Miss::default();
    for entry in &task.gold.cites {
        let golds: Vec<Pointer> = entry.options().iter().flat_map(|t| places.of(t)).collect();
        let located = |c: &Pointer| golds.iter().any(|g| overlaps(c, g));
        // A citation of comment lines alone stands for the code only when the gold is comment lines too.
        let substantive = |c: &Pointer, g: &Pointer| !places.comment_only(c) || places.comment_only(g);
        let narrow = |c: &Pointer| golds.iter().any(|g| covers(c, g) && substantive(c, g));
        if cited.iter().any(|c| narrow(c) && read(c)) {
            continue;
        }
        let commented = |c: &Pointer| golds.iter().any(|g| covers(c, g));
        let target = if cited.iter().any(narrow) {
            &mut miss.unread
        } else if cited.iter().any(commented) {
            &mut miss.comment
        } else if cited.iter().any(located) {
            &mut miss.wide
        } else {
            &mut miss.cites
        };
        target.push(describe_one_of(entry));
    }
    miss.claim = ClaimMiss::of(task, claim);
    miss
}

/// What a claim lacks of the asked value, its citations aside.
#[derive(Debug, Default)]
pub(crate) struct ClaimMiss {
    /// Gold terms it does not state.
    terms: Vec<String>,
    /// Gold patterns it does not match.
    patterns: Vec<String>,
    /// Wrong-answer patterns it matches.
    wrong: Vec<String>,
    /// Where it contradicts itself ([`contradiction`]), if it does.
    contradiction: Option<String>,
}

impl ClaimMiss {
    /// What `claim` lacks of `task`'s gold answer.
    pub(crate) fn of(task: &Task, claim: &str) -> ClaimMiss {
        let gold = &task.gold;
        let matches =
            |p: &String| regex::RegexBuilder::new(p).case_insensitive(true).build().is_ok_and(|re| re.is_match(claim));
        ClaimMiss {
            terms: gold
                .terms
                .iter()
                .filter(|entry| !entry.options().iter().any(|term| states(claim, term)))
                .map(describe_one_of)
                .collect(),
            patterns: gold.patterns.iter().filter(|p| !matches(p)).cloned().collect(),
            wrong: gold.wrong.iter().filter(|p| matches(p)).cloned().collect(),
            contradiction: contradiction(&task.question, claim),
        }
    }

    /// Whether the claim states the asked value and nothing against it.
    pub(crate) fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// How many things it lacks or gets wrong.
    fn count(&self) -> usize {
        self.terms.len() + self.patterns.len() + self.wrong.len() + usize::from(self.contradiction.is_some())
    }

    /// What it lacks, one part each, for the evidence.
    pub(crate) fn describe(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if !self.terms.is_empty() {
            parts.push(format!("does not state {}", self.terms.join(", ")));
        }
        if !self.patterns.is_empty() {
            parts.push(format!("does not match /{}/", self.patterns.join("/, /")));
        }
        if !self.wrong.is_empty() {
            let both = if self.terms.is_empty() && self.patterns.is_empty() {
                " and the right one as well: it contradicts itself"
            } else {
                ""
            };
            parts.push(format!("states a wrong answer (/{}/){both}", self.wrong.join("/, /")));
        }
        if let Some(why) = &self.contradiction {
            parts.push(format!("contradicts itself: {why}"));
        }
        parts
    }
}

/// Whether `question` asks for a yes or a no: it opens with an auxiliary verb (`Does`, `Is`, `Can`, …).
pub fn is_yes_no(question: &str) -> bool {
    const OPENERS: [&str; 14] =
        ["does", "do", "did", "is", "are", "can", "will", "should", "has", "have", "was", "were", "could", "would"];
    let first = question.split_whitespace().next().unwrap_or_default().to_lowercase();
    OPENERS.contains(&first.as_str())
}

/// Where `claim`, answering `question`, states something and its negation, or `None`: a sentence opening with `Yes`
/// and another with `No` (to a yes/no question), or one subject said to be and not to be the same thing
/// (`X is skipped … X is not skipped`, `it does comply … it does not comply`) in two clauses that state no condition
/// (`if`, `when`, `unless`, `only`, … make a clause a case, not a statement).
pub fn contradiction(question: &str, claim: &str) -> Option<String> {
    let text = expand_negations(&claim.to_lowercase());
    if is_yes_no(question) {
        let opener = regex::Regex::new(r"(?:^|[.!?;:]\s+)\W*(yes|no)\b\s*[,.:;!\u2014-]").ok()?;
        let said: HashSet<&str> = opener.captures_iter(&text).filter_map(|c| c.get(1)).map(|m| m.as_str()).collect();
        if said.len() == 2 {
            return Some("it answers both yes and no".to_owned());
        }
    }
    let statement = regex::Regex::new(
        r"\b([a-z_][\w.:()]*)\s+(is|are|was|were|does|do|did|has|have|can|will|should|must)\s+(not\s+|never\s+)?(?:also\s+|still\s+|always\s+)?([a-z_]\w*)",
    )
    .ok()?;
    let mut seen: Vec<(String, &'static str, String, bool)> = Vec::new();
    for clause in clauses(&text) {
        if is_conditional(clause) {
            continue;
        }
        for c in statement.captures_iter(clause) {
            let (subject, aux, negated, predicate) = (&c[1], &c[2], c.get(3).is_some(), &c[4]);
            if matches!(predicate, "not" | "never" | "a" | "an" | "the" | "to" | "be" | "been") {
                continue;
            }
            let aux = auxiliary_class(aux);
            let same = |(s, a, p, n): &(String, &str, String, bool)| {
                *a == aux && p == predicate && *n != negated && same_subject(s, subject)
            };
            if let Some((s, _, p, _)) = seen.iter().find(|entry| same(entry)) {
                return Some(format!("it says {s} {p} and {subject} not {predicate}"));
            }
            seen.push((subject.to_owned(), aux, predicate.to_owned(), negated));
        }
    }
    None
}

/// `claim` (lower case) with contracted negations written out (`doesn't` → `does not`, `can't` → `can not`).
fn expand_negations(claim: &str) -> String {
    let claim = claim.replace('\u{2019}', "'").replace("cannot", "can not").replace("can't", "can not");
    let claim = claim.replace("won't", "will not");
    claim.replace("n't", " not")
}

/// The clauses of a text: cut at sentence ends, semicolons, colons, commas and `but`/`while`/`whereas`/`although`.
fn clauses(text: &str) -> Vec<&str> {
    let Ok(cut) = regex::Regex::new(r"[.!?;:,]\s|[.!?;:,]$|\s(?:but|while|whereas|although|though)\s") else {
        return vec![text];
    };
    cut.split(text).filter(|c| !c.trim().is_empty()).collect()
}

/// Whether a clause states a case rather than a fact: it holds a condition (`if`, `when`, `unless`, `only`, …).
fn is_conditional(clause: &str) -> bool {
    const MARKERS: [&str; 12] =
        ["if", "when", "whenever", "unless", "only", "otherwise", "except", "once", "until", "else", "whether", "than"];
    clause.split(|c: char| !c.is_alphanumeric() && c != '_').any(|word| MARKERS.contains(&word))
}

/// The auxiliaries that negate alike, as one class (`is`, `are`, `was`, `were` are `be`).
fn auxiliary_class(aux: &str) -> &'static str {
    match aux {
        "is" | "are" | "was" | "were" => "be",
        "does" | "do" | "did" => "do",
        "has" | "have" => "have",
        "can" => "can",
        "will" => "will",
        "should" => "should",
        _ => "must",
    }
}

/// Whether two subjects name the same thing: equal, or one a pronoun that may stand for the other.
fn same_subject(a: &str, b: &str) -> bool {
    const PRONOUNS: [&str; 4] = ["it", "this", "that", "they"];
    a == b || PRONOUNS.contains(&a) || PRONOUNS.contains(&b)
}

fn describe_one_of(entry: &OneOf) -> String {
    match entry {
        OneOf::One(one) => one.clone(),
        OneOf::Any(any) => format!("one of [{}]", any.join(", ")),
    }
}

/// Whether a cited pointer locates the gold one: it [`overlaps`] it and is not much wider — at most
/// [`MAX_WIDTH_FACTOR`] times the gold span's lines, or [`MIN_WIDTH_LINES`] lines, whichever is larger. A citation of
/// a whole file locates only a gold citation of that whole file; a gold citation of a whole file is located by any
/// citation inside it.
pub fn covers(cited: &Pointer, gold: &Pointer) -> bool {
    if !overlaps(cited, gold) {
        return false;
    }
    match (cited.line_range(), gold.line_range()) {
        (Some((c1, c2)), Some((g1, g2))) => {
            let lines = |a: u32, b: u32| b.saturating_sub(a) + 1;
            let allowed = (MAX_WIDTH_FACTOR * lines(g1, g2)).max(MIN_WIDTH_LINES);
            lines(c1, c2) <= allowed
        }
        _ => true,
    }
}

/// Whether a cited pointer is about the gold one at all: the same source, and a line range intersecting the gold's,
/// or the same section, diff path or test. A whole file overlaps only a gold whole file; a gold whole file is
/// overlapped by anything inside it.
pub fn overlaps(cited: &Pointer, gold: &Pointer) -> bool {
    on_place(cited, gold, |(c1, c2), (g1, g2)| c1 <= g2 && g1 <= c2)
}

/// Whether `part` is at `place`: the same source (lines of a file under `repo:` or `artifact:` alike), and `lines`
/// holding between their line ranges, or the same section, diff path or test. A whole source as `place` takes any part of it; a whole source as `part` only a whole `place`.
fn on_place(part: &Pointer, place: &Pointer, lines: impl Fn((u32, u32), (u32, u32)) -> bool) -> bool {
    // `repo:` and `artifact:` lines of one file are the same lines (a Markdown section is not comparable with lines).
    let file = |p: &Pointer| matches!(p.ty(), PointerType::Repo | PointerType::Artifact) && p.line_range().is_some();
    let same_type = part.ty() == place.ty() || file(part) && file(place);
    if !same_type || part.location() != place.location() {
        return false;
    }
    match (part.span(), place.span()) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => match (part.line_range(), place.line_range()) {
            (Some(a), Some(b)) => lines(a, b),
            (None, None) => a == b,
            _ => false,
        },
    }
}

/// Whether `claim` states `term`: case-insensitively, and as whole words where the term begins or ends with one.
pub fn states(claim: &str, term: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let pattern = format!(
        "(?i){}{}{}",
        if word(term.chars().next()) { r"\b" } else { "" },
        regex::escape(term),
        if word(term.chars().last()) { r"\b" } else { "" }
    );
    regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(claim))
}

/// The engrams of messages `agent` delivered, in delivery order, with their message ids.
pub(crate) fn delivered_by<'a>(events: &'a [Event], agent: &'a str) -> impl Iterator<Item = (&'a str, &'a Engram)> {
    events
        .iter()
        .filter_map(move |e| match e {
            Event::Delivered { from, msg_id, doc, .. } if from == agent => Some((msg_id.as_str(), doc)),
            _ => None,
        })
        .flat_map(|(msg_id, doc)| doc.engrams().iter().map(move |e| (msg_id, e)))
}

#[cfg(test)]
mod tests;
