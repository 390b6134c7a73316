//! The enforcement core: the budget, reach, grant and deref rules of LESS as pure functions and types, adapted by a
//! run's gateways (`run/gateway.rs`) and by the MCP desk (`desk.rs`) alike.
//!
//! Nothing here is an actor, opens a store or awaits: each side brings what it holds and the core decides.
//! A deref is decided in two steps. [`check_deref`] runs before any file is read, on what is known then: the reader's
//! reach, the pointers' count against what its turn has left, and the grant it presents (held by it, live, with
//! derefs left and patterns that cover every pointer). The caller then reads, counts the content, and
//! [`commit_deref`] spends it: the turn's [`DerefMeter`] when the budget covers the tokens read, else one use of the
//! grant; past both, the deref is refused and nothing is spent.
//!
//! Grants live where each side keeps them: in memory for a run ([`GrantBook`]), in SQLite for the desk, both behind
//! [`GrantStore`]. A store only keeps and takes down what is left; what a grant allows is decided here, so a refusal
//! has one code and one wording whichever side gives it.
//!
//! What a search, a listing, a description or a recall may bring a reader inline is decided here too ([`check_search`],
//! [`check_list`], [`fit_descriptions`], [`fit_recall`]).
//!
//! Every refusal is a [`less_contract::Violation`] with its stable code.

mod budget;
mod deref;
mod grants;
mod look;
mod reach;

pub use budget::{DerefMeter, check_code, check_inbound};
pub use deref::{Charge, DerefPlan, Reader, check_deref, commit_deref};
pub use grants::{
    GrantBook, GrantLeft, GrantStore, HeldGrant, Spend, check_issue, no_uses_left, spend_on_code, spend_on_deref,
};
pub use look::{DescribeFit, check_list, check_search, fit_descriptions, fit_recall};
pub(crate) use reach::glob_regex;
pub use reach::{Reach, outside_reach, pattern_covers};

#[cfg(test)]
mod tests;
