//! Budgets: what a receiver accepts inline (engrams, tokens, pasted code) and what a reader's turn may dereference.

use less_contract::{Budget, ErrorCode, PointerType, Violation};

/// Checks a checked document of `n_engrams` engrams and `n_tokens` tokens against the receiver's budget: the engram
/// count, then MAX_INLINE_TOKENS. Inline code is checked after these by [`check_code`], so a grant's use is spent only on a
/// message that is otherwise acceptable.
pub fn check_inbound(n_engrams: usize, n_tokens: u32, budget: &Budget) -> Result<(), Violation> {
    if n_engrams > budget.max_engrams as usize {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "/engrams",
            format!("{n_engrams} engrams; the receiver accepts at most {}", budget.max_engrams),
        ));
    }
    if n_tokens > budget.max_inline_tokens {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "",
            format!("{n_tokens} inline tokens; the receiver accepts at most {}", budget.max_inline_tokens),
        ));
    }
    Ok(())
}

/// Checks `n_code` tokens of inline code against MAX_INLINE_CODE plus what a grant allows.
pub fn check_code(n_code: u32, budget: &Budget, allowance: u32) -> Result<(), Violation> {
    let allowed = budget.max_inline_code.saturating_add(allowance);
    if n_code > allowed {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "/body",
            format!(
                "{n_code} tokens of inline code; the receiver's MAX_INLINE_CODE is {}, and {allowed} are allowed with \
                 the grants that cover them: cite the code with pointers (repo:path#Lx-Ly) and let the receiver \
                 dereference them, or ask the parent for a grant allowing inline code",
                budget.max_inline_code
            ),
        ));
    }
    Ok(())
}

/// Per-turn deref usage of one reader.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DerefMeter {
    /// The turn these counts belong to.
    pub turn: u64,
    /// Repo spans pulled.
    pub repo_spans: u32,
    /// Artifact sections pulled.
    pub artifact_sections: u32,
    /// Episodic items pulled.
    pub sam_items: u32,
    /// Tokens pulled.
    pub tokens: u32,
}

impl DerefMeter {
    /// What the meter would read after `items` (type, tokens); `None` when the budget cannot cover them.
    pub fn admit(&self, budget: &Budget, items: &[(PointerType, u32)]) -> Option<DerefMeter> {
        let next = self.after(items);
        next.over(budget).is_empty().then_some(next)
    }

    /// What the meter would read after `items` (type, tokens), whether the budget covers them or not.
    pub fn after(&self, items: &[(PointerType, u32)]) -> DerefMeter {
        let mut next = *self;
        for &(ty, n_tokens) in items {
            match ty {
                PointerType::Repo | PointerType::Diff | PointerType::Test => {
                    next.repo_spans = next.repo_spans.saturating_add(1);
                }
                PointerType::Artifact => next.artifact_sections = next.artifact_sections.saturating_add(1),
                PointerType::Sam => next.sam_items = next.sam_items.saturating_add(1),
                PointerType::Url => {}
            }
            next.tokens = next.tokens.saturating_add(n_tokens);
        }
        next
    }

    /// The limits of `budget` these counts are over, each as `<field> <count>/<limit>` (diff and test spans count as
    /// repo spans); empty when the budget covers them.
    pub fn over(&self, budget: &Budget) -> Vec<String> {
        [
            ("max_repo_spans", self.repo_spans, budget.max_repo_spans),
            ("max_artifact_sections", self.artifact_sections, budget.max_artifact_sections),
            ("max_sam_items", self.sam_items, budget.max_sam_items),
            ("max_deref_tokens_total", self.tokens, budget.max_deref_tokens_total),
        ]
        .into_iter()
        .filter(|&(_, used, limit)| used > limit)
        .map(|(field, used, limit)| format!("{field} {used}/{limit}"))
        .collect()
    }
}

/// The refusal of a deref of `n_pointers` that this turn's budget cannot take and no grant pays for, with what the
/// turn used before it (`meter`). Before reading (`n_tokens` unknown) only spans can be over, and only they are
/// named; after reading, the tokens read are named too.
pub(crate) fn over_budget(meter: &DerefMeter, budget: &Budget, n_pointers: usize, n_tokens: Option<u32>) -> Violation {
    let plural = if n_pointers == 1 { "" } else { "s" };
    let used = format!(
        "repo {}/{}, artifact {}/{}, sam {}/{}",
        meter.repo_spans,
        budget.max_repo_spans,
        meter.artifact_sections,
        budget.max_artifact_sections,
        meter.sam_items,
        budget.max_sam_items
    );
    let message = match n_tokens {
        None => format!(
            "{n_pointers} pointer{plural} exceed this turn's deref budget (used: {used}) and no grant was presented"
        ),
        Some(n_tokens) => format!(
            "{n_pointers} pointer{plural} / {n_tokens} tokens exceed this turn's deref budget (used: {used}, tokens \
             {}/{}) and no grant was presented",
            meter.tokens, budget.max_deref_tokens_total
        ),
    };
    Violation::new(ErrorCode::DerefDenied, "", message)
}
