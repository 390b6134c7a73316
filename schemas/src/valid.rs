//! `Valid<T>`: a contract value that has passed its schema and semantic rules. The only way to build one is to
//! validate, so code that takes a `Valid<Engram>` never re-checks and never sees an invalid engram.

use std::ops::Deref;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::error::{Error, ErrorCode, Violation, Violations};
use crate::schema::DocKind;
use crate::validate::validate;

/// A wire type of the LESS contract, defined by one schema in `schemas/`.
pub trait Contract: Serialize + DeserializeOwned {
    /// The schema this type matches.
    const KIND: DocKind;
}

/// A `T` that satisfies its schema and every semantic rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Valid<T>(
    // Invariant: `validate(T::KIND, &to_value(&self.0))` is empty.
    T,
);

impl<T: Contract> Valid<T> {
    /// Validates a value built in code.
    pub fn new(value: T) -> Result<Valid<T>, Violations> {
        Valid::with_document(value).map(|(valid, _)| valid)
    }

    /// Validates a value built in code, and gives back the JSON document it was checked as (the same as
    /// [`Valid::to_value`] would make), for a caller that needs both.
    pub fn with_document(value: T) -> Result<(Valid<T>, Value), Violations> {
        let doc = to_document(&value);
        check(T::KIND, &doc)?;
        Ok((Valid(value), doc))
    }

    /// Validates an untrusted JSON document and converts it.
    pub fn from_value(doc: &Value) -> Result<Valid<T>, Violations> {
        check(T::KIND, doc)?;
        T::deserialize(doc).map(Valid).map_err(|err| {
            // The schema and the Rust type are kept in agreement by tests; if they ever disagree, refuse rather
            // than guess.
            Violations(vec![Violation::new(ErrorCode::SchemaInvalid, "", err.to_string())])
        })
    }

    /// Parses and validates an untrusted JSON text.
    pub fn from_json(text: &str) -> crate::Result<Valid<T>> {
        let doc: Value = crate::json::parse_strict(text)
            .map_err(|err| Error::Malformed { code: ErrorCode::JsonMalformed, message: err.to_string() })?;
        Ok(Valid::from_value(&doc)?)
    }

    /// The JSON document of this value.
    pub fn to_value(&self) -> Value {
        to_document(&self.0)
    }

    /// Gives up the validity proof.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for Valid<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Serialize> Serialize for Valid<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de, T: Contract> Deserialize<'de> for Valid<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Valid<T>, D::Error> {
        let doc = Value::deserialize(deserializer)?;
        Valid::from_value(&doc).map_err(serde::de::Error::custom)
    }
}

fn check(kind: DocKind, doc: &Value) -> Result<(), Violations> {
    let violations = validate(kind, doc);
    if violations.is_empty() { Ok(()) } else { Err(Violations(violations)) }
}

#[cfg(test)]
mod tests;

fn to_document<T: Serialize>(value: &T) -> Value {
    // Contract types have string keys and finite numbers only, so serializing to a Value cannot fail;
    // a NaN confidence would, and becomes null, which the schema then rejects.
    serde_json::to_value(value).unwrap_or(Value::Null)
}
