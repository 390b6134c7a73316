//! Per-role budgets: the hard caps a gateway enforces (spec §6). Omitted fields take the spec defaults.

use serde::{Deserialize, Serialize};

use crate::schema::DocKind;
use crate::valid::Contract;

/// The caps on one role's inline messages and dereferences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Most tokens in one inbound message (tokenizer of the run).
    pub max_inline_tokens: u32,
    /// Most engrams in one message (never above 12).
    pub max_engrams: u32,
    /// Most tokens of code inside a message; 0 unless a grant allows more.
    pub max_inline_code: u32,
    /// Most repository spans dereferenced per turn.
    pub max_repo_spans: u32,
    /// Most artifact sections dereferenced per turn.
    pub max_artifact_sections: u32,
    /// Most episodic-memory items dereferenced per turn.
    pub max_sam_items: u32,
    /// Most tokens of dereferenced content per turn.
    pub max_deref_tokens_total: u32,
}

impl Default for Budget {
    /// The defaults of spec §6.
    fn default() -> Budget {
        Budget {
            max_inline_tokens: 800,
            max_engrams: 12,
            max_inline_code: 0,
            max_repo_spans: 3,
            max_artifact_sections: 2,
            max_sam_items: 2,
            max_deref_tokens_total: 1200,
        }
    }
}

impl Contract for Budget {
    const KIND: DocKind = DocKind::Budget;
}
