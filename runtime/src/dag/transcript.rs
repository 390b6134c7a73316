//! Transcripts as users have them: a JSON array, or JSONL, of chat messages `{role, content, name?, at?}` (the
//! OpenAI chat shape; `content` a string or text parts; `at` unix seconds or an RFC 3339 time). The one parser of
//! transcripts: `lessrt memory ingest` archives what it returns, `lessrt compact` compacts it.

use serde_json::Value;

use crate::dag::archive::NewMessage;
use less_contract::{ErrorCode, Violation};

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
