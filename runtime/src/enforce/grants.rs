//! Grants: what a held grant still allows, the one trait both sides keep grants behind, and what an issuer may pass
//! on.
//!
//! A grant is accepted once into a [`HeldGrant`] (its MAC verified, issued to its holder by an ancestor); from then on
//! a [`GrantStore`] keeps it and what is left of it. Spending is the store's one write: it reads what is left,
//! lets the core decide ([`spend_on_deref`], [`spend_on_code`]) and takes down what the core says, in one step, so
//! two spenders never take the same use.

use std::collections::HashMap;

use less_contract::{ErrorCode, Grant, GrantTerms, Pointer, Violation};

use super::reach::{Forms, GrantPattern, Reach};

/// What is left of a held grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantLeft {
    /// Uses (derefs or messages it may still cover).
    pub uses: u32,
    /// Pointers it may still cover.
    pub derefs: u32,
    /// Tokens it may still cover.
    pub tokens: u32,
}

/// What one use of a grant takes besides the use itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spend {
    /// Pointers.
    pub derefs: u32,
    /// Tokens.
    pub tokens: u32,
}

/// A grant its holder accepted, with what is left of it.
#[derive(Debug, Clone)]
pub struct HeldGrant {
    grant: Grant,
    /// The grant's patterns, compiled once when it is accepted.
    patterns: Vec<GrantPattern>,
    /// Invariant: never more than the terms give.
    left: GrantLeft,
    expires: time::OffsetDateTime,
}

impl HeldGrant {
    /// Accepts `grant` for `holder`: the MAC must verify with `secret`, the grantee must be `holder`, the issuer an
    /// ancestor of it, and the expiry must parse. All of it is left.
    pub fn accept(
        grant: Grant,
        holder: &str,
        secret: &[u8; 32],
        issuer_is_ancestor: bool,
    ) -> Result<HeldGrant, Violation> {
        grant.verify(secret)?;
        let terms = &grant.terms;
        if terms.grantee != holder {
            return Err(grant_invalid(&terms.grant_id, &format!("it was issued to {}, not {holder}", terms.grantee)));
        }
        if !issuer_is_ancestor {
            return Err(grant_invalid(&terms.grant_id, &format!("{} is not an ancestor of {holder}", terms.issuer)));
        }
        let expires = parse_time(&terms.expires_at).ok_or_else(|| grant_invalid(&terms.grant_id, "bad expiry"))?;
        Ok(HeldGrant {
            left: GrantLeft { uses: terms.uses, derefs: terms.max_derefs, tokens: terms.max_tokens },
            expires,
            patterns: terms.patterns.iter().map(|p| GrantPattern::new(p)).collect(),
            grant,
        })
    }

    /// The same grant with only `left` of it left (a store that keeps what was spent apart from the grant); never
    /// more than its terms give.
    pub fn with_left(mut self, left: GrantLeft) -> HeldGrant {
        self.left = GrantLeft {
            uses: left.uses.min(self.left.uses),
            derefs: left.derefs.min(self.left.derefs),
            tokens: left.tokens.min(self.left.tokens),
        };
        self
    }

    /// Its terms.
    pub fn terms(&self) -> &GrantTerms {
        &self.grant.terms
    }

    /// What is left of it.
    pub fn left(&self) -> GrantLeft {
        self.left
    }

    /// Takes one use and `spend` from what is left; the caller checked that it is left.
    fn take(&mut self, spend: Spend) {
        self.left.uses = self.left.uses.saturating_sub(1);
        self.left.derefs = self.left.derefs.saturating_sub(spend.derefs);
        self.left.tokens = self.left.tokens.saturating_sub(spend.tokens);
    }

    /// Whether `holder` may use it at `now`: issued to it, not expired, a use left.
    fn live(&self, holder: &str, now: time::OffsetDateTime) -> Result<(), Violation> {
        let grant_id = &self.grant.terms.grant_id;
        if self.grant.terms.grantee != holder {
            return Err(no_such_grant(grant_id, holder));
        }
        if now > self.expires {
            return Err(grant_invalid(grant_id, &format!("expired at {}", self.grant.terms.expires_at)));
        }
        if self.left.uses == 0 {
            return Err(no_uses_left(grant_id));
        }
        Ok(())
    }

    /// Whether `holder` may spend it at `now` on `pointers` of `n_tokens` tokens (`None`: not read yet, so only the
    /// pointers are counted): live, enough derefs and tokens left, every pointer matching one of its patterns.
    fn check_deref(
        &self,
        holder: &str,
        pointers: &[&Pointer],
        n_tokens: Option<u32>,
        now: time::OffsetDateTime,
    ) -> Result<Spend, Violation> {
        self.live(holder, now)?;
        let grant_id = &self.grant.terms.grant_id;
        let n_pointers = u32::try_from(pointers.len()).unwrap_or(u32::MAX);
        if n_pointers > self.left.derefs || n_tokens.is_some_and(|n| n > self.left.tokens) {
            let needs = match n_tokens {
                Some(n_tokens) => format!("{n_pointers} and {n_tokens}"),
                None => format!("{n_pointers} and tokens not yet read"),
            };
            return Err(Violation::new(
                ErrorCode::DerefDenied,
                "",
                format!(
                    "grant {grant_id} has {} derefs and {} tokens left; the request needs {needs}",
                    self.left.derefs, self.left.tokens
                ),
            ));
        }
        self.covers(pointers.iter().copied())?;
        Ok(Spend { derefs: n_pointers, tokens: n_tokens.unwrap_or(0) })
    }

    /// Every pointer must match one of its patterns.
    fn covers<'a>(&self, pointers: impl Iterator<Item = &'a Pointer>) -> Result<(), Violation> {
        for pointer in pointers {
            let forms = Forms::of(pointer);
            if !self.patterns.iter().any(|pattern| pattern.covers(&forms)) {
                return Err(Violation::new(
                    ErrorCode::DerefDenied,
                    "",
                    format!("grant {} does not cover {pointer}", self.grant.terms.grant_id),
                ));
            }
        }
        Ok(())
    }
}

/// Where the grants of a run or a desk are kept, and what is left of each.
///
/// The store decides nothing: it finds a grant, and it takes down what the core's decision says, atomically with
/// reading what is left (a desk's store is shared by processes). A run's gateway keeps its agent's grants in a
/// [`GrantBook`]; the desk keeps every client's in `desk.sqlite`.
pub trait GrantStore {
    /// The grant `grant_id` if `holder` holds it, with what is left of it; `None` when it holds no such grant.
    fn held(&self, grant_id: &str, holder: &str) -> Result<Option<HeldGrant>, Violation>;

    /// The grants `holder` holds with a use left (expired ones too: the core judges the time).
    fn held_by(&self, holder: &str) -> Result<Vec<HeldGrant>, Violation>;

    /// Reads `grant_id` as `holder` holds it (`None`: it holds no such grant), lets `decide` refuse or say what one use
    /// takes, and takes it, as one step. Nothing is taken when `decide` refuses.
    fn spend(
        &mut self,
        grant_id: &str,
        holder: &str,
        decide: &mut dyn FnMut(Option<&HeldGrant>) -> Result<Spend, Violation>,
    ) -> Result<(), Violation>;
}

/// The grants one agent of a run holds, in memory: its gateway's [`GrantStore`].
#[derive(Debug, Default)]
pub struct GrantBook {
    held: HashMap<String, HeldGrant>,
}

impl GrantBook {
    /// Accepts a grant delivered to `owner` ([`HeldGrant::accept`]); a grant is delivered once.
    pub fn accept(
        &mut self,
        grant: Grant,
        owner: &str,
        secret: &[u8; 32],
        issuer_is_ancestor: bool,
    ) -> Result<(), Violation> {
        let held = HeldGrant::accept(grant, owner, secret, issuer_is_ancestor)?;
        let grant_id = &held.grant.terms.grant_id;
        if self.held.contains_key(grant_id) {
            // Delivering a grant again must not refill its uses.
            return Err(grant_invalid(grant_id, "already held; a grant is delivered once"));
        }
        self.held.insert(grant_id.clone(), held);
        Ok(())
    }

    /// What is left of `grant_id`, if it is held.
    pub fn left(&self, grant_id: &str) -> Option<GrantLeft> {
        self.held.get(grant_id).map(HeldGrant::left)
    }

    /// Takes again one use and `spend` that the ledger says were spent before this book was made (an agent restored
    /// on another node or after its node failed), without judging them again: they were judged when spent. Whether
    /// the grant is held.
    pub fn spent_before(&mut self, grant_id: &str, spend: Spend) -> bool {
        self.held.get_mut(grant_id).map(|held| held.take(spend)).is_some()
    }
}

impl GrantStore for GrantBook {
    fn held(&self, grant_id: &str, holder: &str) -> Result<Option<HeldGrant>, Violation> {
        Ok(self.held.get(grant_id).filter(|h| h.grant.terms.grantee == holder).cloned())
    }

    fn held_by(&self, holder: &str) -> Result<Vec<HeldGrant>, Violation> {
        Ok(self.held.values().filter(|h| h.grant.terms.grantee == holder && h.left.uses > 0).cloned().collect())
    }

    fn spend(
        &mut self,
        grant_id: &str,
        holder: &str,
        decide: &mut dyn FnMut(Option<&HeldGrant>) -> Result<Spend, Violation>,
    ) -> Result<(), Violation> {
        let held = self.held.get_mut(grant_id).filter(|h| h.grant.terms.grantee == holder);
        let spend = decide(held.as_deref())?;
        if let Some(held) = held {
            held.take(spend);
        }
        Ok(())
    }
}

/// Spends one use of `grant_id`, held by `holder`, on a deref of `items` (pointer, tokens read): the commit step of a
/// deref the budget did not cover.
pub fn spend_on_deref(
    store: &mut impl GrantStore,
    grant_id: &str,
    holder: &str,
    items: &[(Pointer, u32)],
    now: time::OffsetDateTime,
) -> Result<(), Violation> {
    let pointers: Vec<&Pointer> = items.iter().map(|(p, _)| p).collect();
    let n_tokens = items.iter().map(|(_, n)| *n).fold(0, u32::saturating_add);
    store.spend(grant_id, holder, &mut |held| {
        held.ok_or_else(|| no_such_grant(grant_id, holder))?.check_deref(holder, &pointers, Some(n_tokens), now)
    })
}

/// Checks, before anything is read, that `holder` may spend `grant_id` on `pointers` now: the check step of a deref
/// that goes through a grant. Nothing is spent.
pub(crate) fn check_grant(
    store: &impl GrantStore,
    grant_id: &str,
    holder: &str,
    pointers: &[Pointer],
    now: time::OffsetDateTime,
) -> Result<(), Violation> {
    let held = store.held(grant_id, holder)?.ok_or_else(|| no_such_grant(grant_id, holder))?;
    let pointers: Vec<&Pointer> = pointers.iter().collect();
    held.check_deref(holder, &pointers, None, now).map(|_| ())
}

/// Spends one use of `grant_id`, held by `holder` (the sender), on a message of `n_code` tokens of inline code taken
/// from `sources`; returns the inline-code tokens the grant allows.
pub fn spend_on_code(
    store: &mut impl GrantStore,
    grant_id: &str,
    holder: &str,
    sources: &[Pointer],
    n_code: u32,
    now: time::OffsetDateTime,
) -> Result<u32, Violation> {
    let mut allowed = 0;
    store.spend(grant_id, holder, &mut |held| {
        let held = held.ok_or_else(|| no_such_grant(grant_id, holder))?;
        held.live(holder, now)?;
        allowed = held.grant.terms.inline_code_tokens;
        if n_code > allowed {
            return Err(Violation::new(
                ErrorCode::BudgetExceeded,
                "/body",
                format!("{n_code} tokens of inline code; grant {grant_id} allows {allowed}"),
            ));
        }
        held.covers(sources.iter())?;
        Ok(Spend { derefs: 0, tokens: 0 })
    })?;
    Ok(allowed)
}

/// Whether `terms.issuer`, with `reach` and the grants it holds in `grants`, may issue a grant of `terms` now: only
/// to a descendant (`is_descendant`; path `/to`), and each pattern (path `/patterns/<i>`) inside the workspace and
/// within what the issuer holds: its reach, or what is left of one grant it holds (the pattern within that grant's,
/// no more uses, derefs, tokens or inline code than it has left, a lifetime that ends no later). An agent grants
/// only what it may read itself.
pub fn check_issue(
    terms: &GrantTerms,
    is_descendant: bool,
    reach: &Reach,
    grants: &impl GrantStore,
    now: time::OffsetDateTime,
) -> Result<(), Violation> {
    let (grant_id, issuer) = (&terms.grant_id, &terms.issuer);
    if !is_descendant {
        let why = format!("{issuer} may only grant to its descendants, not {}", terms.grantee);
        return Err(Violation { path: "/to".to_owned(), ..grant_invalid(grant_id, &why) });
    }
    let at = |i: usize, violation: Violation| Violation { path: format!("/patterns/{i}"), ..violation };
    for (i, pattern) in terms.patterns.iter().enumerate() {
        if less_contract::leaves_workspace(pattern) {
            let why = format!(
                "{pattern} names places outside the workspace, which no issuer holds; grant pointers or patterns \
                 relative to it (repo:src/**), without `..`"
            );
            return Err(at(i, grant_invalid(grant_id, &why)));
        }
    }
    let held = grants.held_by(issuer)?;
    let expires = parse_time(&terms.expires_at);
    for (i, pattern) in terms.patterns.iter().enumerate() {
        let passes_on = |held: &HeldGrant| {
            let (outer, left) = (&held.grant.terms, held.left);
            now <= held.expires
                && expires.is_some_and(|expires| expires <= held.expires)
                && left.uses >= terms.uses.max(1)
                && left.derefs >= terms.max_derefs
                && left.tokens >= terms.max_tokens
                && outer.inline_code_tokens >= terms.inline_code_tokens
                && less_contract::pattern_within_any(pattern, &outer.patterns)
        };
        if !reach.holds(pattern) && !held.iter().any(passes_on) {
            let why = format!(
                "{pattern} is wider than {issuer} holds (it reads {} without a grant, and no grant it holds covers \
                 this one's pattern, uses, derefs, tokens and lifetime): an agent grants only what it may read itself",
                reach.describe()
            );
            return Err(at(i, grant_invalid(grant_id, &why)));
        }
    }
    Ok(())
}

/// `LESS_GRANT_INVALID` about `grant_id`, saying `why`.
fn grant_invalid(grant_id: &str, why: &str) -> Violation {
    Violation::new(ErrorCode::GrantInvalid, "", format!("grant {grant_id}: {why}"))
}

/// A grant with no use left (or, at a store shared by processes, whose last use another spent first).
pub fn no_uses_left(grant_id: &str) -> Violation {
    grant_invalid(grant_id, "no uses left")
}

/// A grant `holder` does not hold: never issued, issued to another, or forged.
fn no_such_grant(grant_id: &str, holder: &str) -> Violation {
    grant_invalid(grant_id, &format!("{holder} holds no such grant (grants cannot be shared or forged)"))
}

/// An RFC 3339 time, as grants state their expiry.
fn parse_time(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}
