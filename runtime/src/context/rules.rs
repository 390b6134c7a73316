//! The one table of extraction rules: every marker the context ledger recognizes, English and Russian, in one place.
//!
//! A clause of a cold message is read in this order (see `extract.rs`):
//! 1. a leading [`Act::Correction`] marker is stripped and remembered;
//! 2. the obligation rules, in table order, first match wins (so "no need to" cancels before "need to" opens);
//! 3. when no obligation rule matched, the decision rules, first match wins; failing those, a decision by
//!    structure: a clause that names an option (a proper name, an identifier) and is not hedged ([`Act::Hedge`])
//!    nor a question, and either has a verb of choice ([`Act::Choice`]) or is about the subject of an earlier
//!    decision (`extract.rs` keys decisions on their subject, so any later decision on it supersedes them);
//! 4. when neither matched, a commitment by structure ([`Act::Commitment`]: `I'll …`, `please …`, `make sure …`);
//! 5. the question rules (answers first), an embedded question after a word of not knowing among them;
//! 6. when the clause is neither an obligation nor a question, every fact rule, left to right, then the
//!    key/value shape ([`Act::KeyValue`]); when none matched, the same after a short preamble ([`Act::Preamble`],
//!    `Small fix: …`, `Извини, …`). A message that names a subject the ledger knows and one new value-like token
//!    restates that subject's value whatever its wording (`extract.rs`).
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
    /// A leading marker taking back what was just said (`scratch that`, `no wait`, `make that`, `отбой`, `хотя нет`):
    /// the value that follows replaces the fact stated last, named or not.
    Retraction,
    /// A leading acknowledgement (`noted`, `got it`, `ok`, `принял`, `понял`): what follows restates what was said,
    /// it is read for the fact it names and never keyed on the acknowledgement.
    Acknowledgement,
    /// A verb of forgetting or ignoring (`forget`, `ignore`, `disregard`, `забудь`, `не учитывай`); with
    /// [`Act::Earlier`] in the same clause, an instruction about the notes themselves, which is no obligation.
    Forget,
    /// A word for what was said before (`earlier`, `old`, `previous`, `прежний`, `старый`).
    Earlier,
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
    /// A clause that is a key and a short value and nothing else (`Deploy target: beta-02`, `X = Y`).
    KeyValue,
    /// A commitment by structure, weaker than [`Act::Obligation`]: it yields to a decision (`I'll …`, `please …`,
    /// `make sure …`, `next step: …`, `кому-то придётся …`).
    Commitment,
    /// A verb of choice that, with an option named, makes a clause a decision (`use`, `go with`, `берём`).
    Choice,
    /// A hedge: the clause proposes or wonders, it decides nothing (`maybe`, `what about`, `может`, `ли`).
    Hedge,
    /// A short preamble before the statement proper (`Small fix: …`, `Виноват, …`): `pre` and `rest`.
    Preamble,
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

/// A value named before its subject: one or two tokens.
macro_rules! short_value {
    () => {
        r"(?P<value>[^\s,;!?()]+(?: [^\s,;!?()]+)??)"
    };
}

/// A subject that ends the clause.
macro_rules! subject_end {
    () => {
        r"(?P<subject>[\p{L}\d][\p{L}\d _-]{0,40}?)\s*(?:[.,;!]|$)"
    };
}

/// An optional Russian lead-in of time before a statement (`сейчас`, `с сегодняшнего дня`).
macro_rules! ru_when {
    () => {
        r"(?:(?:сейчас|теперь|отныне|с сегодняшнего дня|с завтрашнего дня|на данный момент)\s*,?\s+)?"
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
    // Retractions and acknowledgements: leading markers, stripped like a correction's.
    Rule {
        act: Act::Retraction,
        lang: Lang::En,
        keys: &[
            "scratch",
            "strike that",
            "belay that",
            "forget what",
            "forget that",
            "no wait",
            "hold on",
            "delete that",
            "make that",
            "rephrase",
            "no,",
            "no no",
        ],
        pattern: concat!(
            r"(?i)^(?:hmm+,?\s+)?(?:(?:scratch that|scratch|strike that|belay that|forget what i (?:said|wrote)|",
            r"forget that|no,? wait|hold on|delete that|make that|let me rephrase|no,? no)\b|no,)",
            sep!(),
            r"(?P<rest>.*)$"
        ),
    },
    Rule {
        act: Act::Retraction,
        lang: Lang::Ru,
        keys: &[
            "отбой",
            "стоп",
            "нет",
            "вычеркни",
            "поменяй",
            "отмена",
            "отставить",
            "перепиши",
            "погоди",
            "забудь",
            "неправильно",
        ],
        pattern: concat!(
            r"(?i)^(?:отбой|стоп|хотя нет|нет-нет|нет,? нет|нет|вычеркни|поменяй на|поменяй|отмена|отставить|перепиши|",
            r"погоди|забудь,? что я (?:сказал|сказала|написал|написала)|неправильно (?:сказал|сказала|написал|написала))",
            r"(?:[\s:,!—–-]+|$)(?P<rest>.*)$"
        ),
    },
    Rule {
        act: Act::Retraction,
        lang: Lang::En,
        keys: &["not "],
        pattern: r"(?i)^not\s+[^\s,]+,\s*(?:but\s+)?(?P<rest>.+)$",
    },
    Rule {
        act: Act::Retraction, lang: Lang::Ru, keys: &["не "], pattern: r"(?i)^не\s+[^\s,]+,?\s+а\s+(?P<rest>.+)$"
    },
    Rule {
        act: Act::Acknowledgement,
        lang: Lang::En,
        keys: &[
            "noted",
            "got it",
            "updated",
            "ok",
            "understood",
            "roger",
            "copy",
            "acknowledged",
            "sure",
            "thank",
            "confirmed",
            "right",
            "great",
            "perfect",
            "cool",
        ],
        pattern: concat!(
            r"(?i)^(?:noted|got it|updated|ok|okay|understood|roger(?: that)?|copy that|copy|acknowledged|sure|",
            r"thanks|thank you|confirmed|all right|alright|right|great|perfect|cool)",
            r"(?:\s*[:,.!—–-][\s:,.!—–-]*|\s*$)(?P<rest>.*)$"
        ),
    },
    Rule {
        act: Act::Acknowledgement,
        lang: Lang::Ru,
        keys: &[
            "принял",
            "принят",
            "записал",
            "понял",
            "понятно",
            "ок",
            "зафиксировал",
            "обновил",
            "учёл",
            "учел",
            "учла",
            "отметил",
            "хорошо",
            "спасибо",
            "так и запишем",
            "ясно",
        ],
        pattern: concat!(
            r"(?i)^(?:принял|приняла|принято|записал|записала|понял|поняла|понятно|окей|ок|зафиксировал|зафиксировала|",
            r"обновил|обновила|учёл|учел|учла|отметил|отметила|хорошо|спасибо|так и запишем|ясно)",
            r"(?:\s*[:,.!—–-][\s:,.!—–-]*|\s*$)(?P<rest>.*)$"
        ),
    },
    // Instructions about the notes: a verb of forgetting with a word for what was said before.
    Rule {
        act: Act::Forget,
        lang: Lang::En,
        keys: &["forget", "ignore", "disregard", "drop", "scrap", "throw away", "never", "bother"],
        pattern: r"(?i)\b(?:forget|ignore|disregard|drop|scrap|throw away|never ?mind|(?:don't|do not) bother with)\b",
    },
    Rule {
        act: Act::Forget,
        lang: Lang::Ru,
        keys: &["забуд", "забыть", "игнорир", "не обращай", "выкинь", "не учитывай", "сотри", "не держи", "не помнить"],
        pattern: concat!(
            r"(?i)(?:забудь|забудьте|забыть|игнорируй|игнорировать|не обращай(?:те)? внимания|выкинь из головы|",
            r"не учитывай|сотри|не держи в голове|не помнить)"
        ),
    },
    Rule {
        act: Act::Earlier,
        lang: Lang::En,
        keys: &["earlier", "old", "previous", "prior", "before", "former", "the rest", "past", "outdated"],
        pattern: r"(?i)\b(?:earlier|old|older|previous|prior|before|former|the rest|past|outdated)\b",
    },
    Rule {
        act: Act::Earlier,
        lang: Lang::Ru,
        keys: &["стар", "прежн", "предыдущ", "прошл", "раньше", "ранее", "остальное", "устаревш"],
        pattern: concat!(
            r"(?i)(?:стар(?:ый|ая|ое|ые|ого|ую)|прежн\p{L}*|предыдущ\p{L}*|прошл(?:ый|ая|ое|ые|ого|ую)|раньше|ранее|",
            r"остальное|устаревш\p{L}*)"
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
        act: Act::ObligationDone,
        lang: Lang::En,
        keys: &[
            "finished",
            "wrapped",
            "handled",
            "dealt",
            "checked off",
            "closed",
            "took care",
            "taken care",
            "all set",
            "pending",
        ],
        pattern: concat!(
            r"(?i)^(?:(?:i|we)\s+)?(?:have |'ve )?(?:already |just )?(?:finished with|wrapped up|handled|dealt with|",
            r"checked off|closed out|took care of|taken care of|all set with|no longer pending)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::En,
        keys: &["taken care", "sorted", "done", "finished", "completed", "handled", "closed", "all set"],
        pattern: concat!(
            r"(?i)^(?P<rest>.+?)\s*(?:\bis|\bare|'s|,|:|—|–)\s+(?:now\s+|already\s+)?(?:taken care of|sorted|done|",
            r"finished|completed|handled|closed|all set)\b"
        ),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::Ru,
        keys: &[
            "готово",
            "сделано",
            "выполнено",
            "закрыт",
            "закрыл",
            "сделали",
            "выполнили",
            "больше не висит",
            "в порядке",
        ],
        pattern: concat!(
            r"(?i)^(?:всё,?\s+)?(?P<rest>.+?)\s*[:,—–-]?\s+(?:уже\s+)?(?:готово|сделано|выполнено|закрыто|закрыт|",
            r"закрыта|закрыли|сделали|выполнили|больше не висит|в порядке)\b"
        ),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::Ru,
        keys: &["разобрались", "управились", "отметил", "вычеркнул"],
        pattern: concat!(
            r"(?i)^(?:разобрались|управились|отметил как выполненное|отметила как выполненное|вычеркнул|вычеркнула|",
            r"вычеркнули)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    // Work delivered or called off, in the words of shipping it (`X shipped`, `выкатили X`, `X is dropped`).
    Rule {
        act: Act::ObligationDone,
        lang: Lang::En,
        keys: &["shipped", "merged", "deployed", "released", "rolled out", "landed", "delivered", "launched"],
        pattern: concat!(
            r"(?i)^(?:(?:i|we)\s+)?(?:have |'ve )?(?:just |already |finally )?(?:shipped|merged|deployed|released|",
            r"rolled out|landed|delivered|launched)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::En,
        keys: &[
            "shipped",
            "landed",
            "merged",
            "deployed",
            "released",
            "live",
            "prod",
            "out the door",
            "rolled out",
            "delivered",
            "launched",
            "went out",
            "made it",
        ],
        pattern: concat!(
            r"(?i)^(?P<rest>.+?)\s+(?:(?:is|are|has been|have been|got|was|were|just)\s+)?(?:now\s+|already\s+|finally\s+)?",
            r"(?:shipped|landed|merged|deployed|released|live|in prod|in production|out the door|rolled out|delivered|",
            r"launched|went out|made it (?:into|to) (?:production|prod|the release))\b"
        ),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::Ru,
        keys: &[
            "выкатил",
            "релизнул",
            "смержил",
            "задеплоил",
            "зарелизил",
            "раскатил",
            "довезли",
            "залили",
            "выпустил",
        ],
        pattern: concat!(
            r"(?i)^(?:вчера\s+|сегодня\s+|уже\s+|наконец\s+)?(?:выкатили|релизнули|смержили|задеплоили|зарелизили|",
            r"раскатили|довезли|залили|выпустили)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationDone,
        lang: Lang::Ru,
        keys: &["выкатил", "в проде", "в продакшен", "в релизе", "зарелизил", "релизнул", "задеплоил", "смержил"],
        pattern: concat!(
            r"(?i)^(?P<rest>.+?)\s*[,—–-]?\s+(?:уже\s+|теперь\s+|наконец\s+)?(?:выкатили|в проде|в продакшене|в релизе|",
            r"зарелизили|релизнули|задеплоили|смержили)\b"
        ),
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::En,
        keys: &["drop", "descoped", "shelved", "scrapped", "cancel", "pulled", "skip", "nobody needs"],
        pattern: concat!(
            r"(?i)^(?:let's\s+|we\s+|i\s+)?(?:have |'ve )?(?:just |already )?(?:dropped|drop|descoped|shelved|",
            r"scrapped|cancell?ed|pulled|skip(?:ped)?|nobody needs)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::En,
        keys: &[
            "dropped",
            "descoped",
            "shelved",
            "scrapped",
            "cancel",
            "off the",
            "needed",
            "won't happen",
            "not happen",
        ],
        pattern: concat!(
            r"(?i)^(?P<rest>.+?)\s+(?:(?:is|are|has been|have been|got|was|were)\s+)?(?:now\s+)?(?:dropped|descoped|",
            r"shelved|scrapped|cancell?ed|off the (?:list|plan|table)|no longer needed|not needed|won't happen|",
            r"will not happen)\b"
        ),
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::Ru,
        keys: &["отмен", "сняли с плана", "из плана", "забили на", "не делать", "не делаем"],
        pattern: concat!(
            r"(?i)^(?:отменяем|отменили|сняли с плана|вычеркнули из плана|выкинули из плана|убрали из плана|забили на|",
            r"решили не делать|не делаем)\b",
            sep!(),
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::ObligationCancelled,
        lang: Lang::Ru,
        keys: &["отмен", "не делаем", "не будем", "не нужно", "отложили", "скоуп", "неактуальн", "сняли с плана"],
        pattern: concat!(
            r"(?i)^(?P<rest>.+?)\s*[,—–-]?\s+(?:уже\s+)?(?:отменили|отмена|не делаем|делать не будем|не будем делать|",
            r"больше не нужно|отложили насовсем|из скоупа убрали|убрали из скоупа|неактуально|сняли с плана)\b"
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
    // Commitments by structure: yield to decisions.
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &["'ll", " will ", "going to", " shall "],
        pattern: r"(?i)^(?:i|we)(?:'ll| will| am going to|'m going to| are going to|'re going to| shall)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &["please", "pls", "kindly"],
        pattern: r"(?i)^(?:please|pls|kindly)\b[\s,]*(?P<rest>.+)$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &[" you "],
        pattern: r"(?i)^(?:can|could|would|will) you\s+(?:please\s+)?(?P<rest>.+?)\??$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &["make sure", "be sure", "ensure", "forget"],
        pattern: concat!(
            r"(?i)\b(?:make sure|be sure|ensure|(?:don't|do not) let (?:me|us|them|him|her) forget)\s+",
            r"(?:to\s+|that\s+)?(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &[" on "],
        pattern: r"(?i)\b(?:it's|it is) on (?:me|us|you|him|her|them|\p{L}+) to\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &["step", "action", "item", "follow", "pending", "outstanding", "to do"],
        pattern: concat!(
            r"(?i)^(?:next steps?|action(?: items?)?(?: for \p{L}+)?|open items?|follow[- ]ups?|still pending|pending|",
            r"outstanding|to do)\s*[:—–-]\s*(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &["should", "ought", "got to", "gotta"],
        pattern: concat!(
            r"(?i)\b(?:we|you|i|someone|somebody|they)(?:'ve| have| has)? (?:should|ought to|got to|gotta)\s+",
            r"(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::En,
        keys: &["on the", "on my", "on our", "on your"],
        pattern: r"(?i)^(?P<rest>.+?)\s+(?:is|are) (?:still )?on (?:the|my|our|your) (?:list|plate|radar|todo list)\b",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::Ru,
        keys: &["придётся", "придется", "следует", "стоит", "требуется", "хорошо бы", "обязательно", "пора"],
        pattern: r"(?i)(?:придётся|придется|следует|стоит|требуется|хорошо бы|обязательно|пора)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::Ru,
        keys: &["не забываем", "не забудьте", "забыть"],
        pattern: r"(?i)(?:не забываем|не забудьте|не дай(?:те)? (?:мне |нам )?забыть)\s+(?P<rest>.+)$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::Ru,
        keys: &["шаг", "пункт", "висит", "в планах", "в работе", "задача", "поручение"],
        pattern: concat!(
            r"(?i)^(?:следующий шаг|следующие шаги|открытый пункт|ещё висит|еще висит|висит|в планах|в работе|",
            r"задача(?: для \p{L}+)?|поручение(?: для \p{L}+)?)\s*[:—–-]\s*(?P<rest>.+)$"
        ),
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::Ru,
        keys: &["можешь", "можете", "сможешь", "сможете", "мог"],
        pattern: r"(?i)^(?:можешь|можете|сможешь|сможете|не мог бы ты|не могли бы вы)\s+(?P<rest>.+?)\??$",
    },
    Rule {
        act: Act::Commitment,
        lang: Lang::Ru,
        keys: &["пожалуйста", "беру", "берусь", "возьму", "за мной"],
        pattern: r"(?i)^(?:пожалуйста,?|.*?\b(?:беру на себя|берусь|возьму на себя|за мной)\s*[:—–-]?)\s+(?P<rest>.+)$",
    },
    // Verbs of choice and hedges: read by the decision-by-structure step.
    Rule {
        act: Act::Choice,
        lang: Lang::En,
        keys: &[
            "use",
            "using",
            "with",
            "switch",
            "mov",
            "settle",
            "pick",
            "choose",
            "chose",
            "adopt",
            "opt ",
            "it is",
            "run",
            "standardi",
            "migrat",
            "keep",
            "plan",
            "call on",
            "back",
            "revert",
            "return",
            "restor",
            "stay",
        ],
        pattern: concat!(
            r"(?i)\b(?:use|uses|using|go with|goes with|going with|switch(?:ing|ed)?|move|moving|moved|",
            r"stick(?:ing)? with|settle(?:d)? on|pick(?:ed)?|choose|chose|chosen|adopt(?:ing|ed)?|opt(?:ing|ed)? for|",
            r"it is|runs on|run on|standardi[sz]e on|migrat(?:e|ing|ed)|stay(?:ing)? with|keep|plan|call on|",
            r"go(?:ing)? back to|back to|back on|revert(?:ing|ed)?|return(?:ing|ed)? to|roll(?:ing|ed)? back|",
            r"switch(?:ing|ed)? back|restor(?:e|ing|ed)|stays? on)\b"
        ),
    },
    Rule {
        act: Act::Choice,
        lang: Lang::Ru,
        keys: &[
            "использ",
            "берём",
            "берем",
            "возьм",
            "будет",
            "переход",
            "перейд",
            "остановились",
            "выбра",
            "ставим",
            "оставля",
            "оставить",
            "план",
            "итог",
            "переезжаем",
            "внедряем",
            "верн",
            "возвращ",
            "откат",
            "обратно",
            "снова",
            "опять",
            "назад к",
            "оста",
        ],
        pattern: concat!(
            r"(?i)\b(?:используем|использовать|используется|берём|берем|возьмём|возьмем|будет|переходим|перейдём|",
            r"перейдем|остановились|выбрали|выбираем|ставим|оставляем|оставить|план|итог|переезжаем|внедряем|",
            r"вернёмся|вернемся|возвращаемся|возвращаем|вернули|откатываемся|откатываем|обратно|снова|опять|назад к|",
            r"остаётся|остается)\b"
        ),
    },
    Rule {
        act: Act::Hedge,
        lang: Lang::En,
        keys: &[
            "maybe",
            "perhaps",
            "might",
            "could",
            "would",
            "what about",
            "how about",
            "should we",
            "shall we",
            "wonder",
            "whether",
            "worth",
            "consider",
            "if",
            "propos",
            "suggest",
            "possibly",
            "not sure",
        ],
        pattern: concat!(
            r"(?i)\b(?:maybe|perhaps|might|could|would|what about|how about|should we|shall we|wonder|whether|worth|",
            r"consider|considering|if|propose|proposal|suggest|possibly|not sure)\b"
        ),
    },
    Rule {
        act: Act::Hedge,
        lang: Lang::Ru,
        keys: &[
            "может",
            "возможно",
            "что если",
            "стоит ли",
            "интересно",
            "подойд",
            "обсудить",
            "предлагаю",
            "пробовал",
            "ли",
            "если",
            "вдруг",
        ],
        pattern: concat!(
            r"(?i)\b(?:может|возможно|а что если|стоит ли|интересно|подойд\p{L}*|обсудить|предлагаю|пробовал\p{L}*|ли|",
            r"если|вдруг)\b"
        ),
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
    Rule {
        act: Act::Question,
        lang: Lang::En,
        keys: &[
            "sure",
            "know",
            "idea",
            "clue",
            "unclear",
            "wonder",
            "find out",
            "figure",
            "curious",
            "decided",
            "tbd",
            "open point",
            "open issue",
            "question",
            "hear",
            "tell me",
            "clear",
        ],
        pattern: concat!(
            r"(?i)\b(?:not sure|unsure|(?:don't|do not|doesn't|does not|didn't) know|no idea|no clue|unclear|",
            r"wonder(?:ing)?|find out|figure(?:d)? out|need to know|curious|any idea|anyone know|who knows|",
            r"to be decided|tbd|open point|open issue|quick question|waiting to hear|tell me|not clear)\b[^.!]*?",
            r"\b(?P<rest>(?:who|what|when|where|which|why|how|whether|if)\b.+)$"
        ),
    },
    Rule {
        act: Act::Question,
        lang: Lang::Ru,
        keys: &[
            "интересно",
            "ясно",
            "понятно",
            "знаю",
            "знаем",
            "выяснили",
            "понятия",
            "уточнить",
            "знает",
            "идеи",
            "вопрос",
            "момент",
            "ответа",
            "подскажите",
            "неизвестно",
            "выяснить",
        ],
        pattern: concat!(
            r"(?i)(?:интересно|не ясно|неясно|непонятно|не понятно|не знаю|не знаем|не выяснили|понятия не имею|",
            r"уточнить|знает|есть идеи|вопрос|открытый момент|жду ответа|подскажите|неизвестно|выяснить)",
            r"[^.!]*?[,:—–-]\s*(?P<rest>(?:кто|что|когда|где|куда|откуда|какой|какая|какое|какие|каким|сколько|",
            r"почему|зачем|как|чей|чья)\b.+|\p{L}+\s+ли\b.+)$"
        ),
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
        keys: &[" to ", " at "],
        pattern: concat!(
            r"(?i)\b(?:set|change|changed|switch|switched|move|moved|update|updated|point|pointed|repoint|repointed) ",
            r"(?:the|our|my) ",
            subject!(),
            r" (?:over )?(?:to|at) ",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["—", "–", "это", "="],
        pattern: concat!(
            r"(?i)^",
            ru_when!(),
            r"(?:(?:мой|моя|моё|мое|мои|наш|наша|наше|наши)\s+)?",
            subject!(),
            r"\s+(?:теперь\s+)?(?:—\s*это|—|–|это|=)\s+(?:теперь\s+)?",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["теперь", "стал", "будет", "сейчас"],
        pattern: concat!(
            r"(?i)^",
            ru_when!(),
            r"(?:(?:мой|моя|моё|мое|мои|наш|наша|наше|наши)\s+)?",
            subject!(),
            r"\s+(?:у нас\s+)?(?:теперь|стал|стала|стало|стали|будет|сейчас)\s+",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &[" to ", " at "],
        pattern: concat!(
            r"(?i)\b(?:the|our|my) ",
            subject!(),
            r" (?:has been|have been|was|were|got|is being|is now|has|had) (?:changed|moved|switched|set|updated|",
            r"repointed|pointed|bumped|raised|lowered|renamed) (?:over )?(?:to|at) ",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &[" as "],
        pattern: concat!(r"(?i)\buse ", short_value!(), r" as (?:the|our|my|a) ", subject_end!()),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &[" on "],
        pattern: concat!(
            r"(?i)\b(?:we're|we are)(?: now)? on ",
            short_value!(),
            r" for (?:the|our|my) ",
            subject_end!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &["for the", "for our", "for my"],
        pattern: concat!(
            r"(?i)\bfor (?:the|our|my) ",
            subject!(),
            r",? (?:we|i|they) (?:now |currently )?(?:have|use|got|run) ",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::En,
        keys: &[" new "],
        pattern: concat!(r"(?i)^", short_value!(), r" is (?:the|our|my) new ", subject_end!()),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["поменя", "смени", "перенес", "перевел", "переключ", "измени", "переех", "переш"],
        pattern: concat!(
            r"(?i)^",
            ru_when!(),
            r"(?:(?:мой|моя|моё|мое|мои|наш|наша|наше|наши)\s+)?",
            subject!(),
            r"\s+(?:поменяли|сменили|перенесли|перевели|переключили|изменили|сменился|сменилась|сменилось|",
            r"поменялся|поменялась|переехал|переехала|перешёл|перешел)\s+на\s+",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["переключ", "перевел", "перенес", "поменя", "выстав", "постав", "смени", "измени"],
        pattern: concat!(
            r"(?i)^(?:мы\s+)?(?:переключили|перевели|перенесли|поменяли|выставили|поставили|сменили|изменили)\s+",
            subject!(),
            r"\s+(?:на|в)\s+",
            value!()
        ),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["используем"],
        pattern: concat!(r"(?i)\bиспользуем\s+", short_value!(), r"\s+(?:как|в качестве)\s+", subject_end!()),
    },
    Rule {
        act: Act::Fact,
        lang: Lang::Ru,
        keys: &["у нас"],
        pattern: concat!(r"(?i)^", ru_when!(), subject!(), r"\s+у нас\s+(?:теперь\s+|сейчас\s+)?(?:—\s*)?", value!()),
    },
    // The key/value shape and the preamble: language-neutral.
    Rule {
        act: Act::KeyValue,
        lang: Lang::Any,
        keys: &[":", "="],
        pattern: r"^(?P<subject>\p{L}[\p{L}\d _-]{0,30}?)\s*(?::|=)\s+(?P<value>[^\s,;!?()][^,;!?()]{0,40}?)[.!]?$",
    },
    Rule {
        act: Act::Preamble,
        lang: Lang::Any,
        keys: &[":", ","],
        pattern: r"^(?P<pre>[^:,;—]{1,40}?)\s*[:,]\s+(?P<rest>.+)$",
    },
];

/// Words in a preamble that make what follows a correction (`Small fix:`, `Виноват,`).
pub(crate) const CORRECTION_HINTS: &[&str] = &[
    "typo",
    "fix",
    "mistake",
    "wrong",
    "correct",
    "oops",
    "my bad",
    "erratum",
    "precise",
    "meant",
    "scratch",
    "ignore",
    "опечат",
    "ошиб",
    "неверн",
    "неправильн",
    "извин",
    "виноват",
    "перепут",
    "поправ",
    "исправ",
    "сорри",
    "точнее",
    "уточн",
];

/// The words of a promise with no task in it (`I'll keep that in mind`, `буду иметь в виду`): an obligation whose
/// words are all among these commits to nothing a ledger could track.
pub(crate) const TASKLESS_WORDS: &[&str] = &[
    "keep",
    "bear",
    "mind",
    "remember",
    "note",
    "notes",
    "noted",
    "take",
    "taken",
    "account",
    "handy",
    "going",
    "forward",
    "eye",
    "consideration",
    "make",
    "try",
    "sure",
    "will",
    "do",
    "look",
    "учту",
    "учесть",
    "учтём",
    "учтем",
    "запомню",
    "запомнить",
    "помнить",
    "буду",
    "иметь",
    "виду",
    "приму",
    "принять",
    "сведению",
    "внимание",
    "внимания",
    "возьму",
    "заметку",
    "постараюсь",
    "забыть",
    "обязательно",
    "хорошо",
];

/// Parts of a fact's subject that make its value a secret (`pw for the db`, `вот ключ`): such a value is stored
/// only as a credential ref.
pub(crate) const SECRET_KEYS: &[&str] =
    &["key", "pass", "pw", "pwd", "token", "secret", "cred", "pin", "ключ", "пароль", "пасс", "токен", "секрет"];

/// Words of deciding, never part of what a decision is about (its subject is what is left once these and the
/// options are removed).
pub(crate) const DECISION_WORDS: &[&str] = &[
    "decided",
    "decide",
    "decision",
    "use",
    "uses",
    "using",
    "used",
    "go",
    "goes",
    "going",
    "switch",
    "switching",
    "switched",
    "move",
    "moving",
    "moved",
    "stick",
    "sticking",
    "settle",
    "settled",
    "pick",
    "picked",
    "choose",
    "chose",
    "chosen",
    "adopt",
    "opt",
    "plan",
    "new",
    "final",
    "call",
    "agreed",
    "agree",
    "review",
    "forward",
    "thought",
    "second",
    "run",
    "runs",
    "keep",
    "stay",
    "it's",
    "we're",
    "we'll",
    "instead",
    "changed",
    "change",
    "today",
    "onwards",
    "ok",
    "okay",
    "back",
    "revert",
    "reverted",
    "return",
    "returning",
    "restore",
    "roll",
    "again",
    "stays",
    "undo",
    "от",
    "решили",
    "решение",
    "решено",
    "использовать",
    "используем",
    "берём",
    "берем",
    "возьмём",
    "возьмем",
    "будет",
    "итог",
    "переходим",
    "всё-таки",
    "все-таки",
    "давай",
    "остановились",
    "после",
    "обсуждения",
    "выбрали",
    "выбираем",
    "новый",
    "план",
    "оставляем",
    "согласовано",
    "ставим",
    "пусть",
    "окей",
    "для",
    "вместо",
    "передумали",
    "вернёмся",
    "вернемся",
    "возвращаемся",
    "возвращаем",
    "вернули",
    "откатываемся",
    "обратно",
    "снова",
    "опять",
    "назад",
    "остаётся",
    "остается",
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
