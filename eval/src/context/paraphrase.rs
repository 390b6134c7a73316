//! The paraphrase evaluation (`lessrt eval context --suite paraphrase`): conversations whose key turns come from a
//! grammar written apart from the rule table, so that the ledger is measured on wording its markers were not made
//! from.
//!
//! The grammar has one family per miss kind (and two for obligations: opened, and opened then closed), each with at
//! least fourteen phrasings in English and fourteen in Russian. A second set of families, written later (and
//! committed, with the numbers of the rules as they then were, before the rules were changed for it), holds everyday
//! wording: an acknowledgement restating a fact, an instruction to forget earlier values, a promise with no task in
//! it, a value taken back (`scratch that, use X`), a decision changed back (`let's go back to X`), work reported
//! shipped, work dropped, a question answered by a later message, a value changed twice in a row. Their
//! conversations mix everyday chatter into the filler (`Builder::everyday`).
//!
//! A phrasing is a template with slots: `{s}` a fact's subject, `{v}`/`{old}`/`{mid}` its values, `{t}` what a
//! decision is about, `{o}` the option chosen, `{a}` a task to do, `{n}` the same task named as a thing, `{q}` an
//! open question, `{r}` its answer, `{x}` a secret, `{ip}` an address; a capitalized slot (`{S}`, `{A}`, `{N}`,
//! `{R}`) is the value with its first letter capitalized. Every scenario puts one phrasing under test in a
//! conversation of filler turns, with the other turns it needs (the value a correction corrects, the decisions a
//! reversal reverses) drawn from the same split, and checks what a reader of the compacted output sees.
//!
//! **The split.** In every family and language, the four phrasings whose blake3 hash of `family/lang/index` is
//! smallest are held out; the others are the development split. Rules may be tuned against the development split
//! only; the held-out split measures whether they generalize to wording nobody tuned on. The grammar and the
//! numbers of the rules as they were before any change for it were committed first (see the history of this file).

use std::collections::BTreeSet;

use super::suite::Builder;
use super::{EvalCase, MissKind, Probe};
use crate::rng::Rng;

/// Which part of the generated set a scenario belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Split {
    /// Phrasings the rules may be tuned on.
    Dev,
    /// Phrasings kept out of tuning.
    HeldOut,
}

impl Split {
    /// Both splits, development first.
    pub const ALL: [Split; 2] = [Split::Dev, Split::HeldOut];

    /// A stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::HeldOut => "held_out",
        }
    }
}

/// Phrasings held out per family and language.
pub const N_HELD_OUT: usize = 4;

/// Turns per scenario (the planted ones among filler) and the hot tail.
const LENGTH: usize = 120;
const HOT_TAIL: usize = 4;

/// The languages of the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    En,
    Ru,
}

impl Lang {
    const fn as_str(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ru => "ru",
        }
    }
}

/// A family: the phrasings of one kind of turn, per language.
struct Family {
    name: &'static str,
    en: &'static [&'static str],
    ru: &'static [&'static str],
}

impl Family {
    fn phrasings(&self, lang: Lang) -> &'static [&'static str] {
        match lang {
            Lang::En => self.en,
            Lang::Ru => self.ru,
        }
    }

    /// The indexes of the phrasings in `split`.
    fn indexes(&self, lang: Lang, split: Split) -> Vec<usize> {
        let n = self.phrasings(lang).len();
        let mut ranked: Vec<(blake3::Hash, usize)> = (0..n)
            .map(|idx| (blake3::hash(format!("{}/{}/{idx}", self.name, lang.as_str()).as_bytes()), idx))
            .collect();
        ranked.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let held: BTreeSet<usize> = ranked.iter().take(N_HELD_OUT).map(|(_, idx)| *idx).collect();
        (0..n).filter(|idx| held.contains(idx) == (split == Split::HeldOut)).collect()
    }
}

/// A fact stated (or restated with a new value).
const FACT: Family = Family {
    name: "fact",
    en: &[
        "The {s} is {v}.",
        "{S}: {v}.",
        "We're on {v} for the {s} now.",
        "{v} is the new {s}.",
        "Our {s} moved to {v}.",
        "Switch the {s} over to {v}.",
        "From now on the {s} will be {v}.",
        "{S} = {v}",
        "Point the {s} at {v}.",
        "The {s} has been changed to {v}.",
        "Use {v} as the {s}.",
        "For the {s} we now have {v}.",
        "The {s} should be {v} from today.",
        "Going forward the {s} is going to be {v}.",
    ],
    ru: &[
        "{S} — {v}.",
        "{S} теперь {v}.",
        "{S}: {v}.",
        "{S} у нас теперь {v}.",
        "{S} поменяли на {v}.",
        "Переключили {s} на {v}.",
        "С сегодняшнего дня {s} — {v}.",
        "{S} = {v}",
        "Используем {v} как {s}.",
        "{S} будет {v}.",
        "{S} сменился на {v}.",
        "{S} перенесли на {v}.",
        "Сейчас {s} — это {v}.",
        "Выставили {s} в {v}.",
    ],
};

/// A value corrected: the earlier one was a mistake.
const CORRECTION: Family = Family {
    name: "correction",
    en: &[
        "Sorry, typo: the {s} is {v}.",
        "Let me correct that: the {s} is {v}.",
        "I gave you the wrong {s}, it is {v}.",
        "Scratch what I said about the {s}, it's {v}.",
        "Small fix: {s} is {v}.",
        "That was a mistake, the right {s} is {v}.",
        "Oops, I meant {v} for the {s}.",
        "Correcting myself: {S} = {v}.",
        "No, the {s} isn't {old}, it's {v}.",
        "My bad, the {s} is actually {v}.",
        "Wrong {s} earlier, use {v}.",
        "To be precise, the {s} is {v}, not {old}.",
        "Ignore the {s} I gave before; it is {v}.",
        "Erratum: {s} should read {v}.",
    ],
    ru: &[
        "Опечатка: {s} — {v}.",
        "Я неправильно написал, {s} — {v}.",
        "Ошибочка вышла: {s} — {v}.",
        "Поправлюсь: {s} — {v}.",
        "{S} не {old}, а {v}.",
        "Извини, {s} на самом деле {v}.",
        "Неверно указал {s}, правильно — {v}.",
        "Правильный {s} — {v}.",
        "Виноват, {s}: {v}.",
        "Исправляю: {s} = {v}.",
        "Прошлое значение неверное, {s} — {v}.",
        "Сорри, перепутал: {s} — {v}.",
        "Уточняю: {s} — {v}.",
        "Точнее, {s} — {v}.",
    ],
};

/// A decision made (or made again, for another option).
const DECISION: Family = Family {
    name: "decision",
    en: &[
        "We decided to use {o} for {t}.",
        "Let's go with {o} for {t}.",
        "OK, {o} it is for {t}.",
        "Final call on {t}: {o}.",
        "We're switching {t} to {o}.",
        "On second thought, {t} should use {o}.",
        "The plan for {t} is {o} now.",
        "For {t} we settled on {o}.",
        "After the review, {t} goes with {o}.",
        "Going forward, {t} runs on {o}.",
        "New plan: {o} for {t}.",
        "We'll stick with {o} for {t}.",
        "Agreed, {t} will use {o}.",
        "Let's move {t} over to {o}.",
    ],
    ru: &[
        "Решили использовать {o} для {t}.",
        "Для {t} берём {o}.",
        "Окей, для {t} будет {o}.",
        "Итог: для {t} — {o}.",
        "Переходим на {o} для {t}.",
        "Всё-таки для {t} используем {o}.",
        "Давай для {t} возьмём {o}.",
        "Для {t} остановились на {o}.",
        "После обсуждения для {t} выбрали {o}.",
        "Для {t} теперь {o}.",
        "Новый план: {o} для {t}.",
        "Оставляем {o} для {t}.",
        "Согласовано: для {t} ставим {o}.",
        "Пусть для {t} будет {o}.",
    ],
};

/// An option named without deciding it: a proposal or a question (a decision check's distractor).
const PROPOSAL: Family = Family {
    name: "proposal",
    en: &[
        "Should we try {o} for {t}?",
        "What about {o} for {t} some day?",
        "Maybe {o} for {t} would be worth a look.",
        "We need to decide whether {o} fits {t}.",
        "Has anyone used {o} for {t}?",
        "I wonder if {o} would suit {t}.",
    ],
    ru: &[
        "Может, попробовать {o} для {t}?",
        "А что если {o} для {t}?",
        "Надо бы обсудить {o} для {t}.",
        "Кто-нибудь пробовал {o} для {t}?",
        "Интересно, подойдёт ли {o} для {t}.",
        "Стоит ли смотреть на {o} для {t}?",
    ],
};

/// An obligation taken on.
const OBLIGATION: Family = Family {
    name: "obligation",
    en: &[
        "Someone has to {a} before Friday.",
        "I'll {a} tomorrow.",
        "Don't let me forget to {a}.",
        "Still pending: {a}.",
        "We should {a} this week.",
        "It's on me to {a}.",
        "Next step: {a}.",
        "Can you {a} later today?",
        "Please {a} when you get a chance.",
        "Action for Dana: {a}.",
        "{A} is still on the list.",
        "Before the release we've got to {a}.",
        "Make sure to {a}.",
        "Open item: {a}.",
    ],
    ru: &[
        "Кому-то придётся {a} до пятницы.",
        "Завтра беру на себя: {a}.",
        "Не дай мне забыть {a}.",
        "Ещё висит: {a}.",
        "Стоит {a} на этой неделе.",
        "Следующий шаг — {a}.",
        "Можешь {a} сегодня?",
        "Пожалуйста, {a}, когда будет время.",
        "Задача для Даны — {a}.",
        "Перед релизом обязательно {a}.",
        "Хорошо бы {a}.",
        "Не забываем {a}.",
        "Открытый пункт — {a}.",
        "Требуется {a} до конца спринта.",
    ],
};

/// An obligation closed (the task named as a thing).
const CLOSURE: Family = Family {
    name: "closure",
    en: &[
        "{N} is taken care of.",
        "Finished with {n}.",
        "{N}: done.",
        "Wrapped up {n} this morning.",
        "{N}, completed.",
        "Handled {n}, it's all set.",
        "I already dealt with {n}.",
        "Checked off {n}.",
        "{N} is sorted.",
        "No longer pending: {n}.",
        "All set with {n}.",
        "Took care of {n} yesterday.",
        "{N} is finished now.",
        "Closed out {n}.",
    ],
    ru: &[
        "{N} — готово.",
        "{N}: сделано.",
        "Пункт «{n}» закрыт.",
        "{N} больше не висит.",
        "Всё, {n} в порядке.",
        "Закрыто: {n}.",
        "Отметил как выполненное: {n}.",
        "Разобрались: {n}.",
        "{N} — сделали вчера.",
        "Вычеркнул {n}, готово.",
        "{N} уже закрыли.",
        "{N} выполнено.",
        "Управились: {n}.",
        "Можно вычеркнуть {n}, сделано.",
    ],
};

/// A question left open.
const QUESTION: Family = Family {
    name: "question",
    en: &[
        "I wonder {q}.",
        "Not sure yet {q}.",
        "Does anyone know {q}",
        "Can someone tell me {q}?",
        "We still don't know {q}.",
        "Open point: {q}.",
        "Somebody should find out {q}.",
        "It's unclear {q}.",
        "Still waiting to hear {q}.",
        "Has anyone figured out {q}?",
        "Any idea {q}?",
        "Quick question: {q}",
        "I have no idea {q}, anyone?",
        "To be decided: {q}.",
    ],
    ru: &[
        "Интересно, {q}.",
        "Пока не ясно, {q}.",
        "Кто-нибудь знает, {q}",
        "Подскажите, {q}?",
        "Мы так и не выяснили, {q}.",
        "Открытый момент: {q}.",
        "Непонятно пока, {q}.",
        "Жду ответа, {q}.",
        "Никто не знает, {q}?",
        "Есть идеи, {q}?",
        "Быстрый вопрос: {q}",
        "Понятия не имею, {q}.",
        "Надо уточнить, {q}.",
        "Вопрос открыт: {q}.",
    ],
};

/// A secret or an address said in passing.
const SECRET: Family = Family {
    name: "secret",
    en: &[
        "The staging password is {x}.",
        "pw for the db: {x}",
        "Here's the key: {x}",
        "Login is admin / {x}",
        "Use {x} to log into the dashboard.",
        "The passphrase: {x}",
        "Creds for the VPN: user ops, pass {x}",
        "Secret for the webhook is {x}.",
        "export DB_PASSWORD={x}",
        "The deploy token for CI is {x}.",
        "The replica sits at {ip}.",
        "ssh into {ip} and restart the worker.",
        "SMTP password {x}",
        "The bucket access key is {x}.",
    ],
    ru: &[
        "Пароль от стейджинга {x}.",
        "пасс от базы: {x}",
        "Вот ключ: {x}",
        "Логин admin, пароль {x}",
        "Используй {x}, чтобы войти в панель.",
        "Кодовая фраза: {x}",
        "Доступ к VPN: пользователь ops, пасс {x}",
        "Секрет вебхука — {x}.",
        "export DB_PASSWORD={x}",
        "Токен деплоя для CI: {x}.",
        "Реплика живёт на {ip}.",
        "Зайди на {ip} по ssh.",
        "SMTP пароль {x}",
        "Ключ доступа к бакету {x}.",
    ],
};

/// An acknowledgement or restatement of a fact just stated (`{s}`, `{v}`): part of that fact, never one of its own.
const ACK: Family = Family {
    name: "ack",
    en: &[
        "Noted: {s} {v}.",
        "Noted, {v} for the {s}.",
        "Got it, {s} is {v}.",
        "Updated: {s} {v}.",
        "Ok, {s} {v}.",
        "Ok, {v}.",
        "Noted — the {s} is now {v}.",
        "Got it: {v} as the {s}.",
        "Understood, the {s} is {v}.",
        "Roger, {s} = {v}.",
        "Copy that, {v} for the {s}.",
        "Thanks, updated the {s} to {v}.",
        "Acknowledged: {s} → {v}.",
        "Sure, {s} set to {v}.",
    ],
    ru: &[
        "Принял: {s} {v}.",
        "Записал: {s} — {v}.",
        "Понял, {s} — {v}.",
        "Ок, {s} {v}.",
        "Ок, {v}.",
        "Зафиксировал: {s} теперь {v}.",
        "Обновил: {s} — {v}.",
        "Принято, {s} = {v}.",
        "Хорошо, {s}: {v}.",
        "Учёл: {s} {v}.",
        "Понятно, {v}.",
        "Отметил, {s} теперь {v}.",
        "Спасибо, {s} обновлён на {v}.",
        "Так и запишем: {s} — {v}.",
    ],
};

/// An instruction about the notes themselves: forget the earlier values of a subject (`{s}`).
const FORGET: Family = Family {
    name: "forget",
    en: &[
        "Forget the earlier {s} values.",
        "Ignore the old {s}s.",
        "Forget the earlier {s}s, only the latest counts.",
        "Disregard the previous {s}.",
        "Ignore what I said about the {s} before.",
        "Drop the old {s} from your notes.",
        "Forget the previous {s} values.",
        "You can forget the old {s}.",
        "Don't bother with the earlier {s}s.",
        "Never mind the old {s}.",
        "Please ignore the earlier {s} values.",
        "Scrap the old {s} from memory.",
        "Only the newest {s} matters, forget the rest.",
        "Throw away the earlier {s} values.",
    ],
    ru: &[
        "Забудь старый {s}.",
        "Игнорируй прежний {s}.",
        "Забудь про старый {s}.",
        "Старый {s} можно забыть.",
        "Не обращай внимания на прежний {s}.",
        "Выкинь из головы старый {s}.",
        "Прежний {s} больше не важен, забудь.",
        "Предыдущий {s} не учитывай.",
        "Забудь, что я говорил про {s} раньше.",
        "Пожалуйста, забудь старый {s}.",
        "Сотри из заметок старый {s}.",
        "Не держи в голове прежний {s}.",
        "Важен только последний {s}, остальное забудь.",
        "Прошлый {s} можно не помнить.",
    ],
};

/// A promise with no task in it, said in reply.
const PROMISE: Family = Family {
    name: "promise",
    en: &[
        "I'll keep that in mind.",
        "I'll bear that in mind.",
        "Will do.",
        "I'll remember that.",
        "I'll make a note of it.",
        "I'll take that into account.",
        "Sure, I'll keep it in mind.",
        "I'll keep it in mind going forward.",
        "Okay, I'll remember.",
        "I will note that.",
        "Understood, I'll keep that in mind.",
        "I'll be sure to remember that.",
        "Got it, I'll keep that handy.",
        "I'll take note.",
    ],
    ru: &[
        "Учту.",
        "Буду иметь в виду.",
        "Приму к сведению.",
        "Запомню.",
        "Хорошо, учту это.",
        "Постараюсь не забыть.",
        "Я это учту.",
        "Возьму на заметку.",
        "Приму во внимание.",
        "Буду помнить.",
        "Понял, буду иметь в виду.",
        "Обязательно учту.",
        "Хорошо, запомню.",
        "Я запомню это.",
    ],
};

/// A value just stated taken back in everyday words (`scratch that, use X`), the subject named or not.
const RETRACTION: Family = Family {
    name: "retraction",
    en: &[
        "Scratch that, use {v}.",
        "Scratch that, the {s} is {v}.",
        "No wait, make that {v}.",
        "Make that {v} instead.",
        "Strike that: {v} for the {s}.",
        "Forget what I said, it's {v}.",
        "Hold on, not {old}, {v}.",
        "Change of plan, {v} it is.",
        "Let me rephrase: the {s} is {v}.",
        "Scratch {old}, go with {v}.",
        "Delete that, I meant {v}.",
        "Hmm, no, {v}.",
        "Belay that, {s} is {v}.",
        "Wait, make the {s} {v}.",
    ],
    ru: &[
        "Отбой, используем {v}.",
        "Стоп, лучше {v}.",
        "Нет, давай {v}.",
        "Забудь, что я сказал, будет {v}.",
        "Отставить, {s} — {v}.",
        "Вычеркни {old}, ставим {v}.",
        "Не {old}, а {v}.",
        "Хотя нет, {v}.",
        "Погоди, {s} — {v}.",
        "Перепиши: {v}.",
        "Неправильно сказал, {v}.",
        "Поменяй на {v}.",
        "Нет-нет, {v}.",
        "Отмена, {s} — {v}.",
    ],
};

/// A decision reversed back to an option decided earlier (`let's go back to X`).
const RETURN: Family = Family {
    name: "return",
    en: &[
        "Let's go back to {o} for {t}.",
        "Let's go back to {o}.",
        "Back to {o} for {t}.",
        "Revert {t} to {o}.",
        "We're returning to {o} for {t}.",
        "Switch {t} back to {o}.",
        "Roll {t} back to {o}.",
        "{o} again for {t}, the switch didn't work out.",
        "Going back to {o}, it was better.",
        "Actually, let's return to {o} for {t}.",
        "Undo that, {t} stays on {o}.",
        "We reverted {t} to {o}.",
        "Back on {o} for {t}.",
        "Let's restore {o} for {t}.",
    ],
    ru: &[
        "Давай вернёмся к {o} для {t}.",
        "Возвращаемся к {o}.",
        "Для {t} снова {o}.",
        "Для {t} откатываемся на {o}.",
        "Вернули {o} для {t}.",
        "Снова берём {o} для {t}.",
        "Для {t} обратно {o}.",
        "Передумали, для {t} опять {o}.",
        "Возвращаем {o} для {t}, так было лучше.",
        "Всё-таки вернёмся к {o}.",
        "Для {t} возвращаемся на {o}.",
        "Отменяем переход, для {t} остаётся {o}.",
        "Назад к {o} для {t}.",
        "Для {t} снова используем {o}.",
    ],
};

/// Work reported delivered (`{n}` the work named as a thing).
const SHIPPED: Family = Family {
    name: "shipped",
    en: &[
        "{N} shipped.",
        "Shipped {n} this morning.",
        "{N} landed yesterday.",
        "{N} is live now.",
        "{N} went out with the last release.",
        "{N} has been merged and deployed.",
        "Merged {n}.",
        "{N} is out the door.",
        "We shipped {n} on Tuesday.",
        "{N} made it into production.",
        "Deployed {n}, all green.",
        "{N} is in prod.",
        "Rolled out {n} to everyone.",
        "{N} got released.",
    ],
    ru: &[
        "{N} выкатили.",
        "Выкатили {n}.",
        "{N} уже в проде.",
        "{N} — в проде.",
        "Релизнули {n}.",
        "Смержили {n}.",
        "Задеплоили {n}.",
        "{N} — зарелизили.",
        "Вчера выкатили {n}.",
        "{N} теперь в проде.",
        "Раскатили {n} на всех.",
        "{N} в релизе.",
        "Довезли {n} до прода.",
        "Залили {n} в прод.",
    ],
};

/// Work called off (`{n}` the work named as a thing).
const DROPPED: Family = Family {
    name: "dropped",
    en: &[
        "{N} is dropped.",
        "We dropped {n}.",
        "{N} got cancelled.",
        "Cancelled: {n}.",
        "{N} is off the list.",
        "Descoped {n}.",
        "{N} won't happen after all.",
        "Nobody needs {n} anymore.",
        "Shelved {n} for good.",
        "{N} is no longer needed.",
        "Let's drop {n}.",
        "Skip {n}, it's not needed.",
        "Pulled {n} from the plan.",
        "{N} was scrapped.",
    ],
    ru: &[
        "{N} отменили.",
        "Выкинули из плана {n}.",
        "{N} больше не нужно делать.",
        "{N} — отмена.",
        "Сняли с плана {n}.",
        "{N} не делаем.",
        "{N} отложили насовсем.",
        "Вычеркнули из плана {n}.",
        "{N} делать не будем.",
        "Забили на {n}.",
        "Отменяем {n}.",
        "{N} из скоупа убрали.",
        "{N} уже неактуально.",
        "Решили не делать {n}.",
    ],
};

/// An open question answered by a later message (`{r}` the answer as a statement).
const ANSWER: Family = Family {
    name: "answer",
    en: &[
        "Turns out {r}.",
        "Found out: {r}.",
        "Update on the open question: {r}.",
        "Answering my own question, {r}.",
        "{R}, I checked.",
        "Just confirmed that {r}.",
        "To close the loop, {r}.",
        "FYI, {r}.",
        "Got the answer: {r}.",
        "Heard back from ops: {r}.",
        "Settled: {r}.",
        "Mystery solved, {r}.",
        "For the record, {r}.",
        "Ok so {r}.",
    ],
    ru: &[
        "Выяснилось: {r}.",
        "Узнал: {r}.",
        "Отвечаю на свой вопрос: {r}.",
        "{R}, я проверил.",
        "Подтвердили, что {r}.",
        "Закрываю вопрос: {r}.",
        "К сведению: {r}.",
        "Ответ получен — {r}.",
        "Ops ответили: {r}.",
        "Разобрались: {r}.",
        "Загадка решена, {r}.",
        "Для протокола: {r}.",
        "Короче, {r}.",
        "Оказалось, {r}.",
    ],
};

/// A value changed a second time in a row (`{mid}` the value it had just been changed to).
const RECHANGE: Family = Family {
    name: "rechange",
    en: &[
        "Changed again: the {s} is {v} now.",
        "One more change, {s}: {v}.",
        "And the {s} moved once more, to {v}.",
        "Update again, the {s} is {v}.",
        "Another new {s}: {v}.",
        "The {s} changed again, it's {v} now.",
        "Make that {v} for the {s}.",
        "Latest {s}: {v}.",
        "Second change today: the {s} is {v}.",
        "New value for the {s}: {v}.",
        "We moved the {s} again, now {v}.",
        "The {s} is now {v}, not {mid}.",
        "{S} updated again to {v}.",
        "Once more: {s} = {v}.",
    ],
    ru: &[
        "Опять поменяли: {s} — {v}.",
        "Ещё одна смена, {s}: {v}.",
        "{S} снова сменился, теперь {v}.",
        "Снова обновили {s}: {v}.",
        "Новое значение: {s} — {v}.",
        "{S} опять другой: {v}.",
        "Последний {s} — {v}.",
        "Вторая смена за день: {s} — {v}.",
        "Ещё раз перенесли {s} на {v}.",
        "{S} теперь {v}, а не {mid}.",
        "{S} обновили ещё раз, на {v}.",
        "И снова: {s} = {v}.",
        "{S} ещё раз поменялся — {v}.",
        "Передвинули {s} ещё раз, теперь {v}.",
    ],
};

/// Subjects of facts with the values they take (all distinct, none inside another).
const SUBJECTS_EN: &[(&str, [&str; 4])] = &[
    ("deploy target", ["alpha-01", "beta-02", "gamma-03", "delta-04"]),
    ("primary region", ["eu-west-1", "us-east-2", "ap-south-1", "eu-central-1"]),
    ("api port", ["8443", "9443", "7443", "6443"]),
    ("release date", ["March 3", "March 10", "March 17", "March 24"]),
    ("memory limit", ["512 MB", "2 GB", "4 GB", "8 GB"]),
    ("log bucket", ["logs-eu-1", "logs-us-2", "logs-ap-3", "logs-eu-4"]),
    ("build server", ["ci-old-3", "ci-new-9", "ci-x-12", "ci-y-20"]),
    ("cache cluster", ["redis-a", "redis-b", "redis-c", "redis-d"]),
    ("support email", ["help@example.org", "support@example.org", "ops@example.org", "desk@example.org"]),
    ("staging url", ["staging.example.org", "stg.example.net", "pre.example.io", "qa.example.dev"]),
];

/// Russian subjects: masculine inanimate nouns, whose accusative is their nominative.
const SUBJECTS_RU: &[(&str, [&str; 4])] = &[
    ("сервер деплоя", ["alpha-01", "beta-02", "gamma-03", "delta-04"]),
    ("основной регион", ["eu-west-1", "us-east-2", "ap-south-1", "eu-central-1"]),
    ("порт API", ["8443", "9443", "7443", "6443"]),
    ("дедлайн", ["пятница", "понедельник", "среда", "четверг"]),
    ("лимит памяти", ["512 MB", "2 GB", "4 GB", "8 GB"]),
    ("бакет логов", ["logs-eu-1", "logs-us-2", "logs-ap-3", "logs-eu-4"]),
    ("сервер сборки", ["ci-old-3", "ci-new-9", "ci-x-12", "ci-y-20"]),
    ("кластер кэша", ["redis-a", "redis-b", "redis-c", "redis-d"]),
    ("часовой пояс", ["UTC+3", "UTC+2", "UTC+5", "UTC+1"]),
    ("домен стенда", ["stand.example.ru", "stage.example.ru", "test.example.ru", "demo.example.ru"]),
];

/// What decisions are about, with the options (Russian topics are in the genitive, after `для`).
const TOPICS_EN: &[(&str, [&str; 5])] = &[
    ("the message queue", ["Kafka", "NATS", "RabbitMQ", "Pulsar", "ZeroMQ"]),
    ("storage", ["PostgreSQL", "SQLite", "MySQL", "ClickHouse", "DuckDB"]),
    ("dashboards", ["Grafana", "Kibana", "Superset", "Metabase", "Redash"]),
    ("the build pipeline", ["Jenkins", "Buildkite", "Drone", "TeamCity", "Bamboo"]),
    ("the frontend", ["React", "Svelte", "Vue", "SolidJS", "Angular"]),
    ("deployments", ["Helm", "Kustomize", "Pulumi", "Terraform", "Ansible"]),
];

const TOPICS_RU: &[(&str, [&str; 5])] = &[
    ("очередей", ["Kafka", "NATS", "RabbitMQ", "Pulsar", "ZeroMQ"]),
    ("хранения", ["PostgreSQL", "SQLite", "MySQL", "ClickHouse", "DuckDB"]),
    ("дашбордов", ["Grafana", "Kibana", "Superset", "Metabase", "Redash"]),
    ("сборок", ["Jenkins", "Buildkite", "Drone", "TeamCity", "Bamboo"]),
    ("фронтенда", ["React", "Svelte", "Vue", "SolidJS", "Angular"]),
    ("деплоя", ["Helm", "Kustomize", "Pulumi", "Terraform", "Ansible"]),
];

/// Tasks: what to do, and the same thing named, a part of the phrase (English, Russian).
const TASKS_EN: &[(&str, &str)] = &[
    ("renew the TLS certificate for the shop", "the TLS certificate for the shop"),
    ("rotate the staging API keys", "the staging API keys"),
    ("archive the old invoices", "the old invoices"),
    ("update the failover runbook", "the failover runbook"),
    ("migrate the nightly jobs", "the nightly jobs"),
    ("clean up the stale feature flags", "the stale feature flags"),
    ("email the auditors about the Q3 report", "the Q3 report"),
];

const TASKS_RU: &[(&str, &str)] = &[
    ("обновить сертификаты на балансировщике", "сертификаты на балансировщике"),
    ("проверить резервные копии базы", "резервные копии базы"),
    ("перенести ночные задания", "ночные задания"),
    ("почистить старые флаги", "старые флаги"),
    ("продлить домен магазина", "домен магазина"),
    ("обновить регламент переключения", "регламент переключения"),
    ("согласовать квартальный отчёт", "квартальный отчёт"),
];

/// Open questions: the clause, and a phrase of it the ledger must keep.
const QUESTIONS_EN: &[(&str, &str)] = &[
    ("who owns the backup rotation", "backup rotation"),
    ("whether we keep the legacy endpoint alive", "legacy endpoint"),
    ("when the wildcard certificate expires", "wildcard certificate"),
    ("which team pays for the GPU nodes", "GPU nodes"),
    ("how long we retain the audit logs", "audit logs"),
    ("where the billing exports are stored", "billing exports"),
];

const QUESTIONS_RU: &[(&str, &str)] = &[
    ("кто отвечает за ротацию бэкапов", "ротацию бэкапов"),
    ("оставляем ли старый эндпоинт", "старый эндпоинт"),
    ("когда истекает wildcard-сертификат", "wildcard-сертификат"),
    ("какая команда платит за GPU-ноды", "GPU-ноды"),
    ("сколько храним журналы аудита", "журналы аудита"),
    ("где лежат выгрузки биллинга", "выгрузки биллинга"),
];

/// Work to deliver: what to do, and the work named as a thing (Russian things are inanimate masculine or plural,
/// whose accusative is their nominative).
const WORK_EN: &[(&str, &str)] = &[
    ("ship the CSV export", "the CSV export"),
    ("finish the retry banner", "the retry banner"),
    ("build the audit log viewer", "the audit log viewer"),
    ("fix the login redirect", "the login redirect"),
    ("migrate the nightly job runner", "the nightly job runner"),
    ("write the onboarding guide", "the onboarding guide"),
    ("release the billing API v2", "the billing API v2"),
];

const WORK_RU: &[(&str, &str)] = &[
    ("выкатить экспорт в CSV", "экспорт в CSV"),
    ("доделать баннер повтора", "баннер повтора"),
    ("собрать просмотр журнала аудита", "просмотр журнала аудита"),
    ("починить редирект логина", "редирект логина"),
    ("перенести ночной планировщик", "ночной планировщик"),
    ("написать гайд для новичков", "гайд для новичков"),
    ("выпустить биллинг API v2", "биллинг API v2"),
];

/// Questions with their answer: the clause, a phrase of it the ledger keeps while it is open, the answer.
const ANSWERED_EN: &[(&str, &str, &str)] = &[
    ("who owns the backup rotation", "backup rotation", "Dana owns the backup rotation"),
    ("whether we keep the legacy endpoint alive", "legacy endpoint", "we keep the legacy endpoint alive until June"),
    ("when the wildcard certificate expires", "wildcard certificate", "the wildcard certificate expires on May 2"),
    ("which team pays for the GPU nodes", "GPU nodes", "the platform team pays for the GPU nodes"),
    ("how long we retain the audit logs", "audit logs", "we retain the audit logs for 90 days"),
    ("where the billing exports are stored", "billing exports", "the billing exports are stored in the finance bucket"),
];

const ANSWERED_RU: &[(&str, &str, &str)] = &[
    ("кто отвечает за ротацию бэкапов", "ротацию бэкапов", "за ротацию бэкапов отвечает Дана"),
    ("оставляем ли старый эндпоинт", "старый эндпоинт", "старый эндпоинт оставляем до июня"),
    ("когда истекает wildcard-сертификат", "wildcard-сертификат", "wildcard-сертификат истекает 2 мая"),
    ("какая команда платит за GPU-ноды", "GPU-ноды", "за GPU-ноды платит команда платформы"),
    ("сколько храним журналы аудита", "журналы аудита", "журналы аудита храним 90 дней"),
    ("где лежат выгрузки биллинга", "выгрузки биллинга", "выгрузки биллинга лежат в бакете финансов"),
];

/// The paraphrase set, by split: every family and language, one scenario per phrasing under test.
#[derive(Debug, Clone)]
pub struct ParaphraseSuite {
    /// Scenarios whose phrasings the rules may be tuned on.
    pub dev: Vec<EvalCase>,
    /// Scenarios whose phrasings are held out.
    pub held_out: Vec<EvalCase>,
}

impl ParaphraseSuite {
    /// The scenarios of `split`.
    pub fn split(&self, split: Split) -> &[EvalCase] {
        match split {
            Split::Dev => &self.dev,
            Split::HeldOut => &self.held_out,
        }
    }
}

/// Generates the paraphrase set (deterministic: the same every run).
pub fn paraphrase_suite() -> ParaphraseSuite {
    let mut suite = ParaphraseSuite { dev: Vec::new(), held_out: Vec::new() };
    for split in Split::ALL {
        let out = match split {
            Split::Dev => &mut suite.dev,
            Split::HeldOut => &mut suite.held_out,
        };
        for lang in [Lang::En, Lang::Ru] {
            for idx in FACT.indexes(lang, split) {
                out.push(fact_change(lang, split, idx));
            }
            for idx in CORRECTION.indexes(lang, split) {
                out.push(correction(lang, split, idx));
            }
            for idx in DECISION.indexes(lang, split) {
                out.push(decision_reversal(lang, split, idx));
            }
            for idx in OBLIGATION.indexes(lang, split) {
                out.push(obligation_open(lang, split, idx));
            }
            for idx in CLOSURE.indexes(lang, split) {
                out.push(obligation_closed(lang, split, idx));
            }
            for idx in QUESTION.indexes(lang, split) {
                out.push(open_question(lang, split, idx));
            }
            for idx in SECRET.indexes(lang, split) {
                out.push(secret(lang, split, idx));
            }
            for idx in ACK.indexes(lang, split) {
                out.push(acknowledged(lang, split, idx));
            }
            for idx in FORGET.indexes(lang, split) {
                out.push(forget(lang, split, idx));
            }
            for idx in PROMISE.indexes(lang, split) {
                out.push(promise(lang, split, idx));
            }
            for idx in RETRACTION.indexes(lang, split) {
                out.push(retraction(lang, split, idx));
            }
            for idx in RETURN.indexes(lang, split) {
                out.push(decision_return(lang, split, idx));
            }
            for idx in SHIPPED.indexes(lang, split) {
                out.push(work_closed(&SHIPPED, lang, split, idx));
            }
            for idx in DROPPED.indexes(lang, split) {
                out.push(work_closed(&DROPPED, lang, split, idx));
            }
            for idx in ANSWER.indexes(lang, split) {
                out.push(answered(lang, split, idx));
            }
            for idx in RECHANGE.indexes(lang, split) {
                out.push(rechange(lang, split, idx));
            }
        }
    }
    suite
}

/// A scenario's builder: its name says family, language, phrasing and split; its seed is derived from the name.
fn builder(family: &Family, lang: Lang, split: Split, idx: usize) -> (Builder, Rng) {
    let name = format!("{}_{}_{idx:02}_{}", family.name, lang.as_str(), split.as_str());
    let seed = u64::from_le_bytes(blake3::hash(name.as_bytes()).as_bytes()[..8].try_into().unwrap_or([0; 8]));
    let mut builder = Builder::new(&name, seed, LENGTH).hot_tail(HOT_TAIL);
    if lang == Lang::Ru {
        builder = builder.russian();
    }
    (builder, Rng(seed ^ 0x5EED))
}

/// `template` with its slots filled.
fn fill(template: &str, slots: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in slots {
        out = out.replace(&format!("{{{name}}}"), value);
        out = out.replace(&format!("{{{}}}", name.to_uppercase()), &capitalized(value));
    }
    out
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// A phrasing of `family` in `split` other than `except`, picked by `rng`.
fn other<'f>(family: &'f Family, lang: Lang, split: Split, except: Option<usize>, rng: &mut Rng) -> &'f str {
    let pool: Vec<usize> = family.indexes(lang, split).into_iter().filter(|i| Some(*i) != except).collect();
    family.phrasings(lang)[pool[rng.below(pool.len())]]
}

fn subjects(lang: Lang) -> &'static [(&'static str, [&'static str; 4])] {
    match lang {
        Lang::En => SUBJECTS_EN,
        Lang::Ru => SUBJECTS_RU,
    }
}

/// A subject changes value: stated in another phrasing, restated in the one under test. A second subject, stated
/// once in the phrasing under test, must stay visible.
fn fact_change(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&FACT, lang, split, idx);
    let pool = subjects(lang);
    let first = rng.below(pool.len());
    let second = (first + 1 + rng.below(pool.len() - 1)) % pool.len();
    let (subject, values) = pool[first];
    let (other_subject, other_values) = pool[second];
    let (old, new) = (values[0], values[1 + rng.below(3)]);
    let once = other_values[rng.below(4)];
    let phrasing = FACT.phrasings(lang)[idx];
    b.user(&fill(other(&FACT, lang, split, Some(idx), &mut rng), &[("s", subject), ("v", old)]))
        .user(&fill(phrasing, &[("s", other_subject), ("v", once)]))
        .user(&fill(phrasing, &[("s", subject), ("v", new)]))
        .fact(MissKind::StaleFact, subject, new, &[old, new])
        .fact(MissKind::MissingFact, other_subject, once, &[once]);
    b.build()
}

/// A value stated, then corrected in the phrasing under test.
fn correction(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&CORRECTION, lang, split, idx);
    let pool = subjects(lang);
    let (subject, values) = pool[rng.below(pool.len())];
    let (old, new) = (values[0], values[1 + rng.below(3)]);
    b.user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", old)]))
        .user(&fill(CORRECTION.phrasings(lang)[idx], &[("s", subject), ("v", new), ("old", old)]))
        .fact(MissKind::CorrectionLost, subject, new, &[old, new]);
    b.build()
}

/// A decision made, reversed, and reversed again in the phrasing under test (the miss the held-out conversations
/// found), then a proposal of a fourth option that decides nothing.
fn decision_reversal(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&DECISION, lang, split, idx);
    let topics = match lang {
        Lang::En => TOPICS_EN,
        Lang::Ru => TOPICS_RU,
    };
    let (topic, options) = topics[rng.below(topics.len())];
    let first = other(&DECISION, lang, split, Some(idx), &mut rng);
    let second = other(&DECISION, lang, split, Some(idx), &mut rng);
    let proposal = fill(other(&PROPOSAL, lang, split, None, &mut rng), &[("o", options[3]), ("t", topic)]);
    b.user(&fill(first, &[("o", options[0]), ("t", topic)]))
        .user(&fill(second, &[("o", options[1]), ("t", topic)]))
        .user(&fill(DECISION.phrasings(lang)[idx], &[("o", options[2]), ("t", topic)]))
        .user(&proposal);
    b.check(
        MissKind::SupersededDecision,
        Probe::Decision {
            current: options[2].to_owned(),
            older: vec![options[0].to_owned(), options[1].to_owned(), options[3].to_owned()],
            asides: vec![proposal.clone()],
        },
    );
    b.build()
}

fn tasks(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::En => TASKS_EN,
        Lang::Ru => TASKS_RU,
    }
}

/// An obligation taken on in the phrasing under test; it must stay open.
fn obligation_open(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&OBLIGATION, lang, split, idx);
    let (task, thing) = tasks(lang)[rng.below(tasks(lang).len())];
    let text = fill(OBLIGATION.phrasings(lang)[idx], &[("a", task), ("n", thing)]);
    b.user(&text).obligation(thing, true, &[(&text, true)]);
    b.build()
}

/// An obligation taken on in another phrasing and closed in the phrasing under test; it must not be open.
fn obligation_closed(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&CLOSURE, lang, split, idx);
    let (task, thing) = tasks(lang)[rng.below(tasks(lang).len())];
    let open = fill(other(&OBLIGATION, lang, split, None, &mut rng), &[("a", task), ("n", thing)]);
    let close = fill(CLOSURE.phrasings(lang)[idx], &[("a", task), ("n", thing)]);
    b.user(&open).assistant(&close).obligation(thing, false, &[(&open, true), (&close, false)]);
    b.build()
}

/// A question asked in the phrasing under test and never answered; it must stay visible as unresolved.
fn open_question(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&QUESTION, lang, split, idx);
    let pool = match lang {
        Lang::En => QUESTIONS_EN,
        Lang::Ru => QUESTIONS_RU,
    };
    let (clause, phrase) = pool[rng.below(pool.len())];
    b.user(&fill(QUESTION.phrasings(lang)[idx], &[("q", clause)])).question(phrase);
    b.build()
}

/// A secret (or an address) said in the phrasing under test; it must not reach the output.
fn secret(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (mut b, mut rng) = builder(&SECRET, lang, split, idx);
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut secret = String::new();
    // Mixed case and digits, as passwords and tokens are: 10 to 16 characters, one of each class at least.
    let length = 10 + rng.below(7);
    secret.push(char::from(b'A' + rng.below(26) as u8));
    secret.push(char::from(b'a' + rng.below(26) as u8));
    secret.push(char::from(b'2' + rng.below(8) as u8));
    while secret.len() < length {
        secret.push(char::from(ALPHABET[rng.below(ALPHABET.len())]));
    }
    let ip = format!("10.{}.{}.{}", 1 + rng.below(250), 1 + rng.below(250), 2 + rng.below(250));
    let template = SECRET.phrasings(lang)[idx];
    let text = fill(template, &[("x", &secret), ("ip", &ip)]);
    let planted = if template.contains("{ip}") { ip } else { secret };
    b.user(&text).absent(&[&planted]);
    b.build()
}

/// A subject and two of its values, old and new, drawn by `rng`.
fn subject_change(lang: Lang, rng: &mut Rng) -> (&'static str, &'static str, &'static str) {
    let pool = subjects(lang);
    let (subject, values) = pool[rng.below(pool.len())];
    (subject, values[0], values[1 + rng.below(3)])
}

/// The words of a subject a reader would look it up by (the retrieval notes list words of four letters or more).
fn subject_words(subject: &str) -> Vec<&str> {
    subject.split_whitespace().filter(|w| w.chars().count() >= 4 && w.chars().all(char::is_alphabetic)).collect()
}

/// A value stated and acknowledged in the phrasing under test, later a new value acknowledged the same way: only
/// the new value is current, and the subject, not the chatter around it, is what the retrieval notes name.
fn acknowledged(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&ACK, lang, split, idx);
    let mut b = b.everyday();
    let (subject, old, new) = subject_change(lang, &mut rng);
    let ack = ACK.phrasings(lang)[idx];
    b.user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", old)]))
        .then("assistant", &fill(ack, &[("s", subject), ("v", old)]))
        .user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", new)]))
        .then("assistant", &fill(ack, &[("s", subject), ("v", new)]))
        .fact(MissKind::StaleFact, subject, new, &[old, new])
        .topic(&subject_words(subject));
    b.build()
}

/// A value changed, then an instruction to forget the earlier values in the phrasing under test: it is no
/// obligation, and the current value stays current.
fn forget(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&FORGET, lang, split, idx);
    let mut b = b.everyday();
    let (subject, old, new) = subject_change(lang, &mut rng);
    let text = fill(FORGET.phrasings(lang)[idx], &[("s", subject)]);
    b.user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", old)]))
        .user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", new)]))
        .user(&text)
        .not_an_obligation(&text)
        .fact(MissKind::StaleFact, subject, new, &[old, new]);
    b.build()
}

/// A fact answered by a promise with no task in it (the phrasing under test): the promise is no obligation, the
/// fact is kept.
fn promise(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&PROMISE, lang, split, idx);
    let mut b = b.everyday();
    let (subject, value, _) = subject_change(lang, &mut rng);
    let text = PROMISE.phrasings(lang)[idx];
    b.user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", value)]))
        .then("assistant", text)
        .not_an_obligation(text)
        .fact(MissKind::MissingFact, subject, value, &[value]);
    b.build()
}

/// A value stated and at once taken back in the phrasing under test.
fn retraction(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&RETRACTION, lang, split, idx);
    let mut b = b.everyday();
    let (subject, old, new) = subject_change(lang, &mut rng);
    b.user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", old)]))
        .then("user", &fill(RETRACTION.phrasings(lang)[idx], &[("s", subject), ("v", new), ("old", old)]))
        .fact(MissKind::CorrectionLost, subject, new, &[old, new]);
    b.build()
}

/// A decision made, changed, and changed back to the first option in the phrasing under test.
fn decision_return(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&RETURN, lang, split, idx);
    let mut b = b.everyday();
    let topics = match lang {
        Lang::En => TOPICS_EN,
        Lang::Ru => TOPICS_RU,
    };
    let (topic, options) = topics[rng.below(topics.len())];
    let first = other(&DECISION, lang, split, None, &mut rng);
    let second = other(&DECISION, lang, split, None, &mut rng);
    b.user(&fill(first, &[("o", options[0]), ("t", topic)]))
        .user(&fill(second, &[("o", options[1]), ("t", topic)]))
        .user(&fill(RETURN.phrasings(lang)[idx], &[("o", options[0]), ("t", topic)]))
        .decision(options[0], &[options[1]]);
    b.build()
}

/// Work taken on in an obligation's phrasing and closed (delivered or called off) in the phrasing under test.
fn work_closed(family: &Family, lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(family, lang, split, idx);
    let mut b = b.everyday();
    let pool = match lang {
        Lang::En => WORK_EN,
        Lang::Ru => WORK_RU,
    };
    let (task, thing) = pool[rng.below(pool.len())];
    let open = fill(other(&OBLIGATION, lang, split, None, &mut rng), &[("a", task), ("n", thing)]);
    let close = fill(family.phrasings(lang)[idx], &[("a", task), ("n", thing)]);
    b.user(&open).user(&close).obligation(thing, false, &[(&open, true), (&close, false)]);
    b.build()
}

/// A question asked in a question's phrasing and answered later in the phrasing under test.
fn answered(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&ANSWER, lang, split, idx);
    let mut b = b.everyday();
    let pool = match lang {
        Lang::En => ANSWERED_EN,
        Lang::Ru => ANSWERED_RU,
    };
    let (clause, phrase, answer) = pool[rng.below(pool.len())];
    let ask = fill(other(&QUESTION, lang, split, None, &mut rng), &[("q", clause)]);
    let reply = fill(ANSWER.phrasings(lang)[idx], &[("r", answer)]);
    b.user(&ask).assistant(&reply).answered(phrase, &[(&ask, true), (&reply, false)]);
    b.build()
}

/// A value changed, and changed again at once in the phrasing under test: only the last value is current.
fn rechange(lang: Lang, split: Split, idx: usize) -> EvalCase {
    let (b, mut rng) = builder(&RECHANGE, lang, split, idx);
    let mut b = b.everyday();
    let pool = subjects(lang);
    let (subject, values) = pool[rng.below(pool.len())];
    let mid = 1 + rng.below(3);
    let new = 1 + (mid + rng.below(2)) % 3;
    let (old, mid, new) = (values[0], values[mid], values[new]);
    b.user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", old)]))
        .user(&fill(other(&FACT, lang, split, None, &mut rng), &[("s", subject), ("v", mid)]))
        .then("user", &fill(RECHANGE.phrasings(lang)[idx], &[("s", subject), ("v", new), ("mid", mid)]))
        .fact(MissKind::StaleFact, subject, new, &[old, mid, new])
        .topic(&subject_words(subject));
    b.build()
}
