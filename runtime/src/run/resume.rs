//! Resuming a run whose head died (`lessrt run --resume`): what a run directory keeps for it, and how it is read.
//!
//! A run that writes files keeps two more beside `ledger.jsonl`: [`RESUME_FILE`] (its id and archive session, so a
//! resumed run reads the run-scoped engrams and archives into the same session) and [`KEY_FILE`] (its grant MAC key,
//! mode 0600, so the grants agents accepted before still verify; removed when the run ends).
//!
//! Resuming reads the ledger back and keeps every event before the last step the run started: that step may not have
//! finished, so it runs again whole, and its events (a line torn by the kill among them) move to [`DISCARDED_FILE`],
//! kept, not lost. The ledger is cut back to the kept events, and so is a baseline's `wire.jsonl`. The run then
//! starts from what is kept, as after a node loss: each gateway takes back its inbox, the grants it accepted, their
//! spent uses, what its budget paid for in the turn it was in and the digests of what it read
//! ([`super::gateway::Restored`]), on the head or on the node the run placed it on; the `sam:` index takes every kept
//! delivery again; message numbers go on after the highest the ledger names; the ledger records `resumed`; the
//! driver starts at the unfinished step.
//!
//! What the discarded step did outside the ledger stays: engrams it put (put again, they are duplicates), messages it
//! archived (archived again), a claim it made (claimed again by the same holder).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::run::gateway::Kept;
use crate::run::ledger::{Event, SentText, WIRE_FILE};
use crate::run::services::MsgNumbers;
use crate::{ErrorCode, Scenario, Violation};

/// The run's id and archive session, beside its ledger.
pub const RESUME_FILE: &str = "resume.json";
/// The run's grant MAC key (32 bytes, 0600), beside its ledger while the run has not ended.
pub const KEY_FILE: &str = "grant.key";
/// The events of an unfinished step a resumed run set aside (appended, one line each, as they were written).
pub const DISCARDED_FILE: &str = "ledger.discarded.jsonl";

/// What [`RESUME_FILE`] holds.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    /// The scenario the run ran (a resume of another scenario's directory is refused).
    scenario: String,
    run_id: String,
    session_base: String,
}

/// A run directory read back for resuming.
pub(crate) struct Resumption {
    pub(crate) run_id: String,
    pub(crate) session_base: String,
    pub(crate) secret: [u8; 32],
    /// The events kept, oldest first, and a baseline's sent texts.
    pub(crate) kept: Arc<Kept>,
    /// The step the run goes on from (the first one it started and did not end).
    pub(crate) from_step: usize,
    /// The steps that ended before it (they do not run again).
    pub(crate) done: std::collections::BTreeSet<usize>,
    /// How many events (and torn lines) were set aside.
    pub(crate) discarded: usize,
    /// The lengths of `ledger.jsonl`, `audit.log` and `wire.jsonl` now (the ledger's writer appends from there).
    pub(crate) lengths: [u64; 3],
    /// The highest message number the kept events name, for the whole run and per sender (the next is one more).
    pub(crate) n_msgs: Arc<MsgNumbers>,
}

fn refused(dir: &Path, why: impl std::fmt::Display) -> Violation {
    Violation::new(ErrorCode::RunNotResumable, "", format!("{} cannot be resumed: {why}", dir.display()))
}

/// Writes what a resume of the run in `dir` needs: [`RESUME_FILE`] and [`KEY_FILE`].
pub(crate) fn save(
    dir: &Path,
    scenario: &str,
    run_id: &str,
    session_base: &str,
    secret: &[u8; 32],
) -> std::io::Result<()> {
    let saved =
        Saved { scenario: scenario.to_owned(), run_id: run_id.to_owned(), session_base: session_base.to_owned() };
    let mut json = serde_json::to_vec_pretty(&saved).map_err(std::io::Error::other)?;
    json.push(b'\n');
    crate::files::write_whole(&dir.join(RESUME_FILE), &json)?;
    crate::files::write_secret(&dir.join(KEY_FILE), secret)
}

/// Removes the grant key of the run in `dir`, which ended: nothing needs it any more.
pub(crate) fn forget_key(dir: &Path) {
    match std::fs::remove_file(dir.join(KEY_FILE)) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!("the run's grant key was not removed from {}: {err}", dir.display());
        }
        _ => {}
    }
}

/// Reads the run in `dir` back for `scenario` and cuts its files back to the events kept (see the module).
pub(crate) fn prepare(dir: &Path, scenario: &Scenario) -> Result<Resumption, Violation> {
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|err| refused(dir, format!("{name}: {err}")));
    let saved: Saved =
        serde_json::from_slice(&read(RESUME_FILE)?).map_err(|err| refused(dir, format!("{RESUME_FILE}: {err}")))?;
    if saved.scenario != scenario.name {
        return Err(refused(dir, format!("it is a run of {:?}, not of {:?}", saved.scenario, scenario.name)));
    }
    let secret: [u8; 32] = read(KEY_FILE)?.try_into().map_err(|_| {
        refused(dir, format!("{KEY_FILE} is not 32 bytes (the run ended, or the file was changed): run it again"))
    })?;
    let ledger = read(crate::layout::LEDGER_FILE)?;
    let mut events = Vec::new();
    // Byte offset where each event's line starts.
    let mut starts = Vec::new();
    let mut offset = 0usize;
    let mut torn = None;
    for line in ledger.split_inclusive(|&b| b == b'\n') {
        let whole = line.ends_with(b"\n");
        let parsed = serde_json::from_slice::<Event>(line.strip_suffix(b"\n").unwrap_or(line));
        match (parsed, whole) {
            (Ok(event), true) => {
                events.push(event);
                starts.push(offset);
            }
            // The kill cut the last line short.
            (_, false) => torn = Some(offset),
            (Err(err), true) => {
                return Err(refused(
                    dir,
                    format!("line {} of ledger.jsonl does not read back: {err}", events.len() + 1),
                ));
            }
        }
        offset += line.len();
    }
    // The run goes on from the first step it started and did not end (a ledger of turns that never overlapped, or
    // written before turns were timed, has none ended: the last step started). Events after it are set aside, the
    // ends of steps that overlapped it among them: those run again too.
    let ended: std::collections::BTreeSet<usize> = events
        .iter()
        .filter_map(|e| match e {
            Event::TurnEnd { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    let unfinished = match ended.is_empty() {
        true => events.iter().rposition(|e| matches!(e, Event::Step { .. })),
        false => events.iter().position(|e| matches!(e, Event::Step { index, .. } if !ended.contains(index))),
    };
    let (cut, from_step) = match unfinished.map(|at| (at, &events[at])) {
        Some((at, Event::Step { index, .. })) => (at, *index),
        _ => (events.len(), scenario.steps.len()),
    };
    let done: std::collections::BTreeSet<usize> = match ended.is_empty() {
        true => (0..from_step).collect(),
        false => events[..cut]
            .iter()
            .filter_map(|e| match e {
                Event::TurnEnd { index, .. } => Some(*index),
                _ => None,
            })
            .collect(),
    };
    if unfinished.is_some() && from_step >= scenario.steps.len().max(1) {
        return Err(refused(
            dir,
            format!("its ledger names step {from_step}; the scenario has {}", scenario.steps.len()),
        ));
    }
    let cut_at = starts.get(cut).copied().or(torn).unwrap_or(ledger.len());
    let discarded_events = events.split_off(cut);
    let discarded = discarded_events.len() + usize::from(torn.is_some());
    if cut_at < ledger.len() {
        let mut set_aside = ledger[cut_at..].to_vec();
        if !set_aside.ends_with(b"\n") {
            set_aside.push(b'\n');
        }
        let io = |what: &str, err: std::io::Error| refused(dir, format!("{what}: {err}"));
        let mut file = crate::files::append(&dir.join(DISCARDED_FILE)).map_err(|e| io(DISCARDED_FILE, e))?;
        file.write_all(&set_aside).and_then(|()| file.sync_all()).map_err(|e| io(DISCARDED_FILE, e))?;
        let ledger_file = crate::files::open_or_create(&dir.join(crate::layout::LEDGER_FILE))
            .map_err(|e| io(crate::layout::LEDGER_FILE, e))?;
        ledger_file
            .set_len(cut_at as u64)
            .and_then(|()| ledger_file.sync_all())
            .map_err(|e| io(crate::layout::LEDGER_FILE, e))?;
    }
    let dropped: std::collections::HashSet<&str> = discarded_events
        .iter()
        .filter_map(|e| match e {
            Event::Delivered { msg_id, .. } => Some(msg_id.as_str()),
            _ => None,
        })
        .collect();
    let (wire, sent) =
        cut_wire(&dir.join(WIRE_FILE), &dropped).map_err(|err| refused(dir, format!("{WIRE_FILE}: {err}")))?;
    let audit = end_audit_line(&dir.join("audit.log")).map_err(|err| refused(dir, format!("audit.log: {err}")))?;
    let n_msgs = Arc::new(highest_msg_numbers(&events, scenario));
    Ok(Resumption {
        run_id: saved.run_id,
        session_base: saved.session_base,
        secret,
        kept: Arc::new(Kept { events, wire: sent }),
        from_step,
        done,
        discarded,
        lengths: [cut_at as u64, audit, wire],
        n_msgs,
    })
}

/// Drops from a baseline's `wire.jsonl` the lines of the messages in `dropped` (and lines that do not read back, a
/// torn last one among them); its length, and the text each kept message was sent as, by message id.
fn cut_wire(
    path: &Path,
    dropped: &std::collections::HashSet<&str>,
) -> std::io::Result<(u64, std::collections::HashMap<String, String>)> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok((0, Default::default())),
        Err(err) => return Err(err),
    };
    let mut kept = Vec::with_capacity(text.len());
    let mut sent = std::collections::HashMap::new();
    for line in text.split_inclusive(|&b| b == b'\n').filter(|line| line.ends_with(b"\n")) {
        let Ok(message) = serde_json::from_slice::<SentText>(line) else { continue };
        if !dropped.contains(message.msg_id.as_str()) {
            kept.extend_from_slice(line);
            sent.insert(message.msg_id, message.text);
        }
    }
    if kept.len() != text.len() {
        crate::files::write_whole(path, &kept)?;
    }
    Ok((kept.len() as u64, sent))
}

/// Ends a line the kill cut short in the audit log (its later lines start on their own); the log's length.
fn end_audit_line(path: &Path) -> std::io::Result<u64> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err),
    };
    if text.is_empty() || text.ends_with(b"\n") {
        return Ok(text.len() as u64);
    }
    let mut file = crate::files::append(path)?;
    file.write_all(b"\n")?;
    Ok(text.len() as u64 + 1)
}

/// The highest `n` of a message id `<agent>-m<n>` (or `<agent>-gw-m<n>`) anywhere in `events`: over the run, and
/// per sender (the agent, or its gateway as `<agent>-gw`).
fn highest_msg_numbers(events: &[Event], scenario: &Scenario) -> MsgNumbers {
    fn walk(value: &serde_json::Value, seen: &mut dyn FnMut(&str)) {
        match value {
            serde_json::Value::String(text) => seen(text),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, seen)),
            serde_json::Value::Object(fields) => fields.values().for_each(|v| walk(v, seen)),
            _ => {}
        }
    }
    let numbers = MsgNumbers::default();
    let mut note = |text: &str| {
        let Some((sender, n)) = text.rsplit_once("-m") else { return };
        let agent = sender.strip_suffix("-gw").unwrap_or(sender);
        if scenario.agent(agent).is_none() {
            return;
        }
        let Ok(n) = n.parse::<u64>() else { return };
        numbers.at_least(sender, n);
    };
    for event in events {
        if let Ok(value) = serde_json::to_value(event) {
            walk(&value, &mut note);
        }
    }
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: usize) -> Event {
        Event::Step { index, agent: "dev".into(), action: "query".into() }
    }

    fn line(event: &Event) -> String {
        format!("{}\n", serde_json::to_string(event).expect("json"))
    }

    /// The ledger of a run killed in its third step, mid-line: the events before that step are kept, the step's
    /// events and the torn line move to the discarded file, the ledger and the baseline's wire file are cut back,
    /// a torn audit line is ended, message numbers go on after the highest kept, and the key and ids come back.
    #[test]
    fn a_killed_runs_directory_is_cut_back_to_the_last_step_it_started() {
        let workspace = tempfile::tempdir().expect("workspace");
        let toml = "name = \"m\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n[[agents]]\nid = \"dev\"\n\
                    role = \"dev\"\nparent = \"lead\"\n[[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"x\"\n\
                    [[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"y\"\n\
                    [[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"z\"\n";
        let scenario = Scenario::from_toml(toml, workspace.path()).expect("scenario");
        let dir = tempfile::tempdir().expect("dir");
        save(dir.path(), "m", "m-1-0", "m-1-0", &[7; 32]).expect("saved");
        let spilled = |msg_id: &str| Event::Spilled { agent: "lead".into(), msg_id: msg_id.into() };
        let kept = [step(0), spilled("dev-m3"), step(1), spilled("lead-gw-m12")];
        let dropped = [step(2), spilled("dev-m40")];
        std::fs::write(dir.path().join("audit.log"), "a\tline\nhalf a li").expect("audit");
        let sent = |msg_id: &str, text: &str| {
            let sent = SentText {
                msg_id: msg_id.into(),
                from: "dev".into(),
                to: "lead".into(),
                kind: crate::run::wire::EnvelopeKind::Message,
                tokens: 1,
                text: text.into(),
            };
            format!("{}\n", serde_json::to_string(&sent).expect("json"))
        };
        let wire_kept = sent("dev-m3", "kept");
        std::fs::write(dir.path().join(WIRE_FILE), format!("{wire_kept}{}{{\"msg_", sent("dev-m40", "dropped")))
            .expect("wire");
        // `dev-m40` is only in a dropped event; the wire line of a kept message stays.
        let wire_drop = Event::Delivered {
            from: "dev".into(),
            to: "lead".into(),
            msg_id: "dev-m40".into(),
            kind: crate::run::wire::EnvelopeKind::Message,
            tokens: 1,
            max_tokens: 10,
            doc: crate::run::wire::Document::message(serde_json::json!({"type": "escalation", "from": "dev",
                "msg_id": "dev-m40", "reason": "x", "severity": "blocker"})),
            prose: Some("restated".into()),
            restated: Vec::new(),
        };
        let mut text: String = kept.iter().chain(&dropped).chain([&wire_drop]).map(line).collect();
        text.push_str("{\"event\":\"spil");
        std::fs::write(dir.path().join("ledger.jsonl"), &text).expect("ledger");

        let resumed = prepare(dir.path(), &scenario).expect("resumable");
        assert_eq!((resumed.run_id.as_str(), resumed.session_base.as_str()), ("m-1-0", "m-1-0"));
        assert_eq!(resumed.secret, [7; 32]);
        assert_eq!(resumed.from_step, 2);
        assert_eq!(resumed.kept.events.len(), kept.len());
        assert_eq!(resumed.discarded, dropped.len() + 2, "the step, its events and the torn line");
        assert_eq!(resumed.n_msgs.highest(), 12, "the gateway's escalation id counts too; the dropped step's does not");
        let ledger = std::fs::read_to_string(dir.path().join("ledger.jsonl")).expect("ledger");
        assert_eq!(ledger, kept.iter().map(line).collect::<String>());
        assert_eq!(resumed.lengths[0], ledger.len() as u64);
        let aside = std::fs::read_to_string(dir.path().join(DISCARDED_FILE)).expect("discarded");
        assert_eq!(aside.lines().count(), 4);
        assert!(aside.starts_with(&line(&step(2))) && aside.ends_with("{\"event\":\"spil\n"), "{aside}");
        let wire = std::fs::read_to_string(dir.path().join(WIRE_FILE)).expect("wire");
        assert_eq!(wire, wire_kept);
        assert_eq!(resumed.kept.wire.get("dev-m3").map(String::as_str), Some("kept"), "the kept message's sent text");
        assert_eq!(resumed.kept.wire.len(), 1);
        assert_eq!(resumed.lengths[2], wire.len() as u64);
        let audit = std::fs::read_to_string(dir.path().join("audit.log")).expect("audit");
        assert_eq!(audit, "a\tline\nhalf a li\n");
        assert_eq!(resumed.lengths[1], audit.len() as u64);

        // Another scenario's directory, a ledger that does not read back, and an ended run are refused.
        let other = Scenario::from_toml(&toml.replace("name = \"m\"", "name = \"n\""), workspace.path()).expect("n");
        let refused = |s: &Scenario| prepare(dir.path(), s).err().expect("refused");
        assert_eq!(refused(&other).code, ErrorCode::RunNotResumable);
        std::fs::write(dir.path().join("ledger.jsonl"), "{\"event\":\"nonsense\"}\n").expect("ledger");
        assert!(refused(&scenario).message.contains("line 1 of ledger.jsonl does not read back"));
        forget_key(dir.path());
        assert!(refused(&scenario).message.contains(KEY_FILE));
    }
}
