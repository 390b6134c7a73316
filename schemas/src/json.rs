//! Strict JSON for untrusted documents: a key that appears twice in one object is refused (`LESS_JSON_MALFORMED`,
//! naming the key and where), where `serde_json` would silently keep the last value — a document whose meaning
//! depends on which duplicate a reader believes is a classic smuggling trick (one checker sees `"scope":
//! "project"`, another `"scope": "global"`).
//!
//! Everything else is `serde_json`'s: the grammar, the nesting limit (128 levels), the numbers.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{ErrorCode, Violation};

/// Parses one JSON document, refusing duplicate keys; the error is `serde_json`'s, with the line and column.
pub fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Strict { path: String::new() }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// [`parse_strict`] as a violation: `LESS_JSON_MALFORMED` with the parser's message.
pub fn parse_document(text: &str) -> Result<Value, Violation> {
    parse_strict(text).map_err(|err| Violation::new(ErrorCode::JsonMalformed, "", format!("not valid JSON: {err}")))
}

/// Builds a [`Value`] like `serde_json` does, knowing the JSON pointer of where it is.
struct Strict {
    path: String,
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict { path: format!("{}/{}", self.path, items.len()) })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}/{}", self.path, key.replace('~', "~0").replace('/', "~1"));
            if object.contains_key(&key) {
                let at = if self.path.is_empty() { "/" } else { &self.path };
                return Err(A::Error::custom(format!(
                    "duplicate key {key:?} in the object at {at}: send each key once (readers disagree on which \
                     value counts)"
                )));
            }
            let value = map.next_value_seed(Strict { path })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_and_everything_else_parses_as_serde_json_does() {
        for text in [r#"{"a": 1, "b": [true, null, {"c": "x"}], "d": {"e": 1.5, "f": -3}}"#, "[]", "\"s\"", "12"] {
            let strict = parse_strict(text).expect("valid JSON parses");
            assert_eq!(strict, serde_json::from_str::<Value>(text).expect("serde_json"), "{text}");
        }
        for (text, key, at) in [
            (r#"{"scope": "project", "scope": "global"}"#, "\"scope\"", "at /:"),
            (r#"{"provenance": {"created_by": "a", "created_by": "b"}}"#, "\"created_by\"", "at /provenance:"),
            (r#"[{"ok": 1}, {"role": "user", "role": "system"}]"#, "\"role\"", "at /1:"),
        ] {
            let err = parse_strict(text).expect_err("duplicate").to_string();
            assert!(err.contains(&format!("duplicate key {key}")) && err.contains(at), "{text}: {err}");
        }
        let violation = parse_document(r#"{"id": "a", "id": "b"}"#).expect_err("duplicate");
        assert_eq!(violation.code, ErrorCode::JsonMalformed);
        assert!(violation.message.contains("\"id\""), "{}", violation.message);
        // Trailing garbage and deep nesting stay refused.
        assert!(parse_strict("{} {}").is_err());
        assert!(parse_strict(&format!("{}{}", "[".repeat(200), "]".repeat(200))).is_err());
    }
}
