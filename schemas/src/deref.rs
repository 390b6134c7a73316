//! Deref requests: asking to pull the content behind pointers, with a reason and an intended use (spec §7.1).

use serde::{Deserialize, Serialize};

use crate::pointer::Pointer;
use crate::schema::DocKind;
use crate::valid::Contract;

/// `schemas/deref_request.v0.1.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DerefRequest {
    /// Unique id within the run.
    pub request_id: String,
    /// The agent asking.
    pub requester: String,
    /// 1..12 pointers to resolve.
    pub pointers: Vec<Pointer>,
    /// Why the content is needed (at most 200 characters).
    pub reason: String,
    /// What will be done with it (at most 200 characters).
    pub intended_use: String,
    /// A grant covering what the budget does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
}

impl Contract for DerefRequest {
    const KIND: DocKind = DocKind::Deref;
}
