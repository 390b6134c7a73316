//! Evidence recall of the memory on LoCoMo conversations (`lessrt eval locomo`).
//!
//! Every dialog turn of a conversation becomes an engram of that conversation's project, citing
//! `sam:<sample_id>:<dia_id>`; every QA question is asked against its own conversation. A question's recall@k is
//! the fraction of its evidence dia_ids among the top k retrieved turns (exact string match; a question without
//! evidence counts 1), averaged over all questions, overall and per category; the strict variant counts a question
//! only when all its evidence is in the top k.
//!
//! The caller opens the memory (which stages, which fusion weights) and shows progress; this module stores the
//! turns, asks the questions, scores them and writes the report.

use std::collections::BTreeMap;
use std::time::Instant;

use less_runtime::memory::{EmbedError, Fusion, Memory, MemoryError, Recall, RecallRequest, Stages, shared_embedder};
use less_runtime::{Engram, EngramKind, Pointer, Scope, Source, Ttl, Valid};
use serde::Deserialize;
use serde_json::{Value, json};

/// One LoCoMo sample: a conversation (its sessions of turns, and their dates) and the questions asked about it.
#[derive(Debug, Clone, Deserialize)]
pub struct Sample {
    /// The sample's id (`conv-26`): the project its turns are stored in.
    pub sample_id: String,
    /// `session_<n>` (a list of turns) and `session_<n>_date_time`, among other keys.
    pub conversation: serde_json::Map<String, Value>,
    /// The questions.
    pub qa: Vec<Qa>,
}

/// One question of a sample.
#[derive(Debug, Clone, Deserialize)]
pub struct Qa {
    /// The question.
    pub question: String,
    /// The dia_ids of the turns that answer it.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// LoCoMo's category (1 to 5).
    pub category: u32,
}

#[derive(Deserialize)]
struct Turn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

/// One question's category and its recall and strict recall at each k.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionScore {
    /// The question's category.
    pub category: u32,
    /// Recall at each k, in the order the k values were given.
    pub recall: Vec<f64>,
    /// Strict recall (1 only when all the evidence is found) at each k.
    pub strict: Vec<f64>,
    /// The question, its evidence and the dia_ids retrieved (the largest k), for reading what was missed.
    pub detail: Value,
}

/// What the questions scored, and how long each recall took.
#[derive(Debug, Clone, Default)]
pub struct Scores {
    /// One per question, in the order they were asked.
    pub questions: Vec<QuestionScore>,
    /// Each recall's latency, in milliseconds.
    pub latencies_ms: Vec<f64>,
}

/// Errors of the LoCoMo evaluation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocomoError {
    /// The memory failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A session of a sample is not a list of turns.
    #[error("a session is not a list of turns: {0}")]
    Turns(serde_json::Error),
    /// A turn does not make a valid engram.
    #[error("turn {dia_id}: {why}")]
    Turn {
        /// The turn.
        dia_id: String,
        /// What is wrong with its pointer or engram.
        why: String,
    },
    /// The embedding model is missing or failed.
    #[error("{0}")]
    Embed(String),
}

impl From<EmbedError> for LocomoError {
    fn from(err: EmbedError) -> LocomoError {
        LocomoError::Embed(err.to_string())
    }
}

/// Stores every sample's turns in `memory` and asks every question of it, scoring each at every k of `ks`.
/// `on_question(label, done, total)` is called before each sample is stored and before each question.
pub fn evaluate(
    memory: &mut Memory,
    samples: &[Sample],
    ks: &[usize],
    stages: Stages,
    on_question: &dyn Fn(&str, u64, u64),
) -> Result<Scores, LocomoError> {
    let k_max = ks.iter().copied().max().unwrap_or(10);
    let n_questions: usize = samples.iter().map(|s| s.qa.len()).sum();
    let mut scores = Scores::default();
    for sample in samples {
        // One bar over every question; it waits while a conversation is stored (and embedded).
        on_question("LoCoMo questions", scores.questions.len() as u64, n_questions as u64);
        let engrams = turns_as_engrams(sample)?;
        memory.put_many(&engrams, &sample.sample_id, 0)?;
        memory.flush()?;
        for qa in &sample.qa {
            on_question("LoCoMo questions", scores.questions.len() as u64, n_questions as u64);
            let started = Instant::now();
            let recall =
                memory.recall(&RecallRequest::in_project(&qa.question, &sample.sample_id, k_max).stages(stages))?;
            scores.latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            scores.questions.push(question_score(qa, &recall, &sample.sample_id, ks));
        }
    }
    Ok(scores)
}

/// Cross-validation of the optional fusion weights: every choice of turn context, writer, source and time (each on
/// at its default or off: 16 choices) on every question, then per conversation the choice that scores best on the
/// others, scored on it. Returns the questions, each scored by weights chosen without its conversation, and one
/// fold per conversation (`held_out`, `chosen`, `recall@10`). Needs at least two samples to mean anything.
pub fn cross_validate(
    memory: &mut Memory,
    samples: &[Sample],
    ks: &[usize],
    stages: Stages,
    on_question: &dyn Fn(&str, u64, u64),
) -> Result<(Scores, Vec<Value>), LocomoError> {
    let k_max = ks.iter().copied().max().unwrap_or(10);
    for sample in samples {
        memory.put_many(&turns_as_engrams(sample)?, &sample.sample_id, 0)?;
    }
    memory.flush()?;
    let defaults = Fusion::default();
    let choices: Vec<Fusion> = (0..16u8)
        .map(|bits| Fusion {
            context: if bits & 1 != 0 { defaults.context } else { 0.0 },
            author: if bits & 2 != 0 { defaults.author } else { 0.0 },
            source: if bits & 4 != 0 { defaults.source } else { 0.0 },
            time: if bits & 8 != 0 { defaults.time } else { 0.0 },
            ..defaults
        })
        .collect();
    let n_questions: usize = samples.iter().map(|s| s.qa.len()).sum();
    // scores[choice][sample] = the questions of that sample under that choice.
    let mut scores: Vec<Vec<Vec<QuestionScore>>> = Vec::new();
    let mut latencies_ms = Vec::new();
    for (n, fusion) in choices.iter().enumerate() {
        memory.set_fusion(*fusion);
        let mut per_sample = Vec::new();
        for sample in samples {
            let mut questions = Vec::new();
            for qa in &sample.qa {
                let done = (n * n_questions + per_sample.iter().map(Vec::len).sum::<usize>() + questions.len()) as u64;
                on_question("LoCoMo cross-validation", done, (choices.len() * n_questions) as u64);
                let started = Instant::now();
                let recall =
                    memory.recall(&RecallRequest::in_project(&qa.question, &sample.sample_id, k_max).stages(stages))?;
                latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
                questions.push(question_score(qa, &recall, &sample.sample_id, ks));
            }
            per_sample.push(questions);
        }
        scores.push(per_sample);
    }
    let at10 = ks.iter().position(|&k| k == 10).unwrap_or(0);
    let mean_at10 = |choice: usize, samples_in: &mut dyn Iterator<Item = usize>| {
        let (sum, count) = samples_in
            .flat_map(|s| scores[choice][s].iter())
            .fold((0.0, 0usize), |(sum, count), q| (sum + q.recall[at10], count + 1));
        if count == 0 { 0.0 } else { sum / count as f64 }
    };
    let mut tested = Vec::new();
    let mut folds = Vec::new();
    for held in 0..samples.len() {
        let best = (0..choices.len())
            .max_by(|&a, &b| {
                let score = |c| mean_at10(c, &mut (0..samples.len()).filter(|&s| s != held));
                score(a).total_cmp(&score(b)).then(b.cmp(&a))
            })
            .unwrap_or(0);
        let chosen = choices[best];
        folds.push(json!({
            "held_out": samples[held].sample_id,
            "chosen": {"context": round3(chosen.context), "author": round3(chosen.author), "source": round3(chosen.source),
                "time": round3(chosen.time)},
            "recall@10": (mean_at10(best, &mut std::iter::once(held)) * 1000.0).round() / 10.0,
        }));
        tested.extend(scores[best][held].iter().cloned());
    }
    Ok((Scores { questions: tested, latencies_ms }, folds))
}

/// The report: {"questions", "stages", "overall", "strict", "by_category", "latency_ms"} (recall in percent, one
/// decimal; latencies' p50 and p95).
pub fn report(ks: &[usize], scores: &Scores, stages: Stages) -> Value {
    let per_question = &scores.questions;
    let mean = |values: Vec<f64>| {
        if values.is_empty() { 0.0 } else { 100.0 * values.iter().sum::<f64>() / values.len() as f64 }
    };
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let table = |select: &dyn Fn(&QuestionScore) -> bool, strict: bool| {
        let mut out = serde_json::Map::new();
        for (idx, k) in ks.iter().enumerate() {
            let values: Vec<f64> = per_question
                .iter()
                .filter(|q| select(q))
                .map(|q| if strict { q.strict[idx] } else { q.recall[idx] })
                .collect();
            out.insert(format!("recall@{k}"), json!(round(mean(values))));
        }
        Value::Object(out)
    };
    let mut by_category = BTreeMap::new();
    for category in 1..=5u32 {
        let n = per_question.iter().filter(|q| q.category == category).count();
        if n > 0 {
            let mut t = table(&|q| q.category == category, false);
            t["questions"] = json!(n);
            by_category.insert(category.to_string(), t);
        }
    }
    let mut latencies = scores.latencies_ms.clone();
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    json!({
        "questions": per_question.len(),
        "stages": stages.as_str(),
        "overall": table(&|_| true, false),
        "by_category": by_category,
        "strict": table(&|_| true, true),
        "latency_ms": {"p50": (pick(0.5) * 1000.0).round() / 1000.0, "p95": (pick(0.95) * 1000.0).round() / 1000.0},
    })
}

/// The report as a table, line by line: recall at each k overall, strict and per category, then the latencies.
pub fn report_lines(ks: &[usize], report: &Value) -> Vec<String> {
    let mut lines = vec![format!(
        "LoCoMo evidence recall ({} questions, stages: {})",
        report["questions"],
        report["stages"].as_str().unwrap_or("")
    )];
    let header: Vec<String> = ks.iter().map(|k| format!("{:>9}", format!("@{k}"))).collect();
    lines.push(format!("{:<12}{}", "", header.join("")));
    let row = |name: &str, t: &Value| {
        let cells: Vec<String> =
            ks.iter().map(|k| format!("{:>9.1}", t[format!("recall@{k}")].as_f64().unwrap_or(0.0))).collect();
        format!("{name:<12}{}", cells.join(""))
    };
    lines.push(row("overall", &report["overall"]));
    lines.push(row("strict", &report["strict"]));
    for (category, t) in report["by_category"].as_object().into_iter().flatten() {
        lines.push(row(&format!("category {category}"), t));
    }
    lines.push(format!("query latency p50 {} ms, p95 {} ms", report["latency_ms"]["p50"], report["latency_ms"]["p95"]));
    lines
}

/// One line per cross-validation fold: the weights chosen on the other conversations and the held-out recall@10.
pub fn fold_lines(folds: &[Value]) -> Vec<String> {
    folds
        .iter()
        .map(|fold| {
            format!(
                "fold {}: context {}, writer {}, source {}, time {} chosen on the others; recall@10 {}",
                fold["held_out"].as_str().unwrap_or(""),
                fold["chosen"]["context"],
                fold["chosen"]["author"],
                fold["chosen"]["source"],
                fold["chosen"]["time"],
                fold["recall@10"]
            )
        })
        .collect()
}

/// The analysis dump (`lessrt eval locomo --dump`): every turn with its vector, every question with its vector and
/// its stage-1 candidates (all of them, with their hash scores), per sample. Stores nothing: `memory` must already
/// hold the samples' turns.
pub fn dump(memory: &mut Memory, samples: &[Sample]) -> Result<Value, LocomoError> {
    let embedder = shared_embedder().map_err(LocomoError::Embed)?;
    let mut out = Vec::new();
    for sample in samples {
        let engrams = turns_as_engrams(sample)?;
        let texts: Vec<&str> = engrams.iter().map(|e| e.claim.as_str()).collect();
        let vectors = embedder.embed(&texts)?;
        let turns: Vec<Value> = engrams
            .iter()
            .zip(&vectors)
            .map(|(e, v)| {
                json!({"dia_id": dia_id_of(&e.pointers[0], &sample.sample_id), "claim": e.claim,
                    "tags": e.tags, "vector": v})
            })
            .collect();
        let mut questions = Vec::new();
        for qa in &sample.qa {
            let recall = memory
                .recall(&RecallRequest::in_project(&qa.question, &sample.sample_id, 1000).stages(Stages::Hash))?;
            let stage1: Vec<Value> = recall
                .hits
                .iter()
                .filter_map(|h| {
                    let p = h.stored.engram.pointers.first()?;
                    Some(json!([dia_id_of(p, &sample.sample_id), h.hash_score]))
                })
                .collect();
            questions.push(json!({"question": qa.question, "category": qa.category, "evidence": qa.evidence,
                "vector": embedder.embed_one(&qa.question)?, "stage1": stage1}));
        }
        out.push(json!({"sample_id": sample.sample_id, "turns": turns, "questions": questions}));
    }
    Ok(Value::Array(out))
}

/// Every turn of every session, as an engram citing `sam:<sample_id>:<dia_id>`.
pub fn turns_as_engrams(sample: &Sample) -> Result<Vec<Valid<Engram>>, LocomoError> {
    let mut engrams = Vec::new();
    for n_session in 1.. {
        let Some(turns) = sample.conversation.get(&format!("session_{n_session}")) else { break };
        let date =
            sample.conversation.get(&format!("session_{n_session}_date_time")).and_then(Value::as_str).unwrap_or("");
        let turns: Vec<Turn> = serde_json::from_value(turns.clone()).map_err(LocomoError::Turns)?;
        for turn in turns {
            let invalid =
                |why: &dyn std::fmt::Display| LocomoError::Turn { dia_id: turn.dia_id.clone(), why: why.to_string() };
            let mut claim = format!("{}: {}", turn.speaker, turn.text);
            if let Some(caption) = &turn.blip_caption {
                claim.push_str(&format!(" [shares a photo: {caption}]"));
            }
            let claim: String = claim.chars().take(500).collect();
            let pointer =
                Pointer::parse(&format!("sam:{}:{}", sample.sample_id, turn.dia_id)).map_err(|v| invalid(&v))?;
            let mut builder = Engram::builder(EngramKind::Fact, claim, turn.speaker.clone())
                .pointer(pointer)
                .confidence(1.0)
                .ttl(Ttl::days(3650))
                .scope(Scope::Project)
                .source(Source::Sam)
                .created_at("2026-01-01T00:00:00Z");
            if !date.is_empty() {
                builder = builder.tag(date.chars().take(40).collect::<String>());
            }
            engrams.push(builder.build().map_err(|v| invalid(&v))?);
        }
    }
    Ok(engrams)
}

/// Recall and strict recall of one question against the retrieved dia_ids.
pub fn score(evidence: &[String], retrieved: &[String]) -> (f64, f64) {
    if evidence.is_empty() {
        return (1.0, 1.0);
    }
    let found = evidence.iter().filter(|e| retrieved.contains(e)).count();
    (found as f64 / evidence.len() as f64, if found == evidence.len() { 1.0 } else { 0.0 })
}

/// One question's category, recall and strict recall at each k, from a recall's hits.
fn question_score(qa: &Qa, recall: &Recall, sample_id: &str, ks: &[usize]) -> QuestionScore {
    let retrieved: Vec<String> =
        recall.hits.iter().filter_map(|h| h.stored.engram.pointers.first().map(|p| dia_id_of(p, sample_id))).collect();
    let (recall, strict) = ks.iter().map(|&k| score(&qa.evidence, &retrieved[..k.min(retrieved.len())])).unzip();
    let detail = json!({
        "sample": sample_id,
        "question": qa.question,
        "category": qa.category,
        "evidence": qa.evidence,
        "retrieved": retrieved,
    });
    QuestionScore { category: qa.category, recall, strict, detail }
}

/// A weight as a short decimal (0.3, not the f32's 0.30000001192092896).
fn round3(weight: f32) -> f64 {
    (f64::from(weight) * 1000.0).round() / 1000.0
}

fn dia_id_of(pointer: &Pointer, sample_id: &str) -> String {
    pointer.location().strip_prefix(&format!("{sample_id}:")).unwrap_or(pointer.location()).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_fraction_of_evidence_found_and_strict_needs_all() {
        let ev = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        assert_eq!(score(&ev(&["D1:3", "D2:4"]), &ev(&["D2:4", "D9:9"])), (0.5, 0.0));
        assert_eq!(score(&ev(&["D1:3"]), &ev(&["D1:3"])), (1.0, 1.0));
        assert_eq!(score(&[], &ev(&["D1:3"])), (1.0, 1.0), "no evidence counts 1");
        assert_eq!(score(&ev(&["D8:6; D9:17"]), &ev(&["D8:6", "D9:17"])), (0.0, 0.0), "evidence strings match exactly");
    }
}
