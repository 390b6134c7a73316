//! The one table of extraction rules: every marker the context ledger recognizes, English and Russian, in one place.
//!
//! A clause of a cold message is read in this order (see `extract.rs`):
//! 1. a leading [`Act::Correction`] marker is stripped and remembered;
//! 2. the obligation rules, in table order, first match wins (so "no need to" cancels before "need to" opens);
//! 3. when no obligation rule matched, the decision rules, first match wins;
//! 4. the question rules (answers first);
//! 5. when the clause is neither an obligation nor a question, every fact rule, left to right.
//!
//! Every pattern names what it captures: `rest` (the entry's text), `old` (what a changed decision replaces),
//! `subject` and `value` (a fact). Every rule also lists literal keys; a rule is tried on a clause only when the
//! lowercased clause contains one of them, so most rules cost a substring search, not a regex.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What a rule recognizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    /// A leading marker saying the clause corrects something said before (`correction:`, `actually,`, `поправка:`).
    Correction,
    /// An obligation is called off (`cancel:`, `no need to`, `не надо`).
    ObligationCancelled,
    /// An obligation is done (`done:`, `сделано:`).
    ObligationDone,
    /// A closed obligation is back (`reopen:`, `need to … again`, `снова надо`).
    ObligationReopened,
    /// A new obligation (`TODO`, `need to`, `must`, `remind me`, `надо`, `нужно`, `не забыть`).
    Obligation,
    /// An explicit change of decision (`decision changed:`, `передумали:`): replaces the decision it names, or the
    /// latest one.
    DecisionChanged,
    /// A contrast that replaces a decision only when it names one (`instead of X`, `no longer X`, `вместо X`).
    DecisionContrast,
    /// Names what a changed decision replaces (`old`).
    DecisionReplaces,
    /// A decision (`decision:`, `we decided`, `let's go with`, `решили`, `договорились`).
    Decision,
    /// An answer to an open question (`answer:`, `ответ:`).
    Answer,
    /// A question (`question:`, `вопрос:`, or a clause ending in `?`).
    Question,
    /// A fact: `subject` → `value` (`the X is Y`, `set the X to Y`, `X — Y`, `X теперь Y`).
    Fact,
}

/// The language a rule is written for (documentation; all rules run on every clause).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    /// English markers.
    En,
    /// Russian markers.
    Ru,
    /// Language-neutral shape (a trailing `?`).
    Any,
}

/// One extraction rule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// What a match means.
    pub act: Act,
    /// Which language's marker it is.
    #[allow(dead_code)] // Read by the table test and by humans; the extractor treats every language alike.
    pub lang: Lang,
    /// Lowercase literals of which a clause must contain one for the pattern to be tried: a cheap prefilter (the
    /// patterns use Unicode word boundaries, which the fast regex engines handle only on ASCII text).
    pub keys: &'static [&'static str],
    /// The regular expression (case-insensitive where it says `(?i)`).
    pub pattern: &'static str,
}

/// Separators that may follow a marker word.
macro_rules! sep {
    () => {
        r"[\s:,!—–-]*"
    };
}

/// A fact value: no clause punctuation, no parentheses (they delimit citations in the ledger).
macro_rules! value {
    () => {
        r"(?P<value>[^\s,;!?()][^,;!?()]{0,79})"
    };
}

/// A fact subject: up to a few words.
macro_rules! subject {
    () => {
        r"(?P<subject>[\p{L}\d][\p{L}\d _-]{0,40}?)"
    };
}

/// Every rule, in precedence order within each act group.
pub(crate) const RULES: &[Rule] = &[
    // Corrections: anchored at the clause start; the rest of the clause is read by the other rules.
    Rule {
        act: Act::Correction,
        lang: Lang::En,
        keys: &["correction", "corrected", "update", "upd", "fix"],
        pattern: r"(?i)^(?:correction|corrected|update|upd|fix)\s*:\s*(?P<rest>.*)$",
    },
    Rule {
        act: Act::Correction,
        lang: Lang::En,
        keys: &["actually", "sorry", "oops", "wait", "mistake", "wrong", "misspoke", "correct myself"],
        pattern: concat!(
            r"(?i)^(?:actually|sorry|oops|no wait|wait|my mistake|i was wrong|i misspoke|to correct myself)\b",
            sep!(),
            r"(?P<rest>.*)$"
        ),
    },
    Rule {
        act: Act::Correction,
        lang: Lang::Ru,
        keys: &["поправка", "исправление", "уточнение"],
        pattern: r"(?i)^(?:поправка|исправление|уточнение)\s*:\s*(?P<rest>.*)$",
    },
    Rule {
        act: Act::Correction,
        lang: Lang::Ru,
        keys: &["на самом деле", "ошиб", "вернее", "точнее", "стоп"],
        pattern: concat!(
            r"(?i)^(?:на самом деле|я ошибся|я ошиблась|ошибся|ошиблась|вернее|точнее|нет,? стоп)\b",
            sep!(),
            r"(?P<rest>.*)$"
        ),
    },
    // Obligations: closing and reopening before opening.
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::En,
        keys: &["cancel", "never", "scratch that", "forget about", "drop the todo"],
        pattern: concat!(
            r"(?i)^(?:cancel(?:l?ed)?|never ?mind|scratch that|forget about|drop the todo)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::En,
        keys: &["need to"],
        pattern: r"(?i)\b(?:no longer need to|don't need to|do not need to|no need to)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::Ru,
        keys: &["отмен", "отбой", "забудь про"],
        pattern: concat!(r"(?i)^(?:отмена|отменяем|отменено|отменить|отбой|забудь про)\b", sep!(), r"(?P<rest>.+)$"),
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::Ru,
        keys: &["не надо", "не нужно"],
        pattern: r"(?i)\b(?:больше не надо|больше не нужно|уже не надо|уже не нужно|не надо|не нужно)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::En,
        keys: &["done", "finished", "completed", "fixed"],
        pattern: concat!(r"(?i)^(?:done|finished|completed|fixed)\b", sep!(), r"(?P<rest>.+)$"),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::En,
        keys: &["done", "finished", "completed"],
        pattern: r"(?i)^(?:i|we) (?:have |'ve )?(?:just )?(?:done|finished|completed)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::Ru,
        keys: &["сделан", "сделал", "готово", "выполн", "закрыто"],
        pattern: concat!(
            r"(?i)^(?:сделано|готово|выполнено|закрыто|сделал|сделала|сделали|выполнил|выполнила)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationReopened,
        lang: Lang::En,
        keys: &["reopen", "re-open", "back on the list"],
        pattern: concat!(r"(?i)^(?:reopen(?:ed|ing)?|re-open(?:ed)?|back on the list)\b", sep!(), r"(?P<rest>.+)$"),
    },
    Rule {
        act: Act::ObligationReopened,
        lang: Lang::En,
        keys: &["again"],
        pattern: r"(?i)\b(?:need to|have to|must) (?P<rest>.+?) again\W*$",
    },
    Rule {
        act: Act::ObligationReopened,
        lang: Lang::Ru,
        keys: &["снова", "опять", "переоткры", "возвращаем"],
        pattern: concat!(
            r"(?i)^(?:снова|опять|переоткрыть|переоткрываю|возвращаем)\b",
            sep!(),
            r"(?:надо|нужно)?\s*(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::Obligation,
        lang: Lang::En,
        keys: &["todo", "to-do", "action item"],
        pattern: r"(?i)\b(?:todo|to-do|action item)\b[\s:—–-]*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Obligation,
        lang: Lang::En,
        keys: &["remind me", "forget to", "remember to"],
        pattern: r"(?i)\b(?:remind me to|remind me|don't forget to|do not forget to|remember to)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Obligation,
        lang: Lang::En,
        keys: &["need", "must", "have to", "has to"],
        pattern: r"(?i)\b(?:need to|needs to|must|have to|has to)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Obligation,
        lang: Lang::Ru,
        keys: &["забыть", "забудь", "напомни"],
        pattern: r"(?i)\b(?:не забыть|не забудь|напомни мне|напомни|напомнить)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Obligation,
        lang: Lang::Ru,
        keys: &["надо", "нужно", "необходимо", "должен", "должна", "должны"],
        pattern: r"(?i)\b(?:надо|нужно|необходимо|должен|должна|должны)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Obligation, lang: Lang::Ru, keys: &["задача"], pattern: r"(?i)\bзадача\s*:\s*(?P<rest>.+)$"
    },
    // Decisions: changes before new decisions.
    Rule {
        act: Act::DecisionChanged,
        lang: Lang::En,
        keys: &["decision", "change of plan", "changed our mind", "plan changed"],
        pattern: concat!(
            r"(?i)^(?:decision changed|change of plans?|changed the decision|we changed our minds?|new decision|",
            r"revised decision|plan changed)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::DecisionChanged,
        lang: Lang::Ru,
        keys: &["решение изменилось", "меняем решение", "передумали", "новое решение", "план изменился"],
        pattern: concat!(
            r"(?i)^(?:решение изменилось|меняем решение|передумали|новое решение|план изменился)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::DecisionContrast,
        lang: Lang::En,
        keys: &["instead", "no longer", "rather than"],
        pattern: r"(?i)^(?P<rest>.*\b(?:instead|no longer|rather than)\b.*)$",
    },
    Rule {
        act: Act::DecisionContrast,
        lang: Lang::Ru,
        keys: &["вместо", "больше не"],
        pattern: r"(?i)^(?P<rest>.*\b(?:вместо|больше не)\b.*)$",
    },
    Rule {
        act: Act::DecisionReplaces,
        lang: Lang::En,
        keys: &["instead of", "rather than"],
        pattern: r"(?i)\b(?:instead of|rather than) (?:the |using |use )?(?P<old>[\p{L}\d][\p{L}\d._+#-]*)",
    },
    Rule {
        act: Act::DecisionReplaces,
        lang: Lang::En,
        keys: &["no longer"],
        pattern: r"(?i)\bno longer (?:[\p{L}]+ )?(?:with |on |to |the )?(?P<old>[\p{L}\d][\p{L}\d._+#-]*)",
    },
    Rule {
        act: Act::DecisionReplaces,
        lang: Lang::Ru,
        keys: &["вместо"],
        pattern: r"(?i)\bвместо (?P<old>[\p{L}\d][\p{L}\d._+#-]*)",
    },
    Rule {
        act: Act::DecisionReplaces,
        lang: Lang::Ru,
        keys: &["больше не"],
        pattern: r"(?i)\bбольше не (?:[\p{L}]+ )?(?P<old>[\p{L}\d][\p{L}\d._+#-]*)",
    },
    Rule {
        act: Act::Decision,
        lang: Lang::En,
        keys: &["decision", "decided"],
        pattern: r"(?i)^(?:decision|decided|final decision)\s*[:—–-]\s*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Decision,
        lang: Lang::En,
        keys: &["go with", "let's use", "'ll use", "will use", "agreed", "decided"],
        pattern: concat!(
            r"(?i)^(?P<rest>(?:we(?:'ll| will) go with|let's go with|let's use|we(?:'ll| will) use|we agreed|",
            r"we decided|i decided|we have decided|agreed to)\b.+)$"
        ),
    },
    Rule {
        act: Act::Decision,
        lang: Lang::En,
        keys: &["decided"],
        pattern: r"(?i)\b(?P<rest>(?:we|i) (?:have )?decided\b.+)$",
    },
    Rule {
        act: Act::Decision,
        lang: Lang::Ru,
        keys: &["решение", "решено"],
        pattern: r"(?i)^(?:решение|решено)\s*[:—–-]\s*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Decision,
        lang: Lang::Ru,
        keys: &["решили", "договорились", "выбираем", "берём", "берем", "используем", "остановились на"],
        pattern: r"(?i)^(?P<rest>(?:решили|договорились|выбираем|берём|берем|используем|остановились на)\b.+)$",
    },
    // Questions: answers first.
    Rule {
        act: Act::Answer,
        lang: Lang::En,
        keys: &["answer", "resolved", "re"],
        pattern: r"(?i)^(?:answer|answered|resolved|re)\s*[:—–-]\s*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Answer,
        lang: Lang::Ru,
        keys: &["ответ", "отвечаю"],
        pattern: r"(?i)^(?:ответ|отвечаю)\s*[:—–-]\s*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Question,
        lang: Lang::En,
        keys: &["question", "unresolved", "unclear", "tbd"],
        pattern: r"(?i)^(?:open question|question|unresolved|unclear|tbd)\s*[:—–-]\s*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Question,
        lang: Lang::Ru,
        keys: &["вопрос", "неясно", "непонятно"],
        pattern: r"(?i)^(?:открытый вопрос|вопрос|неясно|непонятно)\s*[:—–-]\s*(?P<rest>.+)$",
    },
    Rule { act: Act::Question, lang: Lang::Any, keys: &["?"], pattern: r"^(?P<rest>.+\?)\s*$" },
    // Facts.
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &[" is ", " are ", " will be ", " changed to ", " moved to "],
        pattern: concat!(
            r"(?i)\b(?:the|my|our) ",
            subject!(),
            r" (?:is|are|will be|was changed to|has changed to|has moved to|moved to)",
            r" (?:now |still |currently |actually |set to )?",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &[" to "],
        pattern: concat!(
            r"(?i)\b(?:set|change|changed|switch|switched|move|moved|update|updated) (?:the|our|my) ",
            subject!(),
            r" to ",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["—", "–", "это", "="],
        pattern: concat!(
            r"(?i)^(?:(?:мой|моя|моё|мое|мои|наш|наша|наше|наши)\s+)?",
            subject!(),
            r"\s+(?:теперь\s+)?(?:—\s*это|—|–|это|=)\s+(?:теперь\s+)?",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["теперь", "стал", "будет"],
        pattern: concat!(
            r"(?i)^(?:(?:мой|моя|моё|мое|мои|наш|наша|наше|наши)\s+)?",
            subject!(),
            r"\s+(?:теперь|стал|стала|стало|стали|будет)\s+",
            value!()
        ),
    },
];

/// The compiled table: one regex per rule.
pub(crate) struct Compiled {
    regexes: Vec<Regex>,
}

// Invariant: `regexes[i]` is `RULES[i].pattern`.
pub(crate) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    // The patterns are constants checked by the rule-table test; a bad one is a programming error caught by the
    // test suite, and `compact` turns the panic into a fail-closed result.
    let regexes = RULES.iter().map(|r| Regex::new(r.pattern).expect("the rule table compiles")).collect();
    Compiled { regexes }
});

/// Which rules match one clause.
pub(crate) struct Matches<'c> {
    clause: &'c str,
    /// Indexes of the matching rules, in table order.
    hits: Vec<usize>,
}

impl Compiled {
    /// Finds the rules that match `clause`: the prefilter on the lowercased clause, then each candidate's regex.
    pub(crate) fn scan<'c>(&self, clause: &'c str) -> Matches<'c> {
        let lower = clause.to_lowercase();
        let hits = RULES
            .iter()
            .enumerate()
            .filter(|(idx, rule)| rule.keys.iter().any(|k| lower.contains(k)) && self.regexes[*idx].is_match(clause))
            .map(|(idx, _)| idx)
            .collect();
        Matches { clause, hits }
    }
}

impl<'c> Matches<'c> {
    /// The first rule of `act`, in table order, that matches, with its captures.
    pub(crate) fn first(&self, act: Act) -> Option<Captures<'c>> {
        self.hits.iter().filter(|&&i| RULES[i].act == act).find_map(|&i| COMPILED.regexes[i].captures(self.clause))
    }

    /// The first of `acts` (in the order given) that matches.
    pub(crate) fn first_of(&self, acts: &[Act]) -> Option<(Act, Captures<'c>)> {
        acts.iter().find_map(|&act| self.first(act).map(|c| (act, c)))
    }

    /// The indexes of the matching rules of `act`, in table order.
    pub(crate) fn rules_of(&self, act: Act) -> impl Iterator<Item = usize> + '_ {
        self.hits.iter().copied().filter(move |&i| RULES[i].act == act)
    }
}

/// The compiled regex of rule `idx`.
pub(crate) fn regex(idx: usize) -> &'static Regex {
    &COMPILED.regexes[idx]
}
