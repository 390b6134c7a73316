//! The generated suite of `lessrt eval context`: 30+ seeded conversations with planted facts, corrections,
//! decisions, obligations, questions and secrets, each with its checks.

use super::{Check, EvalCase, MissKind, Probe};
use less_runtime::context::ChatMessage;

use crate::rng::Rng;

const FILLER_EN: &[&str] = &[
    "Can you summarize the log output from the last run?",
    "Here is the build log: {n} tests passed, 0 failed.",
    "Looks good to me.",
    "The weather is nice today.",
    "I'll check the dashboard after lunch.",
    "Thanks, that helps.",
    "Let me think about the rollout plan a bit more.",
    "The meeting went fine.",
    "Sounds reasonable, go ahead.",
    "I pushed a small refactor of the parser module.",
    "Reading through the design doc now.",
    "Noted.",
    "Build {n} finished in {m} minutes.",
    "Could you explain how the retry logic works?",
    "The retry logic waits {m} seconds between attempts and gives up after five tries.",
    "Great, merging it.",
];

const FILLER_RU: &[&str] = &[
    "Посмотрю логи чуть позже.",
    "Спасибо, понятно.",
    "Сборка {n} прошла успешно.",
    "Погода сегодня отличная.",
    "Обсудим это на созвоне.",
    "Хорошо, двигаемся дальше.",
    "Я обновил описание задачи в трекере.",
    "Тесты прошли за {m} минут.",
    "Можешь объяснить, как работает повтор запросов?",
    "Повтор ждёт {m} секунд и сдаётся после пяти попыток.",
];

/// Everyday chatter mixed into the filler of [`Builder::everyday`] scenarios: greetings, sign-offs and promises with
/// no task in them, repeated often enough to outnumber the words of any subject.
const EVERYDAY_EN: &[&str] = &[
    "Good morning, everyone!",
    "I'll bear that in mind.",
    "Catch you tomorrow morning.",
    "Thanks, I'll keep that in mind.",
    "Coffee first, then the standup.",
    "Sure thing.",
    "Haha, fair enough.",
    "Will do.",
    "Have a nice evening, all.",
];

const EVERYDAY_RU: &[&str] = &[
    "Доброе утро всем!",
    "Учту.",
    "До завтра, хорошего вечера.",
    "Хорошо, буду иметь в виду.",
    "Сначала кофе, потом созвон.",
    "Понял, принял.",
    "Ок, спасибо.",
];

/// Builds one scenario: planted steps spread over the cold history, filler between, checks.
pub(super) struct Builder {
    name: String,
    rng: Rng,
    length: usize,
    russian: bool,
    everyday: bool,
    /// Planted messages; a step with `true` follows the step before it at once instead of being spread out.
    steps: Vec<(&'static str, String, bool)>,
    tail_steps: Vec<(&'static str, String)>,
    checks: Vec<Check>,
    hot_tail: usize,
}

const HOT_TAIL: usize = 6;

impl Builder {
    pub(super) fn new(name: &str, seed: u64, length: usize) -> Builder {
        Builder {
            name: name.to_owned(),
            rng: Rng(seed),
            length,
            russian: false,
            everyday: false,
            steps: Vec::new(),
            tail_steps: Vec::new(),
            checks: Vec::new(),
            hot_tail: HOT_TAIL,
        }
    }

    /// The hot tail of the scenario (6 unless set).
    pub(super) fn hot_tail(mut self, n: usize) -> Builder {
        self.hot_tail = n;
        self
    }

    pub(super) fn russian(mut self) -> Builder {
        self.russian = true;
        self
    }

    /// Filler with everyday chatter in it as well (one filler message in three).
    pub(super) fn everyday(mut self) -> Builder {
        self.everyday = true;
        self
    }

    /// A user message in the cold history.
    pub(super) fn user(&mut self, text: &str) -> &mut Builder {
        self.steps.push(("user", text.to_owned(), false));
        self
    }

    /// An assistant message in the cold history.
    pub(super) fn assistant(&mut self, text: &str) -> &mut Builder {
        self.steps.push(("assistant", text.to_owned(), false));
        self
    }

    /// A message right after the previous planted one, with no filler between (a reply, a second thought).
    pub(super) fn then(&mut self, role: &'static str, text: &str) -> &mut Builder {
        self.steps.push((role, text.to_owned(), true));
        self
    }

    /// A user message inside the hot tail.
    pub(super) fn tail_user(&mut self, text: &str) -> &mut Builder {
        self.tail_steps.push(("user", text.to_owned()));
        self
    }

    pub(super) fn check(&mut self, kind: MissKind, probe: Probe) -> &mut Builder {
        self.checks.push(Check { kind, probe });
        self
    }

    pub(super) fn fact(&mut self, kind: MissKind, subject: &str, current: &str, values: &[&str]) -> &mut Builder {
        let values = values.iter().map(|v| (*v).to_owned()).collect();
        self.check(kind, Probe::Fact { subject: subject.to_owned(), current: current.to_owned(), values })
    }

    pub(super) fn obligation(&mut self, phrase: &str, open: bool, events: &[(&str, bool)]) -> &mut Builder {
        let events = events.iter().map(|(t, o)| ((*t).to_owned(), *o)).collect();
        self.check(MissKind::LostObligation, Probe::Obligation { phrase: phrase.to_owned(), open, events })
    }

    pub(super) fn decision(&mut self, current: &str, older: &[&str]) -> &mut Builder {
        let older = older.iter().map(|o| (*o).to_owned()).collect();
        self.check(
            MissKind::SupersededDecision,
            Probe::Decision { current: current.to_owned(), older, asides: Vec::new() },
        )
    }

    pub(super) fn question(&mut self, phrase: &str) -> &mut Builder {
        self.check(MissKind::MissingFact, Probe::Question { phrase: phrase.to_owned() })
    }

    /// What `text` says must not be presented as an open obligation.
    pub(super) fn not_an_obligation(&mut self, text: &str) -> &mut Builder {
        self.check(MissKind::LostObligation, Probe::NotAnObligation { text: text.to_owned() })
    }

    /// The question naming `phrase`, asked then answered (`events`), must not be presented as unresolved.
    pub(super) fn answered(&mut self, phrase: &str, events: &[(&str, bool)]) -> &mut Builder {
        let events = events.iter().map(|(t, o)| ((*t).to_owned(), *o)).collect();
        self.check(MissKind::StaleFact, Probe::Answered { phrase: phrase.to_owned(), events })
    }

    /// The retrieval notes (or a raw message) must name one of `words`.
    pub(super) fn topic(&mut self, words: &[&str]) -> &mut Builder {
        let words = words.iter().map(|w| (*w).to_owned()).collect();
        self.check(MissKind::MissingFact, Probe::Topic { words })
    }

    pub(super) fn absent(&mut self, texts: &[&str]) -> &mut Builder {
        for text in texts {
            self.check(MissKind::SecretExposed, Probe::Absent { text: (*text).to_owned() });
        }
        self
    }

    fn filler(&mut self, role: &'static str) -> ChatMessage {
        let pool = if self.russian && self.rng.below(4) != 0 { FILLER_RU } else { FILLER_EN };
        let pool = match (self.everyday, self.russian) {
            (true, russian) if self.rng.below(3) == 0 => {
                if russian {
                    EVERYDAY_RU
                } else {
                    EVERYDAY_EN
                }
            }
            _ => pool,
        };
        let template = pool[self.rng.below(pool.len())];
        let text = template
            .replace("{n}", &(100 + self.rng.below(900)).to_string())
            .replace("{m}", &(2 + self.rng.below(40)).to_string());
        ChatMessage::new(role, text)
    }

    /// The transcript: a system prompt, the steps at even spacing (with jitter) in the cold history, filler
    /// elsewhere, and the hot tail (its planted steps last).
    pub(super) fn build(mut self) -> EvalCase {
        let n_cold = self.length.saturating_sub(self.hot_tail + 1).max(self.steps.len());
        let mut slots: Vec<Option<(&'static str, String)>> = vec![None; n_cold];
        let n_spread = self.steps.iter().filter(|(_, _, follows)| !follows).count();
        let spacing = n_cold / (n_spread + 1);
        let (mut n_spread_placed, mut previous) = (0, 0);
        for (pos, (role, text, follows)) in std::mem::take(&mut self.steps).into_iter().enumerate() {
            let mut at = if follows && pos > 0 {
                previous + 1
            } else {
                n_spread_placed += 1;
                let jitter = if spacing > 2 { self.rng.below(spacing / 2) } else { 0 };
                (n_spread_placed * spacing + jitter).min(n_cold - 1)
            };
            // Keep the planted order: never before an earlier step.
            while slots[at].is_some() || slots[..at].iter().filter(|s| s.is_some()).count() < pos {
                at += 1;
            }
            slots[at] = Some((role, text));
            previous = at;
        }
        let mut messages =
            vec![ChatMessage::new("system", "You are a helpful assistant for a small infrastructure team.")];
        for (pos, slot) in slots.into_iter().enumerate() {
            let role = if pos % 2 == 0 { "user" } else { "assistant" };
            messages.push(match slot {
                Some((role, text)) => ChatMessage::new(role, text),
                None => self.filler(role),
            });
        }
        let n_tail_filler = self.hot_tail - self.tail_steps.len().min(self.hot_tail);
        for pos in 0..n_tail_filler {
            let message = self.filler(if pos % 2 == 0 { "user" } else { "assistant" });
            messages.push(message);
        }
        for (role, text) in std::mem::take(&mut self.tail_steps) {
            messages.push(ChatMessage::new(role, text));
        }
        EvalCase { name: self.name, messages, hot_tail: self.hot_tail, checks: self.checks }
    }
}

/// The evaluation suite: 34 scenarios, from 40 to 5,000 messages, English and Russian.
pub fn suite() -> Vec<EvalCase> {
    use MissKind::*;
    let mut out = Vec::new();

    let mut b = Builder::new("supersession_en", 1, 40);
    b.user("For this release the deploy target is alpha-01.")
        .user("Update from ops: the deploy target is now beta-02.")
        .fact(StaleFact, "deploy target", "beta-02", &["alpha-01", "beta-02"]);
    out.push(b.build());

    let mut b = Builder::new("supersession_chain_en", 2, 300);
    b.user("The primary region is eu-west-1.")
        .user("We moved things around, the primary region is now us-east-2.")
        .assistant("Noted, the primary region is ap-south-1 after the latest migration.")
        .user("Final answer from the infra call: the primary region is eu-central-1.")
        .fact(StaleFact, "primary region", "eu-central-1", &["eu-west-1", "us-east-2", "ap-south-1", "eu-central-1"]);
    out.push(b.build());

    let mut b = Builder::new("supersession_ru", 3, 120).russian();
    b.user("Сервер деплоя — alpha-01.").user("Сервер деплоя теперь beta-02.").fact(
        StaleFact,
        "сервер деплоя",
        "beta-02",
        &["alpha-01", "beta-02"],
    );
    out.push(b.build());

    let mut b = Builder::new("supersession_revert_en", 4, 200);
    b.user("The database host is db-1.")
        .user("The database host is db-2 during the patch window.")
        .user("Patching is over, the database host is db-1 again.")
        .fact(StaleFact, "database host", "db-1", &["db-1", "db-2"]);
    out.push(b.build());

    let mut b = Builder::new("two_subjects_en", 5, 250);
    b.user("The staging host is stg-11.")
        .user("The production host is prd-42.")
        .user("Heads up: the staging host is now stg-12.")
        .fact(StaleFact, "staging host", "stg-12", &["stg-11", "stg-12"])
        .fact(MissingFact, "production host", "prd-42", &["prd-42"]);
    out.push(b.build());

    let mut b = Builder::new("correction_marker_en", 6, 150);
    b.user("The release date is March 3.").user("Correction: the release date is March 10.").fact(
        CorrectionLost,
        "release date",
        "March 10",
        &["March 3", "March 10"],
    );
    out.push(b.build());

    let mut b = Builder::new("correction_actually_en", 7, 400);
    b.user("The budget is 40000 EUR for the quarter.")
        .user("Actually, the budget is 45000 EUR, finance approved the extra.")
        .fact(CorrectionLost, "budget", "45000 EUR", &["40000 EUR", "45000 EUR"]);
    out.push(b.build());

    let mut b = Builder::new("correction_ru", 8, 200).russian();
    b.user("Дедлайн — пятница.").user("Поправка: дедлайн — понедельник.").fact(
        CorrectionLost,
        "дедлайн",
        "понедельник",
        &["пятница", "понедельник"],
    );
    out.push(b.build());

    let mut b = Builder::new("correction_wrong_en", 9, 90);
    b.user("My timezone is UTC+3.").user("Sorry, I was wrong: my timezone is UTC+2.").fact(
        CorrectionLost,
        "timezone",
        "UTC+2",
        &["UTC+3", "UTC+2"],
    );
    out.push(b.build());

    let mut b = Builder::new("correction_ru_long", 10, 1200).russian();
    b.user("Наш основной сервер — db-main-1.").user("На самом деле наш основной сервер — db-main-7.").fact(
        CorrectionLost,
        "основной сервер",
        "db-main-7",
        &["db-main-1", "db-main-7"],
    );
    out.push(b.build());

    let mut b = Builder::new("obligations_en", 11, 100);
    b.user("TODO: rotate the staging API keys.")
        .user("We need to renew the TLS certificate for the shop.")
        .user("Remind me to email the auditors about the Q3 report.")
        .assistant("Done: renewed the TLS certificate for the shop.")
        .obligation("rotate the staging API keys", true, &[("TODO: rotate the staging API keys.", true)])
        .obligation(
            "TLS certificate for the shop",
            false,
            &[
                ("We need to renew the TLS certificate for the shop.", true),
                ("Done: renewed the TLS certificate for the shop.", false),
            ],
        )
        .obligation("email the auditors", true, &[("Remind me to email the auditors about the Q3 report.", true)]);
    out.push(b.build());

    let mut b = Builder::new("obligations_cancel_reopen_en", 12, 500);
    b.user("Remind me to book the venue for the offsite.")
        .user("We must archive the old invoices.")
        .user("Cancel: book the venue for the offsite, it moved online.")
        .user("Never mind, no need to archive the old invoices.")
        .user("Reopen: book the venue for the offsite, it is in person after all.")
        .obligation(
            "book the venue for the offsite",
            true,
            &[
                ("Remind me to book the venue for the offsite.", true),
                ("Cancel: book the venue for the offsite, it moved online.", false),
                ("Reopen: book the venue for the offsite, it is in person after all.", true),
            ],
        )
        .obligation(
            "archive the old invoices",
            false,
            &[("We must archive the old invoices.", true), ("Never mind, no need to archive the old invoices.", false)],
        );
    out.push(b.build());

    let mut b = Builder::new("obligations_ru", 13, 160).russian();
    b.user("Надо обновить сертификаты на балансировщике.")
        .user("Не забыть позвонить бухгалтеру.")
        .user("Нужно проверить резервные копии.")
        .user("Напомни мне продлить домен.")
        .assistant("Сделано: проверить резервные копии.")
        .user("Отмена: продлить домен, его продлили автоматически.")
        .obligation("обновить сертификаты", true, &[("Надо обновить сертификаты на балансировщике.", true)])
        .obligation("позвонить бухгалтеру", true, &[("Не забыть позвонить бухгалтеру.", true)])
        .obligation(
            "проверить резервные копии",
            false,
            &[("Нужно проверить резервные копии.", true), ("Сделано: проверить резервные копии.", false)],
        )
        .obligation(
            "продлить домен",
            false,
            &[("Напомни мне продлить домен.", true), ("Отмена: продлить домен, его продлили автоматически.", false)],
        );
    out.push(b.build());

    let mut b = Builder::new("secrets_key_value", 14, 80);
    b.user("Use api_key=Q7fK2mZp9LxW3vB8 for the staging gateway.")
        .user("The admin password=Tr0ub4dor&3 is temporary.")
        .user("token: 5f1e9c2a7b8d4e6f")
        .user("curl -H 'Authorization: Bearer abc123DEF456ghi789JKL' https://api.example.org/v1/items")
        .user("client_secret: Zq8!rT5@wY2#")
        .absent(&["Q7fK2mZp9LxW3vB8", "Tr0ub4dor&3", "5f1e9c2a7b8d4e6f", "abc123DEF456ghi789JKL", "Zq8!rT5@wY2#"]);
    out.push(b.build());

    let mut b = Builder::new("secrets_token_shapes", 15, 120);
    b.user("My OpenAI key is sk-proj-4fT9qLmN2xR7vB1cZ8wK3pY6.")
        .user("CI uses ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 to push.")
        .user("The AWS key id AKIAIOSFODNN7EXAMPLE is in the vault.")
        .user("Slack bot: xoxb-1234567890-0987654321-AbCdEfGhIjKl")
        .user("Session: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
        .absent(&[
            "sk-proj-4fT9qLmN2xR7vB1cZ8wK3pY6",
            "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
            "AKIAIOSFODNN7EXAMPLE",
            "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        ]);
    out.push(b.build());

    let mut b = Builder::new("secrets_pem_and_runs", 16, 60);
    b.user("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9fakefakefake\nQ29udGVudE9mVGhlS2V5\n-----END RSA PRIVATE KEY-----")
        .user("backup blob: QmFja3VwQmxvYjEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5eg==")
        .user("the signing secret hex is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
        .absent(&[
            "MIIEowIBAAKCAQEA7bq9fakefakefake",
            "QmFja3VwQmxvYjEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5eg",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ]);
    out.push(b.build());

    let mut b = Builder::new("secrets_in_urls", 17, 100);
    b.user("Connect with postgres://admin:S3cr3tPass@db.internal:5432/app please.")
        .user("The webhook is https://deploy:hunter2hunter2@ci.example.org/hook")
        .absent(&["S3cr3tPass", "hunter2hunter2"]);
    out.push(b.build());

    let mut b = Builder::new("ip_addresses", 18, 70);
    b.user("The bastion is at 10.20.30.40 and the VPN gateway at 192.168.1.77.")
        .user("IPv6 for the API: 2001:db8::8a2e:370:7334, and the router is fe80::1ff:fe23:4567:890a.")
        .absent(&["10.20.30.40", "192.168.1.77", "2001:db8::8a2e:370:7334", "fe80::1ff:fe23:4567:890a"]);
    out.push(b.build());

    let mut b = Builder::new("decisions_en", 19, 200);
    b.user("Decision: use PostgreSQL for storage.")
        .user("Decision changed: use SQLite for storage instead of PostgreSQL, we run on one box.")
        .decision("SQLite for storage", &["PostgreSQL for storage"]);
    out.push(b.build());

    let mut b = Builder::new("decisions_no_longer_en", 20, 600);
    b.user("We decided to deploy with Helm charts.")
        .user("We no longer deploy with Helm, we will use Kustomize overlays.")
        .decision("Kustomize overlays", &["Helm charts"]);
    out.push(b.build());

    let mut b = Builder::new("decisions_ru", 21, 300).russian();
    b.user("Решили использовать Redis для очередей.")
        .user("Передумали: вместо Redis берём NATS для очередей.")
        .decision("NATS", &["Redis для очередей"]);
    out.push(b.build());

    let mut b = Builder::new("decisions_noise_en", 22, 400);
    b.user("Let's go with weekly releases.")
        .user("I had tea instead of coffee this morning.")
        .user("Decision changed: biweekly releases instead of weekly ones.")
        .decision("biweekly releases", &["go with weekly releases"]);
    out.push(b.build());

    let mut b = Builder::new("questions_en", 23, 150);
    b.user("Open question: who owns the backup rotation?")
        .user("What is the staging database host?")
        .assistant("The staging database host is sdb-4.")
        .question("who owns the backup rotation")
        .fact(MissingFact, "staging database host", "sdb-4", &["sdb-4"]);
    out.push(b.build());

    let mut b = Builder::new("questions_ru", 24, 150).russian();
    b.user("Вопрос: кто отвечает за резервное копирование?").question("кто отвечает за резервное копирование");
    out.push(b.build());

    let mut b = Builder::new("plain_facts_long_en", 25, 1500);
    b.user("The project codename is Bluebird.")
        .user("My timezone is UTC+5.")
        .user("The staging url is staging.example.org.")
        .user("Our on-call engineer is Dana.")
        .user("The invoice number is INV-2291.")
        .user("The office wifi network is Guest-5.")
        .fact(MissingFact, "project codename", "Bluebird", &["Bluebird"])
        .fact(MissingFact, "timezone", "UTC+5", &["UTC+5"])
        .fact(MissingFact, "staging url", "staging.example.org", &["staging.example.org"])
        .fact(MissingFact, "on-call engineer", "Dana", &["Dana"])
        .fact(MissingFact, "invoice number", "INV-2291", &["INV-2291"])
        .fact(MissingFact, "office wifi network", "Guest-5", &["Guest-5"]);
    out.push(b.build());

    out.push(mixed_en("mixed_long_en", 26, 2000));
    out.push(mixed_ru("mixed_long_ru", 27, 1500));
    out.push(mixed_bilingual("mixed_bilingual_5000", 28, 5000));

    let mut b = Builder::new("tail_overrides", 29, 300);
    b.user("The deploy target is alpha-01.")
        .user("The deploy target is now beta-02.")
        .tail_user("Last change for today: the deploy target is gamma-03.")
        .fact(StaleFact, "deploy target", "gamma-03", &["alpha-01", "beta-02", "gamma-03"]);
    out.push(b.build());

    let mut b = Builder::new("secret_repeated", 30, 250);
    b.user("api_key=Rk29sLmQ8vXz4TbN")
        .user("Again, api_key=Rk29sLmQ8vXz4TbN for prod.")
        .user("And for staging the api_key=Wd73hGqP1cYk6MzA.")
        .user("Reminder that Rk29sLmQ8vXz4TbN is the prod api_key: Rk29sLmQ8vXz4TbN")
        .absent(&["Rk29sLmQ8vXz4TbN", "Wd73hGqP1cYk6MzA"]);
    out.push(b.build());

    let mut b = Builder::new("truncate_head_trap", 31, 800);
    b.user("The build server is ci-old-3.")
        .user("Migration done: the build server is now ci-new-9.")
        .user("We need to migrate the nightly jobs.")
        .user("Done: migrated the nightly jobs.")
        .fact(StaleFact, "build server", "ci-new-9", &["ci-old-3", "ci-new-9"])
        .obligation(
            "nightly jobs",
            false,
            &[("We need to migrate the nightly jobs.", true), ("Done: migrated the nightly jobs.", false)],
        );
    out.push(b.build());

    out.push(many_obligations("many_obligations_long", 32, 1000));

    let mut b = Builder::new("secrets_ru", 33, 100).russian();
    b.user("Пароль: Zx9qLm2Vt7").user("токен: 77ab12cd34ef56ab").absent(&["Zx9qLm2Vt7", "77ab12cd34ef56ab"]);
    out.push(b.build());

    let mut b = Builder::new("set_to_en", 34, 200);
    b.user("Please set the log level to debug for now.").user("All good, change the log level to warn.").fact(
        StaleFact,
        "log level",
        "warn",
        &["debug", "warn"],
    );
    out.push(b.build());

    out
}

/// A long English session with every kind of entry.
fn mixed_en(name: &str, seed: u64, length: usize) -> EvalCase {
    use MissKind::*;
    let mut b = Builder::new(name, seed, length);
    b.user("The deploy target is alpha-01.")
        .user("TODO: write the incident report for the outage.")
        .user("Decision: ship the mobile app through TestFlight first.")
        .user("The vault address is https://vault.example.org and the root token: hvs.CAESIJ3k9XyZ8wQ.")
        .user("The load balancer listens on 172.16.4.20.")
        .user("What is the on-call rotation for December?")
        .user("The deploy target is now beta-02.")
        .user("The on-call rotation for december is Alice then Bob.")
        .user("Correction: the support email is help@example.org.")
        .user("Decision changed: ship the mobile app through Firebase instead of TestFlight.")
        .user("Need to update the runbook for the database failover.")
        .user("Done: wrote the incident report for the outage.")
        .user("Open question: do we keep the legacy endpoint alive?")
        .fact(StaleFact, "deploy target", "beta-02", &["alpha-01", "beta-02"])
        .fact(MissingFact, "on-call rotation for december", "Alice then Bob", &["Alice then Bob"])
        .fact(CorrectionLost, "support email", "help@example.org", &["help@example.org"])
        .decision("through Firebase", &["through TestFlight first"])
        .obligation(
            "incident report",
            false,
            &[
                ("TODO: write the incident report for the outage.", true),
                ("Done: wrote the incident report for the outage.", false),
            ],
        )
        .obligation(
            "runbook for the database failover",
            true,
            &[("Need to update the runbook for the database failover.", true)],
        )
        .question("do we keep the legacy endpoint alive")
        .absent(&["hvs.CAESIJ3k9XyZ8wQ", "172.16.4.20"]);
    b.build()
}

/// A long Russian session with every kind of entry.
fn mixed_ru(name: &str, seed: u64, length: usize) -> EvalCase {
    use MissKind::*;
    let mut b = Builder::new(name, seed, length).russian();
    b.user("Сервер сборки — build-7.")
        .user("Надо перенести логи в новое хранилище.")
        .user("Решили хранить логи в S3.")
        .user("Пароль от админки: Hq5vNw8Rt2.")
        .user("Адрес мониторинга 10.1.2.3.")
        .user("Сервер сборки теперь build-9.")
        .user("Поправка: ответственный за релиз — Мария.")
        .user("Передумали: вместо S3 храним логи в MinIO.")
        .user("Сделано: перенести логи в новое хранилище.")
        .user("Не забыть согласовать отпуск команды.")
        .fact(StaleFact, "сервер сборки", "build-9", &["build-7", "build-9"])
        .fact(CorrectionLost, "ответственный за релиз", "Мария", &["Мария"])
        .decision("MinIO", &["хранить логи в S3"])
        .obligation(
            "перенести логи",
            false,
            &[("Надо перенести логи в новое хранилище.", true), ("Сделано: перенести логи в новое хранилище.", false)],
        )
        .obligation("согласовать отпуск", true, &[("Не забыть согласовать отпуск команды.", true)])
        .absent(&["Hq5vNw8Rt2", "10.1.2.3"]);
    b.build()
}

/// A 5,000-message session switching languages, with a subject that changes five times.
fn mixed_bilingual(name: &str, seed: u64, length: usize) -> EvalCase {
    use MissKind::*;
    let mut b = Builder::new(name, seed, length).russian();
    b.user("The cache cluster is redis-a.")
        .user("Кэш-кластер — redis-a.")
        .user("The cache cluster is now redis-b.")
        .user("Remind me to renew the support contract.")
        .user("The cache cluster is now redis-c.")
        .user("Decision: use Grafana for dashboards.")
        .user("Кэш-кластер теперь redis-d.")
        .user("ghp_Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8")
        .user("The cache cluster is now redis-e.")
        .user("Decision changed: use Kibana for dashboards instead of Grafana.")
        .user("Actually, the cache cluster is redis-f.")
        .user("Надо обновить SSL на api.")
        .fact(StaleFact, "cache cluster", "redis-f", &["redis-a", "redis-b", "redis-c", "redis-e", "redis-f"])
        .fact(StaleFact, "кэш-кластер", "redis-d", &["redis-a", "redis-d"])
        .decision("Kibana for dashboards", &["Grafana for dashboards"])
        .obligation("renew the support contract", true, &[("Remind me to renew the support contract.", true)])
        .obligation("обновить SSL", true, &[("Надо обновить SSL на api.", true)])
        .absent(&["ghp_Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"]);
    b.build()
}

/// Ten obligations over 1,000 messages, every other one closed.
fn many_obligations(name: &str, seed: u64, length: usize) -> EvalCase {
    const TASKS: [&str; 10] = [
        "upgrade the kernel on the workers",
        "clean up the stale feature flags",
        "document the billing webhook",
        "rotate the database passwords",
        "review the firewall rules",
        "migrate the cron jobs to systemd timers",
        "prune the container registry",
        "audit the admin accounts",
        "benchmark the new storage backend",
        "translate the onboarding guide",
    ];
    let mut b = Builder::new(name, seed, length);
    let opens: Vec<String> = TASKS.iter().map(|t| format!("TODO: {t}.")).collect();
    let closes: Vec<String> = TASKS.iter().map(|t| format!("Done: {t}.")).collect();
    for open in &opens {
        b.user(open);
    }
    for (pos, close) in closes.iter().enumerate() {
        if pos % 2 == 0 {
            b.assistant(close);
        }
    }
    for (pos, task) in TASKS.iter().enumerate() {
        let closed = pos % 2 == 0;
        let mut events = vec![(opens[pos].as_str(), true)];
        if closed {
            events.push((closes[pos].as_str(), false));
        }
        b.obligation(task, !closed, &events);
    }
    b.build()
}
