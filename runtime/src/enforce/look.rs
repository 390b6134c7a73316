//! Looking things up: what a search, a listing, a description or a recall may bring a reader inline, within its
//! `max_inline_tokens`. A run's gateway (`run/gateway/look.rs`) and the desk count their answers the way each shows
//! them; whether an answer fits, how it is cut and how it is refused is decided here, with one wording.

use less_contract::{Budget, ErrorCode, Violation};

/// Refuses a search answer of `n_hits` hits counted at `n_tokens` over the reader's `max_inline_tokens`, naming
/// `fit()`, the number of hits that would fit ([`crate::workspace::fitting`]; asked only of an answer refused).
pub fn check_search(
    n_hits: usize,
    n_tokens: u32,
    fit: impl FnOnce() -> usize,
    budget: &Budget,
) -> Result<(), Violation> {
    if n_tokens <= budget.max_inline_tokens {
        return Ok(());
    }
    Err(Violation::new(
        ErrorCode::BudgetExceeded,
        "/k",
        format!(
            "{n_hits} hits are {n_tokens} inline tokens; the reader accepts at most {} in one answer: search again \
             with k = {} or fewer, or with narrower words",
            budget.max_inline_tokens,
            fit()
        ),
    ))
}

/// Refuses a listing of `n_files` files counted at `n_tokens` over the reader's `max_inline_tokens`.
pub fn check_list(n_files: usize, n_tokens: u32, budget: &Budget) -> Result<(), Violation> {
    if n_tokens <= budget.max_inline_tokens {
        return Ok(());
    }
    Err(Violation::new(
        ErrorCode::BudgetExceeded,
        "/pattern",
        format!(
            "{n_files} files are {n_tokens} inline tokens; the reader accepts at most {} in one answer: list a \
             narrower path or glob",
            budget.max_inline_tokens
        ),
    ))
}

/// A description answer cut to the reader's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeFit {
    /// The indexes of the descriptions dropped (their pointers stay, bare), in order.
    pub cut: Vec<usize>,
    /// What the answer counts after the cut.
    pub tokens: u32,
}

/// Cuts a description answer to the reader's `max_inline_tokens`: the last descriptions go first (`described[i]`:
/// whether pointer `i` has one) until `count` of what is left fits; refused when not even the bare pointers fit.
/// `count` counts the answer with the descriptions marked `true` kept.
pub fn fit_descriptions(
    described: &[bool],
    budget: &Budget,
    count: impl Fn(&[bool]) -> u32,
) -> Result<DescribeFit, Violation> {
    let cap = budget.max_inline_tokens;
    let mut kept = described.to_vec();
    let mut tokens = count(&kept);
    let mut cut = Vec::new();
    for idx in (0..kept.len()).rev() {
        if tokens <= cap {
            break;
        }
        if kept[idx] {
            kept[idx] = false;
            cut.insert(0, idx);
            tokens = count(&kept);
        }
    }
    if tokens > cap {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "/pointers",
            format!(
                "{} pointers are {tokens} inline tokens even without what they hold; the reader accepts at most {cap} \
                 in one answer: describe fewer pointers",
                described.len()
            ),
        ));
    }
    Ok(DescribeFit { cut, tokens })
}

/// Cuts a recall answer of `n` engrams, best first, to the reader's `max_inline_tokens`: the most engrams that fit
/// with the rest named by pointers, and what that answer counts; refused when not even the pointers fit.
/// `count(k)` counts the answer keeping the first `k` engrams and naming the others by pointer.
pub fn fit_recall(n: usize, budget: &Budget, count: impl Fn(usize) -> u32) -> Result<(usize, u32), Violation> {
    let cap = budget.max_inline_tokens;
    let mut kept = n;
    loop {
        let tokens = count(kept);
        if tokens <= cap {
            return Ok((kept, tokens));
        }
        if kept == 0 {
            return Err(Violation::new(
                ErrorCode::BudgetExceeded,
                "/k",
                format!(
                    "the recall answer does not fit the reader's {cap} inline tokens even as pointers: ask for fewer \
                     engrams (a smaller k)"
                ),
            ));
        }
        kept -= 1;
    }
}
