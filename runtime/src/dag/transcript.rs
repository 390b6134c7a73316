//! Transcripts as users have them: a JSON array, or JSONL, of chat messages `{role, content, name?, at?}` (the
//! OpenAI chat shape; `content` a string or text parts; `at` unix seconds or an RFC 3339 time). The one parser of
//! transcripts: `lessrt memory ingest` archives what it returns, `lessrt compact` compacts it.

use serde_json::Value;

use crate::dag::archive::NewMessage;
use less_contract::{ErrorCode, Violation};

/// The most bytes of one message's content `memory ingest` archives (1 MiB). Each message is archived verbatim and
/// indexed in pieces of at most 500 characters, so one huge message costs memory many times its size; longer text
/// belongs in the workspace, cited by a pointer.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The most characters of a name: a project, a session, a message's `name`.
pub const MAX_NAME_CHARS: usize = 200;

/// Refuses what a parsed transcript may not archive (`memory ingest`), each with the path of the first offending
/// value: a role outside the chat roles or a name that [`check_name`] refuses (`LESS_TRANSCRIPT_INVALID`), content
/// over [`MAX_MESSAGE_BYTES`] (`LESS_TRANSCRIPT_INVALID`), blank content (`LESS_TEXT_EMPTY`: an archived message is
/// kept forever and a blank one says nothing).
pub fn check_archivable(messages: &[NewMessage]) -> Result<(), Violation> {
    for (idx, message) in messages.iter().enumerate() {
        crate::context::check_role(&message.role, idx, "")?;
        if message.content.len() > MAX_MESSAGE_BYTES {
            return Err(invalid(
                &format!("/{idx}/content"),
                format!(
                    "message {idx} has {} bytes of content, over the {MAX_MESSAGE_BYTES} a message may have; split it \
                     into several messages, or put the text in the workspace and cite it with a pointer",
                    message.content.len()
                ),
            ));
        }
        if message.content.trim().is_empty() {
            return Err(Violation::new(
                ErrorCode::TextEmpty,
                format!("/{idx}/content"),
                format!("message {idx} has blank content; leave the message out, or send what was said"),
            ));
        }
        if let Some(name) = &message.name {
            check_name(name)
                .map_err(|why| invalid(&format!("/{idx}/name"), format!("message {idx}: its name {why}")))?;
        }
    }
    Ok(())
}

/// Whether `name` (a project, a session, a speaker) is one: not blank, at most [`MAX_NAME_CHARS`] characters, no
/// control characters. The error says what is wrong, to follow "its name", "the project" or the like.
pub fn check_name(name: &str) -> Result<(), String> {
    let n_chars = name.chars().count();
    if name.trim().is_empty() {
        Err("is blank: give a name".to_owned())
    } else if n_chars > MAX_NAME_CHARS {
        Err(format!("has {n_chars} characters, over the {MAX_NAME_CHARS} a name may have: use a shorter one"))
    } else if name.chars().any(char::is_control) {
        Err("holds control characters: use printable text".to_owned())
    } else {
        Ok(())
    }
}

/// Parses a transcript. Not JSON: `LESS_JSON_MALFORMED` (with the line, for JSONL); JSON that is not a list of
/// messages: `LESS_TRANSCRIPT_INVALID` with the path of the bad value (`/3/role`).
pub fn parse_transcript(text: &str) -> Result<Vec<NewMessage>, Violation> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(Violation::new(ErrorCode::TranscriptInvalid, "", "the input is empty; expected a transcript"));
    }
    let values: Vec<Value> = if trimmed.starts_with('[') {
        match less_contract::parse_strict(trimmed) {
            Ok(Value::Array(values)) => values,
            Ok(_) => return Err(invalid("", "expected a JSON array of messages".to_owned())),
            Err(err) => return Err(Violation::new(ErrorCode::JsonMalformed, "", format!("not valid JSON: {err}"))),
        }
    } else {
        let mut values = Vec::new();
        for (n, line) in trimmed.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            match less_contract::parse_strict(line) {
                Ok(value) => values.push(value),
                Err(err) => {
                    return Err(Violation::new(
                        ErrorCode::JsonMalformed,
                        "",
                        format!("line {}: not valid JSON (expected one message object per line): {err}", n + 1),
                    ));
                }
            }
        }
        values
    };
    values.into_iter().enumerate().map(|(idx, value)| message(idx, value)).collect()
}

fn invalid(path: &str, message: String) -> Violation {
    Violation::new(ErrorCode::TranscriptInvalid, path, message)
}

fn message(idx: usize, value: Value) -> Result<NewMessage, Violation> {
    let Value::Object(map) = value else {
        return Err(invalid(&format!("/{idx}"), format!("message {idx} is not an object with role and content")));
    };
    let role = match map.get("role") {
        Some(Value::String(r)) if !r.trim().is_empty() => r.clone(),
        _ => return Err(invalid(&format!("/{idx}/role"), format!("message {idx} has no string role"))),
    };
    let content = match map.get("content") {
        Some(Value::String(c)) => c.clone(),
        // Content parts (`[{"type": "text", "text": …}]`) are joined.
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => {
            return Err(invalid(
                &format!("/{idx}/content"),
                format!("message {idx} has no string content (or list of text parts)"),
            ));
        }
    };
    let name = match map.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(_) => {
            return Err(invalid(&format!("/{idx}/name"), format!("message {idx} has a name that is not a string")));
        }
    };
    let bad_at =
        || invalid(&format!("/{idx}/at"), format!("message {idx}: \"at\" must be unix seconds or an RFC 3339 time"));
    let at = match map.get("at") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_i64().ok_or_else(bad_at)?),
        Some(Value::String(s)) => Some(
            time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map_err(|_| bad_at())?
                .unix_timestamp(),
        ),
        Some(_) => return Err(bad_at()),
    };
    Ok(NewMessage { role, content, name, at })
}
