//! Derefs in two steps: [`check_deref`] before any file is read, [`commit_deref`] after the content is counted.

use less_contract::{Budget, Pointer, PointerType, Violation};

use super::budget::{DerefMeter, over_budget};
use super::grants::{GrantStore, check_grant, spend_on_deref};
use super::reach::{Reach, outside_reach};

/// Who dereferences: its id, its budget and its reach.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    /// Its id (an agent's, or a desk client's).
    pub id: &'a str,
    /// Its budget.
    pub budget: &'a Budget,
    /// What it may read without a grant.
    pub reach: &'a Reach,
}

/// What [`check_deref`] allowed, to be committed once the content is read and counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerefPlan {
    /// Whether the turn's budget may cover it: every pointer is within reach and the counts fit. The tokens read
    /// decide at the commit.
    pub budget_may_cover: bool,
    /// The grant presented, checked (live, held by the reader, derefs left, patterns covering every pointer) when the
    /// budget could not cover the deref; the one that pays when the budget does not.
    pub grant: Option<String>,
}

/// What paid for a committed deref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charge {
    /// The turn's budget (the meter moved on).
    Budget,
    /// One use of this grant.
    Grant(String),
}

/// The check step: whether `reader`, whose turn has used `meter`, may dereference `pointers` now, presenting
/// `grant`, decided before anything is read.
///
/// A pointer outside the reader's reach (and not `own`: what is the reader's whatever its reach, such as a message
/// spilled from its own inbox) is read only under a grant, and then the whole request goes through it. Pointers
/// within reach whose count the turn can still take are allowed on the budget, to be confirmed by their tokens; past
/// it, only a grant reads, and it is checked here, so a deref no budget and no grant covers never touches a file.
pub fn check_deref(
    reader: &Reader<'_>,
    meter: &DerefMeter,
    pointers: &[Pointer],
    own: impl Fn(&Pointer) -> bool,
    grant: Option<&str>,
    grants: &impl GrantStore,
    now: time::OffsetDateTime,
) -> Result<DerefPlan, Violation> {
    let outside = pointers.iter().find(|p| !reader.reach.covers(p) && !own(p));
    if let (Some(pointer), None) = (outside, grant) {
        return Err(outside_reach(reader.id, reader.reach, pointer));
    }
    let counts: Vec<(PointerType, u32)> = pointers.iter().map(|p| (p.ty(), 0)).collect();
    let budget_may_cover = outside.is_none() && meter.admit(reader.budget, &counts).is_some();
    match (budget_may_cover, grant) {
        (true, _) => {}
        (false, None) => return Err(over_budget(meter, reader.budget, pointers.len(), None)),
        (false, Some(grant_id)) => check_grant(grants, grant_id, reader.id, pointers, now)?,
    }
    Ok(DerefPlan { budget_may_cover, grant: grant.map(str::to_owned) })
}

impl DerefPlan {
    /// The first half of the commit step, for a side that keeps its meter and its grants under separate locks:
    /// charges `meter` when the budget covers `items` (pointer, tokens read) and says so, or names the grant that
    /// must pay ([`spend_on_deref`](super::spend_on_deref)); refuses when neither can.
    pub fn charge(
        &self,
        budget: &Budget,
        meter: &mut DerefMeter,
        items: &[(Pointer, u32)],
    ) -> Result<Charge, Violation> {
        let typed: Vec<(PointerType, u32)> = items.iter().map(|(p, n)| (p.ty(), *n)).collect();
        if let Some(next) = meter.admit(budget, &typed).filter(|_| self.budget_may_cover) {
            *meter = next;
            return Ok(Charge::Budget);
        }
        match &self.grant {
            Some(grant_id) => Ok(Charge::Grant(grant_id.clone())),
            None => {
                let n_tokens = items.iter().map(|(_, n)| *n).fold(0, u32::saturating_add);
                Err(over_budget(meter, budget, items.len(), Some(n_tokens)))
            }
        }
    }
}

/// The commit step: records what a deref planned by [`check_deref`] spent, now that its content was read and
/// counted (`items`: pointer, tokens). The turn's meter when the budget covers the tokens, else one use of the
/// grant; past both, refused with nothing spent.
pub fn commit_deref(
    plan: &DerefPlan,
    reader: &Reader<'_>,
    meter: &mut DerefMeter,
    items: &[(Pointer, u32)],
    grants: &mut impl GrantStore,
    now: time::OffsetDateTime,
) -> Result<Charge, Violation> {
    let charge = plan.charge(reader.budget, meter, items)?;
    if let Charge::Grant(grant_id) = &charge {
        spend_on_deref(grants, grant_id, reader.id, items, now)?;
    }
    Ok(charge)
}
