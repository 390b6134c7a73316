//! Ranking the candidates of a query: the fusion of stage-1 (BM25 over hash keys) and stage-2 (cosine of claim
//! vectors) evidence, the turn-context boost, and the stable tie-breakers.
//!
//! Pure functions over candidates, so the ranking rules are tested without a store or a model.
//!
//! Useful for: deciding the order of hits. Not for: finding candidates (`index.rs`, `vectors.rs`).

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::keys;
use super::store::Stored;
use less_contract::Scope;

/// One candidate with the evidence each stage found for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The engram (shared with the memory's row cache: a query ranks hundreds and returns a few).
    pub stored: Arc<Stored>,
    /// Stage-1 score (BM25 over shared keys), when stage 1 found it.
    pub hash: Option<f32>,
    /// Cosine of its claim vector with the query's, when stage 2 ran.
    pub cosine: Option<f32>,
    /// Its claim vector, when stage 2 ran (for the turn-context cosine).
    pub vector: Option<Vec<f32>>,
}

/// How the evidence of the two stages is weighed. Tuned on the LoCoMo development split only
/// (`lessrt eval locomo`); the figures it reaches are in docs/performance.md.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fusion {
    /// Weight of the stage-1 score, normalised by the best stage-1 score of the query.
    pub hash: f32,
    /// Weight of the cosine.
    pub cosine: f32,
    /// Share of the best adjacent item's score an engram receives (turn context: the turn after a question is its
    /// answer). Adjacent: cited sources of the same kind whose locations differ only in a final number by one.
    pub neighbour: f32,
    /// The least cosine a candidate found by stage 2 alone (no shared key) needs to be kept: nearest neighbours
    /// exist for any query, relevant or not.
    pub floor: f32,
    /// Turn context in the cosine: an engram's vector is blended with this share of each adjacent candidate's
    /// vector before the cosine is taken, so a short reply ("yes, last Sunday") carries what it replies to.
    pub context: f32,
    /// Added when the query names the engram's writer (`created_by`, as a word of the query).
    pub author: f32,
    /// Share of the best score among the candidates of the same source (the location up to its final number: one
    /// session, one file) an engram receives: evidence clusters in the sources that match best.
    pub source: f32,
    /// Added when the query asks for a time ("when …", "what year …") and the engram places something in time
    /// (a time word, a year, a date): the answer to a "when" is a time.
    pub time: f32,
    /// Added, when the query asks for a list ([`keys::asks_list`]), to the best item of each of the
    /// [`LEADER_SOURCES`] sources whose best item scores highest (by its own evidence, before anything lent): a
    /// list's evidence lies in several sessions, and the other terms crowd the top with one session's turns.
    pub leader: f32,
}

impl Fusion {
    /// The weights before issue 19 (stage 1 + cosine + adjacent turn), for comparison.
    pub const fn plain() -> Fusion {
        Fusion {
            hash: 1.0,
            cosine: 1.5,
            neighbour: 0.5,
            floor: 0.3,
            context: 0.0,
            author: 0.0,
            source: 0.0,
            time: 0.0,
            leader: 0.0,
        }
    }
}

impl Default for Fusion {
    /// The weights chosen on the LoCoMo development split, round values from a flat optimum that holds in
    /// cross-validation over its five conversations (docs/performance.md, "Memory recall on LoCoMo").
    fn default() -> Fusion {
        Fusion { context: 0.3, author: 0.3, source: 0.5, time: 0.5, leader: 0.2, ..Fusion::plain() }
    }
}

/// How many sources' best items the leader term lifts ([`Fusion::leader`]); chosen on the LoCoMo development split
/// (5 and 10 scored alike).
pub const LEADER_SOURCES: usize = 5;

/// What the tie-breakers compare against.
#[derive(Debug, Clone, Default)]
pub struct TieContext {
    /// The scope the query asked for, if any (an engram of exactly that scope wins a tie).
    pub scope: Option<Scope>,
    /// The query's features, to count pointer overlap (and to see whether it names an engram's writer).
    pub query_features: BTreeSet<String>,
    /// The query's vector, when stage 2 ran (for the turn-context cosine).
    pub query_vector: Option<Vec<f32>>,
    /// Whether the query asks for a time ([`keys::asks_time`]).
    pub asks_time: bool,
    /// Whether the query asks for a list ([`keys::asks_list`]).
    pub asks_list: bool,
}

/// A ranked candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The candidate.
    pub candidate: Candidate,
    /// The fused score the order is by (before tie-breakers).
    pub score: f32,
}

/// Orders candidates: by fused score, then the tie-breakers in order — scope match, recency, confidence, pointer
/// overlap — and finally by id, so equal inputs always give the same order.
pub fn rank(mut candidates: Vec<Candidate>, fusion: &Fusion, ties: &TieContext) -> Vec<Ranked> {
    candidates.retain(|c| c.hash.is_some() || c.cosine.is_some_and(|cosine| cosine >= fusion.floor));
    let best_hash = candidates.iter().filter_map(|c| c.hash).fold(0f32, f32::max);
    let keys: Vec<Option<(String, i64)>> = candidates.iter().map(adjacency_key).collect();
    let cosines: Vec<Option<f32>> = match (&ties.query_vector, fusion.context > 0.0) {
        (Some(query), true) => context_cosines(&candidates, &keys, query, fusion.context),
        _ => candidates.iter().map(|c| c.cosine).collect(),
    };
    let base: Vec<f32> = candidates
        .iter()
        .zip(&cosines)
        .map(|(c, cosine)| {
            let hash = match (c.hash, best_hash > 0.0) {
                (Some(h), true) => h / best_hash,
                _ => 0.0,
            };
            let author = if fusion.author != 0.0 && names_writer(c, ties) { fusion.author } else { 0.0 };
            let time = if fusion.time != 0.0 && ties.asks_time && keys::mentions_time(&c.stored.engram.claim) {
                fusion.time
            } else {
                0.0
            };
            fusion.hash * hash + fusion.cosine * cosine.unwrap_or(0.0) + author + time
        })
        .collect();
    let boosted = if fusion.neighbour > 0.0 { with_neighbours(&keys, &base, fusion.neighbour) } else { base.clone() };
    let boosted = if fusion.source > 0.0 { with_source(&keys, &boosted, fusion.source) } else { boosted };
    let boosted = if fusion.leader > 0.0 && ties.asks_list {
        with_leaders(&keys, &base, &boosted, fusion.leader)
    } else {
        boosted
    };
    let mut ranked: Vec<Ranked> = candidates
        .into_iter()
        .zip(boosted)
        // Scores are compared at a fixed precision so that float noise never decides what a tie-breaker should.
        .map(|(candidate, score)| Ranked { candidate, score: (score * 1e5).round() / 1e5 })
        .collect();
    let overlaps: HashMap<String, usize> =
        ranked.iter().map(|r| (r.candidate.stored.engram.id.clone(), pointer_overlap(&r.candidate, ties))).collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| tie_break(&a.candidate, &b.candidate, ties, &overlaps))
            .then_with(|| a.candidate.stored.engram.id.cmp(&b.candidate.stored.engram.id))
    });
    ranked
}

fn tie_break(a: &Candidate, b: &Candidate, ties: &TieContext, overlaps: &HashMap<String, usize>) -> Ordering {
    let scope_match = |c: &Candidate| ties.scope.is_some_and(|s| s == c.stored.engram.scope);
    let overlap = |c: &Candidate| overlaps.get(&c.stored.engram.id).copied().unwrap_or(0);
    scope_match(b)
        .cmp(&scope_match(a))
        .then_with(|| b.stored.stored_at.cmp(&a.stored.stored_at))
        .then_with(|| b.stored.engram.confidence.total_cmp(&a.stored.engram.confidence))
        .then_with(|| overlap(b).cmp(&overlap(a)))
}

/// How many of the engram's pointer features the query names.
fn pointer_overlap(c: &Candidate, ties: &TieContext) -> usize {
    c.stored.engram.pointers.iter().flat_map(keys::pointer_features).filter(|f| ties.query_features.contains(f)).count()
}

/// The location of a cited source split at its final number: `sam:conv-26:D3:7` → (`sam:conv-26:D3`, 7).
fn adjacency_key(c: &Candidate) -> Option<(String, i64)> {
    let pointer = c.stored.engram.pointers.first()?;
    let text = format!("{}:{}", pointer.ty().as_str(), pointer.location());
    let (head, tail) = text.rsplit_once([':', '-', '_'])?;
    Some((head.to_owned(), tail.parse().ok()?))
}

/// Whether the query names the engram's writer as one of its words.
fn names_writer(c: &Candidate, ties: &TieContext) -> bool {
    let writer = c.stored.engram.provenance.created_by.to_lowercase();
    !writer.is_empty() && ties.query_features.contains(&format!("w:{writer}"))
}

/// The cosine of each candidate's vector blended with `share` of each adjacent candidate's vector (the turn
/// before and after, when they are candidates too) with the query; the plain cosine where a vector is missing.
fn context_cosines(
    candidates: &[Candidate],
    keys: &[Option<(String, i64)>],
    query: &[f32],
    share: f32,
) -> Vec<Option<f32>> {
    let mut by_key: HashMap<(&str, i64), usize> = HashMap::new();
    for (at, key) in keys.iter().enumerate() {
        if let (Some((head, n)), Some(_)) = (key, &candidates[at].vector) {
            by_key.entry((head.as_str(), *n)).or_insert(at);
        }
    }
    candidates
        .iter()
        .zip(keys)
        .map(|(c, key)| {
            let (Some(vector), Some((head, n))) = (&c.vector, key) else { return c.cosine };
            let mut blended = vector.clone();
            for adjacent in [n - 1, n + 1] {
                if let Some(other) =
                    by_key.get(&(head.as_str(), adjacent)).and_then(|&at| candidates[at].vector.as_ref())
                {
                    blended.iter_mut().zip(other).for_each(|(b, o)| *b += share * o);
                }
            }
            let norm = blended.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm == 0.0 {
                return c.cosine;
            }
            Some(blended.iter().zip(query).map(|(b, q)| b * q).sum::<f32>() / norm)
        })
        .collect()
}

/// Each score plus `share` of the best score among the candidates of its source (the same location head).
fn with_source(keys: &[Option<(String, i64)>], scores: &[f32], share: f32) -> Vec<f32> {
    let mut best: HashMap<&str, f32> = HashMap::new();
    for (key, score) in keys.iter().zip(scores) {
        if let Some((head, _)) = key {
            let slot = best.entry(head.as_str()).or_insert(f32::MIN);
            *slot = slot.max(*score);
        }
    }
    keys.iter()
        .zip(scores)
        .map(|(key, score)| match key {
            Some((head, _)) => score + share * best.get(head.as_str()).copied().unwrap_or(0.0).max(0.0),
            None => *score,
        })
        .collect()
}

/// Session-level retrieval in one term: the sources ranked by the best score of their own items (`base`, before
/// anything lent), and the best item of each of the first [`LEADER_SOURCES`] lifted by `lift`, so that a list's
/// evidence spread over sessions is not crowded out of the top by one session's replies. Over the whole pool, so the
/// same whatever `k` is asked.
fn with_leaders(keys: &[Option<(String, i64)>], base: &[f32], scores: &[f32], lift: f32) -> Vec<f32> {
    // Per source: its best own score and where (the item of the lowest number on a tie, whatever the input order).
    let mut best: HashMap<&str, (f32, i64, usize)> = HashMap::new();
    for (at, (key, score)) in keys.iter().zip(base).enumerate() {
        if let Some((head, n)) = key {
            let slot = best.entry(head.as_str()).or_insert((*score, *n, at));
            if *score > slot.0 || (*score == slot.0 && *n < slot.1) {
                *slot = (*score, *n, at);
            }
        }
    }
    let mut sources: Vec<(&str, f32, usize)> =
        best.into_iter().map(|(head, (score, _, at))| (head, score, at)).collect();
    sources.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut out = scores.to_vec();
    for (_, _, at) in sources.into_iter().take(LEADER_SOURCES) {
        out[at] += lift;
    }
    out
}

fn with_neighbours(keys: &[Option<(String, i64)>], base: &[f32], share: f32) -> Vec<f32> {
    let mut by_key: HashMap<(&str, i64), f32> = HashMap::new();
    for (key, score) in keys.iter().zip(base) {
        if let Some((head, n)) = key {
            let slot = by_key.entry((head.as_str(), *n)).or_insert(0.0);
            *slot = slot.max(*score);
        }
    }
    keys.iter()
        .zip(base)
        .map(|(key, score)| match key {
            Some((head, n)) => {
                let before = by_key.get(&(head.as_str(), n - 1)).copied().unwrap_or(0.0);
                let after = by_key.get(&(head.as_str(), n + 1)).copied().unwrap_or(0.0);
                score + share * before.max(after)
            }
            None => *score,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::embed;
    use crate::memory::store::Tier;
    use less_contract::Pointer;
    use less_contract::{Engram, EngramKind};

    fn candidate(id: &str, scope: Scope, stored_at: i64, confidence: f64, pointer: &str) -> Candidate {
        let engram = Engram::builder(EngramKind::Fact, format!("claim {id}"), "agent")
            .pointer(Pointer::parse(pointer).expect("pointer"))
            .scope(scope)
            .confidence(confidence)
            .created_at("2026-01-01T00:00:00Z")
            .build()
            .expect("engram")
            .into_inner();
        let engram = Engram { id: id.to_owned(), ..engram };
        let stored = Stored {
            engram,
            project: "p".into(),
            tier: Tier::Hot,
            cold_reason: None,
            stored_at,
            expires_at: i64::MAX,
            superseded_by: None,
            supersedes: None,
            run: String::new(),
            written_by: "agent".into(),
            promoted_by: None,
        };
        Candidate { stored: Arc::new(stored), hash: Some(2.0), cosine: Some(0.5), vector: None }
    }

    fn order(candidates: Vec<Candidate>, fusion: &Fusion, ties: &TieContext) -> Vec<String> {
        rank(candidates, fusion, ties).into_iter().map(|r| r.candidate.stored.engram.id.clone()).collect()
    }

    #[test]
    fn ties_break_by_scope_match_then_recency_then_confidence_then_pointer_overlap_then_id() {
        let ties = TieContext {
            scope: Some(Scope::Project),
            query_features: keys::query_features("what does repo:src/cache.rs say"),
            ..TieContext::default()
        };
        let candidates = vec![
            candidate("e_id_b", Scope::Run, 100, 0.5, "repo:src/a.rs"),
            candidate("e_id_a", Scope::Run, 100, 0.5, "repo:src/a.rs"),
            candidate("e_overlap", Scope::Run, 100, 0.5, "repo:src/cache.rs"),
            candidate("e_confident", Scope::Run, 100, 0.9, "repo:src/a.rs"),
            candidate("e_recent", Scope::Run, 200, 0.1, "repo:src/a.rs"),
            candidate("e_scope", Scope::Project, 1, 0.1, "repo:src/a.rs"),
        ];
        let expected = ["e_scope", "e_recent", "e_confident", "e_overlap", "e_id_a", "e_id_b"];
        assert_eq!(order(candidates.clone(), &Fusion::default(), &ties), expected);
        let mut reversed = candidates;
        reversed.reverse();
        assert_eq!(order(reversed, &Fusion::default(), &ties), expected, "input order never matters");
    }

    #[test]
    fn the_fused_score_comes_before_every_tie_breaker() {
        let ties = TieContext { scope: Some(Scope::Project), ..TieContext::default() };
        let mut weak = candidate("e_weak", Scope::Project, 500, 1.0, "repo:src/a.rs");
        weak.cosine = Some(0.1);
        let strong = candidate("e_strong", Scope::Run, 1, 0.1, "repo:src/b.rs");
        assert_eq!(order(vec![weak.clone(), strong.clone()], &Fusion::default(), &ties), ["e_strong", "e_weak"]);
        let mut unrelated = candidate("e_unrelated", Scope::Project, 1, 1.0, "repo:src/c.rs");
        unrelated.hash = None;
        unrelated.cosine = Some(0.1);
        let kept = order(vec![unrelated.clone(), weak.clone()], &Fusion::default(), &ties);
        assert_eq!(kept, ["e_weak"], "a stage-2-only candidate below the floor is dropped");
        unrelated.cosine = Some(0.6);
        assert_eq!(order(vec![unrelated, weak.clone()], &Fusion::default(), &ties), ["e_weak", "e_unrelated"], "kept");
        // Stage 1 alone (no cosine weight): they tie again and the tie-breakers decide.
        let hash_only = Fusion { cosine: 0.0, ..Fusion::default() };
        assert_eq!(order(vec![strong, weak], &hash_only, &ties), ["e_weak", "e_strong"]);
    }

    #[test]
    fn an_adjacent_turn_lends_part_of_its_score() {
        let mut question = candidate("e_question", Scope::Project, 1, 1.0, "sam:conv-1:D2:7");
        question.hash = Some(4.0);
        let answer = candidate("e_answer", Scope::Project, 1, 1.0, "sam:conv-1:D2:8");
        let other = candidate("e_other", Scope::Project, 1, 1.0, "sam:conv-1:D5:1");
        let fusion = Fusion { hash: 1.0, cosine: 1.0, neighbour: 0.5, floor: 0.0, ..Fusion::plain() };
        let ranked = rank(vec![other, answer, question], &fusion, &TieContext::default());
        let ids: Vec<&str> = ranked.iter().map(|r| r.candidate.stored.engram.id.as_str()).collect();
        assert_eq!(ids, ["e_question", "e_answer", "e_other"], "the turn after the best one moves up");
        assert!(ranked[1].score > ranked[2].score);
    }

    fn plain(id: &str, pointer: &str, hash: f32, cosine: f32) -> Candidate {
        let mut c = candidate(id, Scope::Project, 1, 1.0, pointer);
        c.hash = Some(hash);
        c.cosine = Some(cosine);
        c
    }

    #[test]
    fn a_query_naming_the_writer_lifts_what_they_wrote() {
        let mut theirs = plain("e_theirs", "sam:c:D1:1", 1.0, 0.5);
        Arc::make_mut(&mut theirs.stored).engram.provenance.created_by = "Caroline".into();
        let mut other = plain("e_other", "sam:c:D2:1", 1.0, 0.55);
        Arc::make_mut(&mut other.stored).engram.provenance.created_by = "Melanie".into();
        let ties =
            TieContext { query_features: keys::query_features("what does Caroline paint"), ..TieContext::default() };
        let fusion = Fusion { author: 0.3, ..Fusion::plain() };
        assert_eq!(order(vec![other.clone(), theirs.clone()], &fusion, &ties), ["e_theirs", "e_other"]);
        assert_eq!(order(vec![other, theirs], &Fusion::plain(), &ties), ["e_other", "e_theirs"], "off: by score");
    }

    #[test]
    fn a_time_question_lifts_what_places_something_in_time() {
        let mut dated = plain("e_dated", "sam:c:D1:1", 1.0, 0.5);
        Arc::make_mut(&mut dated.stored).engram.claim = "Caroline: I went to the support group yesterday.".into();
        let mut undated = plain("e_undated", "sam:c:D2:1", 1.0, 0.6);
        Arc::make_mut(&mut undated.stored).engram.claim = "Caroline: the support group was lovely.".into();
        let fusion = Fusion { time: 0.5, ..Fusion::plain() };
        let asking = TieContext { asks_time: true, ..TieContext::default() };
        assert_eq!(order(vec![undated.clone(), dated.clone()], &fusion, &asking), ["e_dated", "e_undated"]);
        let not_asking = TieContext::default();
        assert_eq!(order(vec![undated.clone(), dated.clone()], &fusion, &not_asking), ["e_undated", "e_dated"]);
        assert_eq!(order(vec![undated, dated], &Fusion::plain(), &asking), ["e_undated", "e_dated"], "off: by score");
    }

    #[test]
    fn the_best_source_lends_its_score_to_its_other_items() {
        // D1 holds the best match; its weaker item passes the lone item of D2 that scored a little better.
        let best = plain("e_best", "sam:c:D1:1", 4.0, 0.6);
        let same = plain("e_same", "sam:c:D1:9", 1.0, 0.3);
        let lone = plain("e_lone", "sam:c:D2:5", 1.2, 0.3);
        let fusion = Fusion { neighbour: 0.0, source: 0.5, ..Fusion::plain() };
        let ties = TieContext::default();
        assert_eq!(
            order(vec![lone.clone(), same.clone(), best.clone()], &fusion, &ties),
            ["e_best", "e_same", "e_lone"]
        );
        let off = Fusion { neighbour: 0.0, ..Fusion::plain() };
        assert_eq!(order(vec![lone, same, best], &off, &ties), ["e_best", "e_lone", "e_same"]);
    }

    #[test]
    fn a_short_reply_takes_the_context_of_the_turn_it_answers() {
        // The query points at the question turn; the reply alone is a little further from it than an unrelated turn.
        let unit = |v: [f32; 3]| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        let query = unit([1.0, 0.0, 0.0]);
        let with_vector = |id: &str, pointer: &str, v: [f32; 3]| {
            let vector = unit(v);
            let mut c = plain(id, pointer, 0.0, embed::cosine(&query, &vector));
            c.hash = None;
            c.vector = Some(vector);
            c
        };
        let question = with_vector("e_question", "sam:c:D1:1", [1.0, 0.0, 0.0]);
        let reply = with_vector("e_reply", "sam:c:D1:2", [0.28, 0.96, 0.0]);
        let unrelated = with_vector("e_unrelated", "sam:c:D4:1", [0.29, 0.0, 0.957]);
        let fusion = Fusion { neighbour: 0.0, floor: 0.0, context: 0.3, ..Fusion::plain() };
        let ties = TieContext { query_vector: Some(query.clone()), ..TieContext::default() };
        let ranked = rank(vec![unrelated.clone(), reply.clone(), question.clone()], &fusion, &ties);
        let ids: Vec<&str> = ranked.iter().map(|r| r.candidate.stored.engram.id.as_str()).collect();
        assert_eq!(ids, ["e_question", "e_reply", "e_unrelated"]);
        // The reply's blended cosine: (0.28 + 0.3) / |(0.58, 0.96, 0)|.
        let expected = 0.58 / (0.58f32 * 0.58 + 0.96 * 0.96).sqrt();
        assert!((ranked[1].score - 1.5 * expected).abs() < 1e-3, "{}", ranked[1].score);
        // Without the query's vector (or with the share at 0) the plain cosine decides.
        for (fusion, ties) in [(fusion, TieContext::default()), (Fusion { context: 0.0, ..fusion }, ties)] {
            let ids: Vec<String> = rank(vec![unrelated.clone(), reply.clone(), question.clone()], &fusion, &ties)
                .into_iter()
                .map(|r| r.candidate.stored.engram.id.clone())
                .collect();
            assert_eq!(ids, ["e_question", "e_unrelated", "e_reply"]);
        }
    }

    #[test]
    fn a_list_question_lifts_the_best_item_of_each_of_the_best_sources() {
        // D1 holds the best match, and its other items ride on it (source and neighbour terms); D2 and D3 each hold
        // one item that matches on its own, a little less well: what a list question wants next.
        let best = plain("e_best", "sam:c:D1:1", 4.0, 0.6);
        let reply = plain("e_reply", "sam:c:D1:2", 0.5, 0.3);
        let other = plain("e_other", "sam:c:D1:5", 0.6, 0.3);
        let second = plain("e_second", "sam:c:D2:7", 2.0, 0.35);
        let third = plain("e_third", "sam:c:D3:4", 1.2, 0.3);
        let weak = plain("e_weak", "sam:c:D2:9", 0.2, 0.2);
        let all = vec![weak, third, second, other, reply, best];
        let fusion = Fusion::default();
        let list = TieContext { asks_list: true, ..TieContext::default() };
        let plain_order = ["e_best", "e_reply", "e_other", "e_second", "e_third", "e_weak"];
        assert_eq!(
            order(all.clone(), &fusion, &list),
            ["e_best", "e_reply", "e_second", "e_other", "e_third", "e_weak"],
            "the best item of D2 passes D1's third; D2's weaker item does not move"
        );
        assert_eq!(order(all.clone(), &fusion, &TieContext::default()), plain_order, "only for a list question");
        let off = Fusion { leader: 0.0, ..fusion };
        assert_eq!(order(all, &off, &list), plain_order, "off: as before");
    }
}
