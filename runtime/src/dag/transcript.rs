//! Transcripts as users have them: a JSON array, or JSONL, of chat messages `{role, content, name?, at?}` (the
//! OpenAI chat shape; `at` is unix seconds or an RFC 3339 time).

use serde_json::Value;

use crate::dag::archive::NewMessage;
use crate::error::{ErrorCode, Violation};

/// Parses a transcript. Errors name the line (JSONL) or the index (array) and what is wrong, with
/// `LESS_JSON_MALFORMED` (not JSON) or `LESS_SCHEMA_INVALID` (not a message).
pub fn parse_transcript(text: &str) -> Result<Vec<NewMessage>, Violation> {
    let values: Vec<(String, Value)> = match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items.into_iter().enumerate().map(|(i, v)| (format!("/{i}"), v)).collect(),
        Ok(single @ Value::Object(_)) => vec![(String::new(), single)],
        Ok(_) => {
            return Err(Violation::new(
                ErrorCode::SchemaInvalid,
                "",
                "a transcript is a JSON array of messages or JSONL (one message object per line)",
            ));
        }
        Err(whole) => {
            let mut values = Vec::new();
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                match serde_json::from_str::<Value>(line) {
                    Ok(value) => values.push((format!("line {}", n + 1), value)),
                    Err(err) => {
                        let why = if values.is_empty() && text.trim_start().starts_with('[') { whole } else { err };
                        return Err(Violation::new(
                            ErrorCode::JsonMalformed,
                            format!("line {}", n + 1),
                            format!("not valid JSON: {why}; send a JSON array of messages or one JSON object per line"),
                        ));
                    }
                }
            }
            values
        }
    };
    values.into_iter().map(|(at, value)| message(&at, value)).collect()
}

fn message(path: &str, value: Value) -> Result<NewMessage, Violation> {
    let bad = |what: &str| {
        Violation::new(
            ErrorCode::SchemaInvalid,
            path,
            format!(
                "{what}; a message is {{\"role\": string, \"content\": string, \"name\"?: string, \"at\"?: unix seconds or RFC 3339}}"
            ),
        )
    };
    let Value::Object(map) = value else { return Err(bad("not an object")) };
    let role = match map.get("role") {
        Some(Value::String(r)) if !r.trim().is_empty() => r.clone(),
        _ => return Err(bad("\"role\" is missing or not a non-empty string")),
    };
    let content = match map.get("content") {
        Some(Value::String(c)) => c.clone(),
        // Content parts (`[{"type": "text", "text": …}]`) are joined.
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        Some(Value::Null) => String::new(),
        _ => return Err(bad("\"content\" is missing or not a string")),
    };
    let name = match map.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(_) => return Err(bad("\"name\" is not a string")),
    };
    let at = match map.get("at") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_i64().ok_or_else(|| bad("\"at\" is not whole unix seconds"))?),
        Some(Value::String(s)) => Some(
            time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map_err(|_| bad("\"at\" is not an RFC 3339 time"))?
                .unix_timestamp(),
        ),
        Some(_) => return Err(bad("\"at\" is not a number or a string")),
    };
    Ok(NewMessage { role, content, name, at })
}
