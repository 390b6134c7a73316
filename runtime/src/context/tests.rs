//! Tests of the context ledger: shape, extraction, supersession, redaction, fail-closed, idempotence, the rule table
//! and its prefilter (over the clauses of `less-eval`'s suites), and properties over generated conversations with
//! planted secrets. How the ledger scores on the evaluation's suites is tested in `less-eval`.

use proptest::prelude::*;

use super::rules::{Act, Lang, RULES};
use super::*;

fn user(text: &str) -> ChatMessage {
    ChatMessage::new("user", text)
}

fn assistant(text: &str) -> ChatMessage {
    ChatMessage::new("assistant", text)
}

/// `cold` as alternating filler-free user messages, then `n_tail` short tail messages.
fn conversation(cold: &[&str], n_tail: usize) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::new("system", "You are terse.")];
    messages.extend(cold.iter().map(|t| user(t)));
    messages.extend((0..n_tail).map(|i| assistant(&format!("tail message {i}"))));
    messages
}

/// The ledger message of a compacted conversation.
fn ledger_of(output: &[ChatMessage]) -> &str {
    let ledgers: Vec<&ChatMessage> = output.iter().filter(|m| m.content.starts_with(LEDGER_HEADER)).collect();
    assert_eq!(ledgers.len(), 1, "exactly one ledger: {output:#?}");
    &ledgers[0].content
}

/// The ledger engine's output whatever its size: these tests read what it extracts from short chats, which the
/// default returns unchanged (their ledger is larger than they are; see `a_chat_is_never_made_larger`).
fn compact_default(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let compaction = compact_report(messages, &CompactConfig { keep_if_larger: true, ..CompactConfig::default() });
    assert_eq!(compaction.warning, None);
    compaction.messages
}

#[test]
fn the_output_is_system_messages_then_one_ledger_then_the_verbatim_tail() {
    let mut messages = conversation(&["The deploy target is alpha-01.", "Hello there."], 6);
    messages.insert(2, ChatMessage::new("system", "A second system note, mid-conversation."));
    let output = compact_default(&messages);
    assert_eq!(output[0], messages[0]);
    assert_eq!(output[1], messages[2], "system messages keep their order and bytes");
    assert_eq!(output[2].role, "system");
    assert!(output[2].content.starts_with("Semantic RLE context ledger\n"));
    assert_eq!(&output[3..], &messages[messages.len() - 6..], "the hot tail is byte-identical");
    let headings: Vec<&str> = output[2].content.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    assert_eq!(headings, SECTIONS.to_vec(), "all seven sections, in order, even when empty");
}

#[test]
fn a_short_conversation_still_gets_its_ledger_and_keeps_every_message() {
    let messages = conversation(&[], 3);
    let output = compact_default(&messages);
    assert_eq!(output.len(), 5);
    assert_eq!(&output[2..], &messages[1..]);
    assert!(ledger_of(&output).contains("Compacted: 0 messages."));
    let output = compact_default(&[]);
    assert_eq!(output.len(), 1, "an empty conversation compacts to the ledger alone");
}

#[test]
fn a_corrected_fact_supersedes_the_old_value_and_keeps_a_chain() {
    let messages = conversation(
        &[
            "The deploy target is alpha-01.",
            "Nothing else today.",
            "Correction: the deploy target is now beta-02.",
            "The region is eu-west-1.",
            "The region is now us-east-2.",
            "The region is ap-south-1.",
            "The region is now eu-central-1.",
        ],
        6,
    );
    let output = compact_default(&messages);
    let ledger = ledger_of(&output);
    let active = ledger_section(ledger, "Active facts");
    assert!(active.contains(&"- deploy target: beta-02 (#3, corrected)"), "{ledger}");
    assert!(active.contains(&"- region: eu-central-1 (#7)"), "{ledger}");
    assert!(!active.iter().any(|l| l.contains("alpha-01") || l.contains("us-east-2")), "{ledger}");
    let superseded = ledger_section(ledger, "Superseded facts");
    assert!(superseded.contains(&"- deploy target: alpha-01 (#1, superseded by #3)"), "{ledger}");
    assert!(
        superseded.contains(
            &"- region: eu-west-1 (#4, superseded by #5); us-east-2 (#5, superseded by #6); ap-south-1 (#6, superseded by #7)"
        ),
        "a subject that changed more than twice has its whole chain: {ledger}"
    );
}

#[test]
fn russian_facts_and_corrections_are_read() {
    let messages = conversation(&["Сервер деплоя — alpha-01.", "Поправка: сервер деплоя теперь beta-02."], 6);
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert!(ledger_section(&ledger, "Active facts").contains(&"- сервер деплоя: beta-02 (#2, corrected)"), "{ledger}");
    assert!(ledger_section(&ledger, "Superseded facts").contains(&"- сервер деплоя: alpha-01 (#1, superseded by #2)"));
}

#[test]
fn decisions_are_superseded_by_changes_that_name_them() {
    let messages = conversation(
        &[
            "Decision: use PostgreSQL for storage.",
            "We decided to deploy with Helm charts.",
            "I walked to work instead.",
            "Decision changed: use SQLite instead of PostgreSQL.",
            "We no longer deploy with Helm, we will use Kustomize.",
            "Решили использовать Redis для очередей.",
            "Передумали: вместо Redis берём NATS.",
        ],
        6,
    );
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    let decisions = ledger_section(&ledger, "Decisions");
    assert_eq!(
        decisions,
        vec![
            "- [superseded] use PostgreSQL for storage (#1, superseded by #4)",
            "- [superseded] We decided to deploy with Helm charts (#2, superseded by #5)",
            "- [active] use SQLite instead of PostgreSQL (#4)",
            "- [active] We no longer deploy with Helm, we will use Kustomize (#5)",
            "- [superseded] Решили использовать Redis для очередей (#6, superseded by #7)",
            "- [active] вместо Redis берём NATS (#7)",
        ],
        "a bare 'instead' that replaces nothing is conversation, not a decision"
    );
}

#[test]
fn a_later_decision_on_the_same_subject_supersedes_whatever_its_wording() {
    // The held-out miss of issue 19: a decision reversed a second time in words outside the marker table.
    let messages = conversation(
        &[
            "We decided to use Kafka for the message queue.",
            "Use Grafana for dashboards, we agreed.",
            "Change of plans: NATS for the message queue instead of Kafka.",
            "OK, RabbitMQ it is for the message queue.",
            "What about Pulsar for the message queue some day?",
            "Maybe Pulsar for the message queue would be worth a look.",
            "Для очередей берём Kafka.",
            "Итог: для очередей — NATS.",
        ],
        6,
    );
    let once = compact_default(&messages);
    let ledger = ledger_of(&once).to_owned();
    let active: Vec<&str> =
        ledger_section(&ledger, "Decisions").into_iter().filter(|l| l.starts_with("- [active]")).collect();
    assert_eq!(
        active,
        vec!["- [active] Use Grafana for dashboards, we agreed (#2)", "- [active] Итог: для очередей — NATS (#8)"],
        "{ledger}"
    );
    // "Для очередей берём Kafka" names an option the first decision named: it is about the message queue too,
    // in whatever language, and supersedes RabbitMQ.
    assert!(
        ledger_section(&ledger, "Decisions")
            .contains(&"- [superseded] OK, RabbitMQ it is for the message queue (#4, superseded by #7)"),
        "{ledger}"
    );
    assert!(
        ledger_section(&ledger, "Decisions")
            .contains(&"- [superseded] NATS for the message queue instead of Kafka (#3, superseded by #4)"),
        "{ledger}"
    );
    // Stable: compacting again changes nothing.
    assert_eq!(compact_default(&once), once);
}

#[test]
fn a_known_subject_restated_in_any_words_gets_the_new_value() {
    let messages = conversation(
        &[
            "The deploy target is alpha-01.",
            "Oops, I meant gamma-03 for the deploy target.",
            "Лимит памяти — 512 MB.",
            "Извини, лимит памяти на самом деле 2 GB.",
            "No, the support email isn't help@example.org, it's ops@example.org.",
            "The support email is help@example.org.",
        ],
        6,
    );
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    let facts = ledger_section(&ledger, "Active facts");
    assert!(facts.contains(&"- deploy target: gamma-03 (#2, corrected)"), "{ledger}");
    assert!(facts.contains(&"- лимит памяти: 2 GB (#4, corrected)"), "{ledger}");
    assert!(facts.iter().any(|l| l.starts_with("- support email: help@example.org (#6")), "{ledger}");
    // A value named after a negation is the one rejected, never the new one.
    let negated =
        conversation(&["The support email is help@example.org.", "The support email isn't ops@example.org."], 6);
    let ledger = ledger_of(&compact_default(&negated)).to_owned();
    assert_eq!(ledger_section(&ledger, "Active facts"), ["- support email: help@example.org (#1)"], "{ledger}");
}

#[test]
fn commitments_closures_and_embedded_questions_are_read_by_structure() {
    let messages = conversation(
        &[
            "I'll rotate the staging API keys tomorrow.",
            "Next step: migrate the nightly jobs.",
            "Следующий шаг — обновить сертификаты на балансировщике.",
            "The nightly jobs are taken care of.",
            "Not sure yet who owns the backup rotation.",
            "Пока не ясно, кто отвечает за ротацию бэкапов.",
            "We'll stick with Kafka for the message queue.",
        ],
        6,
    );
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(
        ledger_section(&ledger, "Obligations"),
        vec![
            "- [open] rotate the staging API keys tomorrow (#1)",
            "- [done] migrate the nightly jobs (#2, done #4)",
            "- [open] обновить сертификаты на балансировщике (#3)",
        ],
        "{ledger}"
    );
    assert_eq!(
        ledger_section(&ledger, "Unresolved questions"),
        vec!["- who owns the backup rotation (#5, user)", "- кто отвечает за ротацию бэкапов (#6, user)"],
        "{ledger}"
    );
    assert_eq!(
        ledger_section(&ledger, "Decisions"),
        vec!["- [active] We'll stick with Kafka for the message queue (#7)"],
        "a commitment to a choice is a decision: {ledger}"
    );
}

#[test]
fn a_value_named_like_a_secret_is_never_echoed() {
    let messages = conversation(&["Вот ключ: Ti8GUEBiDkAh", "pw for the db: hunterhunter"], 6);
    let output = compact(&messages, &CompactConfig { hot_tail: 6, keep_if_larger: true, ..CompactConfig::default() });
    let ledger = ledger_of(&output);
    assert!(!ledger.contains("Ti8GUEBiDkAh") && !ledger.contains("hunterhunter"), "{ledger}");
}

#[test]
fn obligations_close_when_done_or_cancelled_and_come_back_when_reopened() {
    let messages = conversation(
        &[
            "TODO: rotate the staging API keys.",
            "We need to renew the TLS certificate.",
            "Remind me to book the venue.",
            "Надо обновить сертификаты.",
            "Не забыть позвонить бухгалтеру.",
            "Done: renewed the TLS certificate.",
            "Cancel: book the venue.",
            "Сделано: обновить сертификаты.",
            "Reopen: book the venue, it is back on.",
            "No need to rotate the staging API keys.",
        ],
        6,
    );
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(
        ledger_section(&ledger, "Obligations"),
        vec![
            "- [cancelled] rotate the staging API keys (#1, cancelled #10)",
            "- [done] renew the TLS certificate (#2, done #6)",
            "- [open] book the venue (#3, reopened #9)",
            "- [done] обновить сертификаты (#4, done #8)",
            "- [open] позвонить бухгалтеру (#5)",
        ]
    );
}

/// `planted` with everyday chatter between every two messages (and before the first), then the default hot tail.
fn with_chatter(planted: &[&str]) -> Vec<ChatMessage> {
    const CHATTER: [&str; 4] =
        ["Good morning, everyone!", "I'll bear that in mind.", "Catch you tomorrow morning.", "Sure thing."];
    let mut cold: Vec<&str> = Vec::new();
    for (pos, text) in planted.iter().enumerate() {
        cold.push(CHATTER[pos % CHATTER.len()]);
        cold.push(CHATTER[(pos + 1) % CHATTER.len()]);
        cold.push(text);
    }
    conversation(&cold, CompactConfig::default().hot_tail)
}

/// The Active facts lines that mention `word`.
fn active_about<'l>(ledger: &'l str, word: &str) -> Vec<&'l str> {
    ledger_section(ledger, "Active facts").into_iter().filter(|l| l.contains(word)).collect()
}

#[test]
fn an_acknowledgement_is_folded_into_the_fact_it_restates() {
    let messages = with_chatter(&[
        "Fact: the deploy target is alpha-01.",
        "Noted: deploy target alpha-01.",
        "Got it, alpha-01.",
        "The deploy target is now beta-02.",
        "Updated: deploy target beta-02.",
        "Принял: сервер сборки ci-old-3.",
    ]);
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(active_about(&ledger, "deploy target"), ["- deploy target: beta-02 (#12)"], "{ledger}");
    let subjects: Vec<&str> = ledger_section(&ledger, "Active facts")
        .iter()
        .filter_map(|l| l[2..].split_once(": "))
        .map(|(s, _)| s)
        .collect();
    for ack in ["noted", "updated", "got it", "fact", "принял"] {
        assert!(!subjects.iter().any(|s| s.starts_with(ack)), "{ack} is no subject: {ledger}");
    }
    assert_eq!(
        ledger_section(&ledger, "Superseded facts"),
        ["- deploy target: alpha-01 (#3, superseded by #12)"],
        "the acknowledgement is part of the value it restates, superseded with it: {ledger}"
    );
}

#[test]
fn a_value_changed_three_times_with_restatements_between_keeps_only_the_last() {
    let messages = with_chatter(&[
        "The primary region is us-east-1.",
        "Noted: primary region us-east-1.",
        "The primary region is now eu-west-1.",
        "Updated: primary region eu-west-1.",
        "Region moved again, the primary region is ap-south-1.",
        "Ok, ap-south-1.",
        "The primary region is now us-west-2.",
        "Forget the earlier regions.",
        "Understood, primary region us-west-2.",
    ]);
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(active_about(&ledger, "region"), ["- primary region: us-west-2 (#21)"], "{ledger}");
    assert_eq!(
        ledger_section(&ledger, "Superseded facts"),
        ["- primary region: us-east-1 (#3, superseded by #9); eu-west-1 (#9, superseded by #15); ap-south-1 (#15, \
          superseded by #21)"],
        "each older value once, in order: {ledger}"
    );
    assert!(ledger_section(&ledger, "Decisions").is_empty(), "a new value of a known fact decides nothing: {ledger}");
    assert!(ledger_section(&ledger, "Obligations").is_empty(), "{ledger}");
    // A value changed twice in a row, the second time at once.
    let twice = with_chatter(&[
        "The cache cluster is redis-a.",
        "Our cache cluster moved to redis-b.",
        "Changed again: the cache cluster is now redis-c.",
    ]);
    let ledger = ledger_of(&compact_default(&twice)).to_owned();
    assert_eq!(active_about(&ledger, "cache cluster"), ["- cache cluster: redis-c (#9)"], "{ledger}");
}

#[test]
fn an_instruction_about_the_notes_or_a_promise_without_a_task_is_no_obligation() {
    let messages = with_chatter(&[
        "The primary region is eu-west-1.",
        "Forget the earlier regions.",
        "Ignore the old deploy targets, please.",
        "Забудь старый сервер деплоя.",
        "I'll keep that in mind.",
        "Обязательно учту.",
        "I'll rotate the staging API keys tomorrow.",
        "We must archive the old invoices.",
        "Never mind, no need to archive the old invoices.",
    ]);
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(
        ledger_section(&ledger, "Obligations"),
        [
            "- [open] rotate the staging API keys tomorrow (#21)",
            "- [cancelled] archive the old invoices (#24, cancelled #27)",
        ],
        "a task is an obligation, a promise to remember or an instruction to forget is not: {ledger}"
    );
    // Chatter that repeats is not what the retrieval notes point to; the subjects are.
    let notes = ledger_section(&ledger, "Retrieval notes").join("\n");
    assert!(notes.contains("\"region\""), "{ledger}");
    for chatter in ["morning", "bear", "catch", "everyone", "mind"] {
        assert!(!notes.contains(&format!("\"{chatter}\"")), "{chatter}: {ledger}");
    }
}

#[test]
fn everyday_wording_corrects_reverses_closes_and_answers() {
    let messages = with_chatter(&[
        "The api port is 8443.",
        "Scratch that, use 9443.",
        "OK, Kafka it is for the message queue.",
        "We decided to use NATS for the message queue.",
        "Let's go back to Kafka.",
        "We should ship the CSV export this week.",
        "Someone has to fix the login redirect.",
        "Please write the onboarding guide.",
        "The CSV export shipped.",
        "The login redirect is dropped.",
        "Not sure yet who owns the backup rotation.",
        "Turns out Dana owns the backup rotation.",
        "Сервер деплоя — alpha-01.",
        "Хотя нет, beta-02.",
    ]);
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(active_about(&ledger, "api port"), ["- api port: 9443 (#6, corrected)"], "{ledger}");
    assert_eq!(active_about(&ledger, "сервер деплоя"), ["- сервер деплоя: beta-02 (#42, corrected)"], "{ledger}");
    let active: Vec<&str> =
        ledger_section(&ledger, "Decisions").into_iter().filter(|l| l.starts_with("- [active]")).collect();
    assert_eq!(active, ["- [active] Let's go back to Kafka (#15)"], "{ledger}");
    assert_eq!(
        ledger_section(&ledger, "Obligations"),
        [
            "- [done] ship the CSV export this week (#18, done #27)",
            "- [cancelled] fix the login redirect (#21, cancelled #30)",
            "- [open] write the onboarding guide (#24)",
        ],
        "{ledger}"
    );
    assert!(ledger_section(&ledger, "Unresolved questions").is_empty(), "answered: {ledger}");
}

#[test]
fn questions_stay_unresolved_until_answered() {
    let messages = conversation(
        &[
            "Open question: who owns the backup rotation?",
            "What is the staging database host?",
            "Is the cache warm yet?",
            "Вопрос: кто отвечает за релиз?",
            "The staging database host is sdb-4.",
            "Answer: the cache is warm since noon.",
        ],
        6,
    );
    let ledger = ledger_of(&compact_default(&messages)).to_owned();
    assert_eq!(
        ledger_section(&ledger, "Unresolved questions"),
        vec!["- who owns the backup rotation? (#1, user)", "- кто отвечает за релиз? (#4, user)"]
    );
}

#[test]
fn every_secret_shape_becomes_a_stable_credential_ref() {
    let cases = [
        ("api_key=Q7fK2mZp9LxW3vB8", "Q7fK2mZp9LxW3vB8"),
        ("token: 5f1e9c2a7b8d4e6f", "5f1e9c2a7b8d4e6f"),
        ("password=hunter2!x", "hunter2!x"),
        ("Authorization: Bearer abc123DEF456ghi789", "abc123DEF456ghi789"),
        ("my secret is opensesame", "opensesame"),
        ("пароль: Zx9qLm2Vt7", "Zx9qLm2Vt7"),
        ("key sk-proj-4fT9qLmN2xR7vB1cZ8wK3pY6 here", "sk-proj-4fT9qLmN2xR7vB1cZ8wK3pY6"),
        ("ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
        ("id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("xoxb-1234567890-AbCdEfGhIjKl", "xoxb-1234567890-AbCdEfGhIjKl"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N", "eyJhbGciOiJIUzI1NiJ9"),
        (
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END PRIVATE KEY-----",
            "MIIEvQIBADANBgkqhkiG9w0B",
        ),
        ("blob QmFja3VwQmxvYjEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9w", "QmFja3VwQmxvYjEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9w"),
        ("sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),
        ("postgres://admin:S3cr3tPass@db.internal/app", "S3cr3tPass"),
    ];
    for (text, secret) in cases {
        let redacted = redact(text);
        assert!(!redacted.text.contains(secret), "{text} -> {}", redacted.text);
        assert!(redacted.text.contains(CREDENTIAL_REF_PREFIX), "{text} -> {}", redacted.text);
        assert!(!redacted.credentials.is_empty());
        assert_eq!(redact(&redacted.text).text, redacted.text, "redaction is idempotent: {text}");
    }
    // Shapes found by trying to break it (issue 17): each value is redacted whole, and nothing of it survives.
    let found = [
        (
            "The Google key is AIzaSyD4x9Qw2Er5Ty7Ui8Op1As3Df6Gh9Jk0Lz for maps.",
            "AIzaSyD4x9Qw2Er5Ty7Ui8Op1As3Df6Gh9Jk0Lz",
        ),
        ("use the stripe key sk_live_51HxYzAbCdEfGhIjKlMnOpQr in staging", "sk_live_51HxYzAbCdEfGhIjKlMnOpQr"),
        ("restricted rk_test_4eC39HqLyjWDarjtT1zdp7dc", "rk_test_4eC39HqLyjWDarjtT1zdp7dc"),
        ("пароль — Zq8!mK2#pL для базы", "Zq8!mK2#pL"),
        ("Пароль от базы — hunter2xyz, не забудь.", "hunter2xyz"),
        ("The unseal key is 3fQ9xZ7wP2mL8kR4 and keep it safe.", "3fQ9xZ7wP2mL8kR4"),
        ("the root token is s.Xk29Lm4Pq8Rt6Wz1", "s.Xk29Lm4Pq8Rt6Wz1"),
        (r#"The db password is "correct horse battery staple" for now."#, "correct horse battery staple"),
        (r#"{"password": "two words here"}"#, "two words here"),
        ("password = 'open sesame please'", "open sesame please"),
        ("The admin password is Zq8!mK2#pL until Friday.", "Zq8!mK2#pL"),
        ("password: Zq8!mK2#pL", "Zq8!mK2#pL"),
        ("the password for staging is Zq8!mK2#pL.", "Zq8!mK2#pL"),
        ("DB_PASSWORD=Zq8!mK2#pL", "Zq8!mK2#pL"),
        // Issue 34: words between the key and the colon.
        ("password for the billing db: swordfish42", "swordfish42"),
        ("the password for the billing db: swordfish", "swordfish"),
        ("пароль от базы billing: рыба-меч", "рыба-меч"),
        ("api key: 9dk3Lq7mZ2", "9dk3Lq7mZ2"),
        ("The API key: plainword", "plainword"),
        ("secret key for prod = Zq8!mK2#pL", "Zq8!mK2#pL"),
        // Issue 61: a login pair, and the word for a password in other languages.
        ("login: admin / Xk29vLq8", "Xk29vLq8"),
        ("creds = deploy:Xk29vLq8 for the box", "Xk29vLq8"),
        ("Kennwort: Xk29vLq8", "Xk29vLq8"),
        ("Das Passwort für die Datenbank: hunter22", "hunter22"),
        ("mot de passe : soleil42", "soleil42"),
        ("contraseña: gato1234", "gato1234"),
        ("senha = cafe2024", "cafe2024"),
        ("the passcode is 482913", "482913"),
        // Found by an outside attack on those fixes.
        ("şifre: Ab12Cd39", "Ab12Cd39"),
        ("DB_PASS=Ab12Cd34", "Ab12Cd34"),
        ("SMTP_PASS: Ab12Cd35", "Ab12Cd35"),
        ("PGPASSWORD=Ee15ooPp", "Ee15ooPp"),
        ("PASSWORD := Uu66yyTt", "Uu66yyTt"),
        ("password：Qq11wwEe", "Qq11wwEe"),
        ("<password>Cc82vvBb</password>", "Cc82vvBb"),
        ("run it with --password Ll77kkJj please", "Ll77kkJj"),
        ("curl -u admin:Ww26uuIi https://x", "Ww26uuIi"),
        ("log in with password Rr37ttYy today", "Rr37ttYy"),
        ("the password should be Mm72nnBb", "Mm72nnBb"),
        ("PIN: 4821", "4821"),
    ];
    for (text, secret) in found {
        let redacted = redact(text);
        assert_eq!(redacted.credentials.len(), 1, "{text} -> {}", redacted.text);
        assert_eq!(redacted.credentials[0].0, credential_ref(secret), "the whole value: {text} -> {}", redacted.text);
        for part in secret.split(|c: char| !c.is_alphanumeric()).filter(|p| p.len() >= 4) {
            assert!(!redacted.text.contains(part), "{part:?} of {secret:?} survives: {}", redacted.text);
        }
        assert_eq!(redact(&redacted.text).text, redacted.text, "redaction is idempotent: {text}");
    }
    // Prose of the same shape is left alone, and so is a key word that is part of a path (issue 34: error messages
    // about `/etc/passwd` lost their words).
    for text in [
        "The token for staging is expired.",
        "The password policy is strict.",
        "Пароль от почты — другой.",
        r#"pointer "repo:/etc/passwd": path is outside the workspace root; refused"#,
        "repo:/etc/passwd: url pointers are not dereferenced",
        "read config/secret.yaml: no such file",
    ] {
        assert_eq!(redact(text).text, text);
    }
    // Stable across runs and machines: the blake3 of the secret, not a counter or a random key.
    assert_eq!(credential_ref("hunter2"), "credential_ref:credential:55dcd1221c66");
    assert_eq!(redact("api_key=hunter2").text, format!("api_key={}", credential_ref("hunter2")));
}

#[test]
fn ip_addresses_are_redacted_and_look_alikes_are_kept() {
    let text = "hosts 10.20.30.40, [2001:db8::8a2e:370:7334]:443, fe80::1 and ::ffff:192.0.2.1; at 12:30:45 on 00:1A:2B:3C:4D:5E";
    let redacted = redact(text);
    assert_eq!(
        redacted.text,
        "hosts [REDACTED_IP], [[REDACTED_IP]]:443, [REDACTED_IP] and [REDACTED_IP]; at 12:30:45 on 00:1A:2B:3C:4D:5E"
    );
    assert_eq!(redacted.n_ips, 4);
    // Glued to a Cyrillic word an address is still an address (ASCII word boundaries for ASCII shapes).
    assert_eq!(redact("адрес:10.1.2.3,порт").text, "адрес:[REDACTED_IP],порт");
    assert_eq!(redact("ключAKIAIOSFODNN7EXAMPLE").text, format!("ключ{}", credential_ref("AKIAIOSFODNN7EXAMPLE")));
    // Paths in code parse as addresses (`::ca`, `::f`) but are glued to words: kept (found by `lessrt serve`,
    // which shows workspace sources redacted).
    let code = "let outcome = pricing::capture_payment(&mut order)?; std::fs::read(path); x = ::1;";
    assert_eq!(
        redact(code).text,
        "let outcome = pricing::capture_payment(&mut order)?; std::fs::read(path); x = [REDACTED_IP];"
    );
}

#[test]
fn a_secret_found_once_is_redacted_wherever_it_recurs_in_the_cold_history() {
    // Lowercase and digits: no shape detector knows it; only the key/value pair of #2 does.
    let messages = conversation(
        &["The vault code hunter2hunter2x opens the safe.", "api_key=hunter2hunter2x", "Said twice: hunter2hunter2x"],
        6,
    );
    let output = compact_default(&messages);
    assert!(output.iter().all(|m| !m.content.contains("hunter2hunter2x")));
    let reference = credential_ref("hunter2hunter2x");
    assert_eq!(
        ledger_section(ledger_of(&output), "Credential refs"),
        vec![format!("- {reference} (key/value secret; #1, 3 mentions)")]
    );
}

#[test]
fn the_hot_tail_is_never_redacted() {
    let mut messages = conversation(&["api_key=Q7fK2mZp9LxW3vB8"], 0);
    messages.push(user("my new api_key=Q7fK2mZp9LxW3vB8 at 10.0.0.1"));
    let output = compact_default(&messages);
    assert_eq!(output.last(), messages.last());
    assert!(!ledger_of(&output).contains("Q7fK2mZp9LxW3vB8"));
}

#[test]
fn a_panicking_or_failing_engine_fails_closed_with_the_original_messages() {
    let messages = conversation(&["The deploy target is alpha-01.", "api_key=Q7fK2mZp9LxW3vB8"], 6);
    let config = CompactConfig::default();
    let panicked = compact_with(&messages, &config, |_, _| panic!("extraction blew up"));
    assert_eq!(panicked.messages, messages);
    assert!(panicked.warning.as_deref().is_some_and(|w| w.contains("extraction blew up")), "{panicked:?}");
    let failed = compact_with(&messages, &config, |_, _| Err("no ledger today".to_owned()));
    assert_eq!(failed.messages, messages);
    assert!(failed.warning.as_deref().is_some_and(|w| w.contains("no ledger today")));
    // An engine whose output would alter the hot tail is refused too.
    let tampered = compact_with(&messages, &config, |m, _| {
        let mut out = m.to_vec();
        if let Some(last) = out.last_mut() {
            last.content.push('!');
        }
        Ok(out)
    });
    assert_eq!(tampered.messages, messages);
    assert!(tampered.warning.as_deref().is_some_and(|w| w.contains("hot tail")));
    let two_ledgers = compact_with(&messages, &config, |m, c| {
        let mut out = compact(m, c);
        out.insert(0, out[1].clone());
        Ok(out)
    });
    assert_eq!(two_ledgers.messages, messages);
}

#[test]
fn a_continued_conversation_keeps_every_entry_of_the_first_ledger() {
    let first = conversation(
        &[
            "The deploy target is alpha-01.",
            "Decision: use PostgreSQL for storage.",
            "TODO: rotate the staging API keys.",
            "Open question: who owns the backup rotation?",
            "api_key=Q7fK2mZp9LxW3vB8",
            "The deploy target is now beta-02.",
        ],
        6,
    );
    let once = compact_default(&first);
    let mut continued = once.clone();
    continued.extend(
        [
            "The region is eu-west-1.",
            "Decision changed: use SQLite instead of PostgreSQL.",
            "Done: rotated the staging API keys.",
        ]
        .map(user),
    );
    continued.extend((0..6).map(|i| assistant(&format!("later {i}"))));
    let again = compact_default(&continued);
    let ledger = ledger_of(&again);
    // Messages after the first ledger are numbered on from its tail: #7..#12 were its tail, so the new cold
    // messages are #13, #14 and #15.
    assert!(ledger.contains("Compacted: 15 messages (#1-#15)."), "{ledger}");
    assert!(ledger_section(ledger, "Active facts").contains(&"- deploy target: beta-02 (#6)"));
    assert!(ledger_section(ledger, "Active facts").contains(&"- region: eu-west-1 (#13)"));
    assert!(ledger_section(ledger, "Superseded facts").contains(&"- deploy target: alpha-01 (#1, superseded by #6)"));
    assert!(
        ledger_section(ledger, "Decisions")
            .contains(&"- [superseded] use PostgreSQL for storage (#2, superseded by #14)")
    );
    assert!(ledger_section(ledger, "Obligations").contains(&"- [done] rotate the staging API keys (#3, done #15)"));
    assert!(ledger_section(ledger, "Unresolved questions").contains(&"- who owns the backup rotation? (#4, user)"));
    let reference = credential_ref("Q7fK2mZp9LxW3vB8");
    assert!(ledger_section(ledger, "Credential refs").iter().any(|l| l.contains(&reference)));
}

#[test]
fn the_rule_table_has_english_and_russian_markers_for_every_act() {
    for act in [
        Act::Correction,
        Act::ObligationCancelled,
        Act::ObligationDone,
        Act::ObligationReopened,
        Act::Obligation,
        Act::DecisionChanged,
        Act::DecisionContrast,
        Act::DecisionReplaces,
        Act::Decision,
        Act::Answer,
        Act::Question,
        Act::Fact,
        Act::Commitment,
        Act::Choice,
        Act::Hedge,
        Act::Retraction,
        Act::Acknowledgement,
        Act::Forget,
        Act::Earlier,
    ] {
        for lang in [Lang::En, Lang::Ru] {
            assert!(RULES.iter().any(|r| r.act == act && r.lang == lang), "{act:?} has no {lang:?} rule");
        }
    }
    // Compiling the table is lazy; force it so a bad pattern fails here, by name.
    for rule in RULES {
        assert!(regex::Regex::new(rule.pattern).is_ok(), "{}", rule.pattern);
        assert!(!rule.keys.is_empty() && rule.keys.iter().all(|k| *k == k.to_lowercase()), "{:?}", rule.keys);
    }
}

#[test]
fn the_key_prefilter_never_hides_a_match() {
    // Every clause of the suite, and the markers with odd casing: wherever a rule's pattern matches, one of its keys
    // is in the lowercased clause, so the prefilter only skips work.
    let mut suite = less_eval::context::suite();
    let paraphrase = less_eval::context::paraphrase_suite();
    suite.extend(paraphrase.dev);
    suite.extend(paraphrase.held_out);
    let extra = ["TODO: X", "Поправка: Y — Z", "ОТМЕНА: продлить домен", "We DECIDED to go", "Is it ready now?"];
    // The suite's messages are `less-eval`'s copy of `ChatMessage`: only their text is used.
    let clauses = suite
        .iter()
        .flat_map(|s| s.messages.iter().map(|m| m.content.as_str()))
        .chain(extra)
        .flat_map(extract::clauses);
    for clause in clauses {
        let lower = clause.to_lowercase();
        for (idx, rule) in RULES.iter().enumerate() {
            if rules::regex(idx).is_match(clause) {
                assert!(rule.keys.iter().any(|k| lower.contains(k)), "rule {idx} matches {clause:?} without a key");
            }
        }
    }
}

#[test]
fn transcripts_parse_from_json_arrays_and_jsonl_and_refuse_other_shapes() {
    let array = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#;
    let jsonl = "{\"role\":\"user\",\"content\":\"hi\"}\n\n{\"role\":\"assistant\",\"content\":\"hello\"}\n";
    assert_eq!(parse_transcript(array), parse_transcript(jsonl));
    assert_eq!(parse_transcript(array).map(|m| m.len()), Ok(2));
    let refused = |text: &str| parse_transcript(text).expect_err(text);
    assert_eq!(refused("").code, ErrorCode::TranscriptInvalid);
    assert_eq!(refused("[{\"role\":").code, ErrorCode::JsonMalformed);
    assert!(refused("{\"role\":\"user\",\"content\":\"a\"}\nnot json").message.starts_with("line 2:"));
    assert_eq!(refused("{\"a\":1}").path, "/0/role");
    assert_eq!(refused(r#"[{"role":"user","content":null}]"#).path, "/0/content");
    assert_eq!(refused(r#"[{"role":"wizard","content":"x"}]"#).path, "/0/role");
    assert_eq!(refused(r#"{"messages":[]}"#).path, "/0/role");
    assert_eq!(refused("[1]").path, "/0");
}

#[test]
fn the_hot_tail_baseline_keeps_only_system_messages_and_the_tail() {
    let messages = conversation(&["The deploy target is alpha-01.", "api_key=Q7fK2mZp9LxW3vB8"], 3);
    let config = CompactConfig { hot_tail: 3, engine: Engine::HotTail, ..CompactConfig::default() };
    let output = compact(&messages, &config);
    assert_eq!(output.len(), 4);
    assert_eq!(output[0], messages[0]);
    assert_eq!(&output[1..], &messages[3..]);
}

#[test]
fn the_truncation_baseline_keeps_whole_messages_within_its_budget_and_says_what_it_dropped() {
    let cold: Vec<String> =
        (0..200).map(|i| format!("Message number {i} talks about the weather at length.")).collect();
    let cold: Vec<&str> = cold.iter().map(String::as_str).collect();
    let messages = conversation(&cold, 6);
    let config = CompactConfig { engine: Engine::Truncate, budget_tokens: 300, ..CompactConfig::default() };
    let output = compact(&messages, &config);
    let counter = TokenCounter::shared(config.encoding);
    let kept: Vec<&ChatMessage> = output[1..output.len() - 6].iter().filter(|m| !m.is_system()).collect();
    let tokens: u32 = kept.iter().map(|m| counter.count(&m.content)).sum();
    assert!(tokens <= 300 && tokens > 200, "{tokens}");
    assert!(kept.iter().all(|m| messages.contains(m)), "whole messages only");
    assert_eq!(kept[0], &messages[1], "the head is kept");
    let note = output.iter().find(|m| m.content.starts_with("[context truncated:")).expect("a note");
    assert!(note.content.contains("messages (#"), "{}", note.content);
    assert_eq!(&output[output.len() - 6..], &messages[messages.len() - 6..]);
}

#[test]
fn a_chat_is_never_made_larger() {
    // docs/context-ledger.md's short chat: its ledger (headers, reading rules, retrieval notes) costs more than the messages.
    let messages = conversation(&["The deploy target is alpha-01.", "Decision: use PostgreSQL for storage."], 2);
    let compaction = compact_report(&messages, &CompactConfig { hot_tail: 2, ..CompactConfig::default() });
    assert_eq!(compaction.messages, messages, "returned unchanged");
    assert_eq!(compaction.warning, None, "not a failure");
    let note = compaction.note.expect("a note says why");
    assert!(note.contains("tokens") && note.contains("unchanged"), "{note}");
    // Asked to keep it anyway (to export the entries as engrams), the ledger comes back.
    let config = CompactConfig { hot_tail: 2, keep_if_larger: true, ..CompactConfig::default() };
    let kept = compact_report(&messages, &config);
    assert!(kept.note.is_none());
    assert!(ledger_of(&kept.messages).contains("deploy target: alpha-01"));
    // A long chat is compacted as before, without a note.
    let long = conversation(&["The deploy target is alpha-01."; 50], 6);
    let compaction = compact_report(&long, &CompactConfig::default());
    assert!(compaction.note.is_none() && compaction.messages.len() < long.len());
}

#[test]
fn engines_and_stats_report_what_they_did() {
    assert_eq!("hot-tail".parse::<Engine>(), Ok(Engine::HotTail));
    assert!("summary".parse::<Engine>().is_err());
    let messages = conversation(&["The deploy target is alpha-01."; 50], 6);
    let output = compact_default(&messages);
    let stats = compact_stats(&messages, &output, &CompactConfig::default());
    assert_eq!((stats.messages_in, stats.messages_out), (57, 8));
    assert!(stats.tokens_out < stats.tokens_in, "{stats:?}");
    assert!(stats.hot_tail_unchanged);
}

/// One planted secret: the text to plant and the raw strings that must not survive.
fn secret_shape() -> impl Strategy<Value = (String, Vec<String>)> {
    let alnum =
        |n: std::ops::RangeInclusive<usize>| proptest::collection::vec(proptest::sample::select(ALNUM.to_vec()), n);
    let word = |v: Vec<char>| v.into_iter().collect::<String>();
    prop_oneof![
        alnum(12..=24).prop_map(move |v| {
            let s = format!("Q{}", word(v));
            (format!("api_key={s}"), vec![s])
        }),
        alnum(8..=16).prop_map(move |v| {
            let s = format!("p{}9", word(v));
            (format!("password: {s}"), vec![s])
        }),
        proptest::collection::vec(proptest::sample::select(HEX.to_vec()), 16..=32).prop_map(move |v| {
            let s = word(v);
            (format!("token={s}"), vec![s])
        }),
        alnum(16..=40).prop_map(move |v| {
            let s = word(v);
            (format!("Authorization: Bearer {s}"), vec![s])
        }),
        alnum(20..=40).prop_map(move |v| {
            let s = format!("sk-{}", word(v));
            (s.clone(), vec![s])
        }),
        alnum(36..=36).prop_map(move |v| {
            let s = format!("ghp_{}", word(v));
            (s.clone(), vec![s])
        }),
        proptest::collection::vec(proptest::sample::select(UPPER_DIGIT.to_vec()), 16..=16).prop_map(move |v| {
            let s = format!("AKIA{}", word(v));
            (s.clone(), vec![s])
        }),
        alnum(12..=24).prop_map(move |v| {
            let s = format!("xoxb-123456789012-{}", word(v));
            (s.clone(), vec![s])
        }),
        (alnum(10..=30), alnum(10..=30), alnum(10..=30)).prop_map(move |(a, b, c)| {
            let s = format!("eyJ{}.eyJ{}.{}", word(a), word(b), word(c));
            (s.clone(), vec![s])
        }),
        alnum(24..=48).prop_map(move |v| {
            let body = word(v);
            (format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"), vec![body])
        }),
        alnum(40..=60).prop_map(move |v| {
            let s = format!("Aa1{}", word(v));
            (s.clone(), vec![s])
        }),
        proptest::collection::vec(proptest::sample::select(HEX.to_vec()), 32..=64).prop_map(move |v| {
            let s = word(v);
            (s.clone(), vec![s])
        }),
        (alnum(4..=10), alnum(8..=16)).prop_map(move |(u, p)| {
            let (u, p) = (format!("u{}", word(u)), format!("P{}", word(p)));
            (format!("postgres://{u}:{p}@db.internal:5432/app"), vec![format!("{u}:{p}"), p])
        }),
        any::<u32>().prop_map(|ip| {
            let s = std::net::Ipv4Addr::from(ip).to_string();
            (s.clone(), vec![s])
        }),
        any::<u128>().prop_map(|ip| {
            let s = std::net::Ipv6Addr::from(ip).to_string();
            (s.clone(), vec![s])
        }),
    ]
}

const ALNUM: [char; 62] = [
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w',
    'x', 'y', 'z', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R', 'S', 'T',
    'U', 'V', 'W', 'X', 'Y', 'Z', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
];
const HEX: [char; 16] = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'];
const UPPER_DIGIT: [char; 36] = [
    'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R', 'S', 'T', 'U', 'V', 'W',
    'X', 'Y', 'Z', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
];

const SENTENCES: [&str; 10] = [
    "The deploy target is alpha-01.",
    "TODO: rotate the keys.",
    "Decision: use PostgreSQL for storage.",
    "What is the staging host?",
    "Looks good to me.",
    "Сервер деплоя — beta-02.",
    "Надо обновить сертификаты.",
    "Decision changed: use SQLite instead of PostgreSQL.",
    "Done: rotated the keys.",
    "The weather is nice today.",
];

/// A conversation of filler with secrets planted in its messages (cold and hot), and the raw secrets.
fn planted_conversation() -> impl Strategy<Value = (Vec<ChatMessage>, Vec<String>, usize)> {
    let message = (
        proptest::sample::select(SENTENCES.to_vec()),
        proptest::option::weighted(0.5, secret_shape()),
        proptest::sample::select(vec![" ", ". ", ", ", "\n"]),
        any::<bool>(),
    );
    (proptest::collection::vec(message, 1..40), 0usize..8).prop_map(|(parts, hot_tail)| {
        let mut messages = vec![ChatMessage::new("system", "Operator instructions.")];
        let mut secrets = Vec::new();
        for (sentence, secret, separator, is_user) in parts {
            let mut content = sentence.to_owned();
            if let Some((text, raws)) = secret {
                content = format!("{content}{separator}{text}{separator}{sentence}");
                secrets.push(raws);
            }
            messages.push(ChatMessage::new(if is_user { "user" } else { "assistant" }, content));
        }
        (messages, secrets.into_iter().flatten().collect(), hot_tail)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No raw secret or IP survives outside the hot tail; the tail is byte-identical; the output is deterministic
    /// and compacting it again changes nothing.
    #[test]
    fn planted_secrets_never_survive_and_compaction_is_deterministic_and_idempotent(
        (messages, secrets, hot_tail) in planted_conversation()
    ) {
        let config = CompactConfig { hot_tail, keep_if_larger: true, ..CompactConfig::default() };
        let compaction = compact_report(&messages, &config);
        prop_assert_eq!(&compaction.warning, &None);
        let output = compaction.messages;
        let non_system: Vec<&ChatMessage> = messages.iter().filter(|m| !m.is_system()).collect();
        let tail: Vec<ChatMessage> = non_system[non_system.len().saturating_sub(hot_tail)..].iter().map(|m| (*m).clone()).collect();
        prop_assert!(output.ends_with(&tail), "the hot tail is byte-identical");
        let outside_tail = &output[..output.len() - tail.len()];
        for message in outside_tail.iter().filter(|m| !messages[..1].contains(m)) {
            for secret in &secrets {
                prop_assert!(!message.content.contains(secret.as_str()), "{} leaked in:\n{}", secret, message.content);
            }
        }
        prop_assert_eq!(&compact(&messages, &config), &output, "same input, same bytes");
        prop_assert_eq!(&compact(&output, &config), &output, "idempotent");
    }

    /// Whatever the engine, the output never has more tokens than the input: a compaction that would is dropped
    /// and the input comes back byte for byte, with a note.
    #[test]
    fn compaction_never_returns_more_tokens_than_it_was_given(
        (messages, _, hot_tail) in planted_conversation(),
        engine in prop::sample::select(Engine::ALL.to_vec()),
    ) {
        let config = CompactConfig { hot_tail, engine, budget_tokens: 200, ..CompactConfig::default() };
        let compaction = compact_report(&messages, &config);
        let stats = compact_stats(&messages, &compaction.messages, &config);
        prop_assert!(stats.tokens_out <= stats.tokens_in, "{:?}", stats);
        if compaction.note.is_some() {
            prop_assert_eq!(&compaction.messages, &messages);
        }
    }

    /// Redaction is idempotent and never grows a reference out of a reference.
    #[test]
    fn redaction_is_idempotent((text, _) in secret_shape()) {
        let once = redact(&text);
        prop_assert_eq!(&redact(&once.text).text, &once.text);
    }
}

#[test]
fn ledger_entries_become_valid_engrams_citing_their_messages() {
    let messages = conversation(
        &[
            "The deploy target is alpha-01.",
            "Correction: the deploy target is beta-02.",
            "Decision: use PostgreSQL for storage.",
            "TODO: rotate the staging API keys.",
            "Open question: who owns the backup rotation?",
            "Done: nothing that matches.",
        ],
        6,
    );
    let output = compact_default(&messages);
    let engrams = ledger_engrams(ledger_of(&output), "Chat #42", "operator", "2026-01-01T00:00:00Z").expect("valid");
    let claims: Vec<(String, String, Vec<String>)> = engrams
        .iter()
        .map(|e| (format!("{:?}", e.kind), e.pointers[0].to_string(), e.tags.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        claims,
        vec![
            (
                "Fact".to_owned(),
                "sam:chat-42:2".to_owned(),
                vec![LEDGER_TAG.to_owned(), "subject:deploy-target".to_owned(), "correction".to_owned()]
            ),
            ("Decision".to_owned(), "sam:chat-42:3".to_owned(), vec![LEDGER_TAG.to_owned()]),
            ("Todo".to_owned(), "sam:chat-42:4".to_owned(), vec![LEDGER_TAG.to_owned()]),
            ("Todo".to_owned(), "sam:chat-42:5".to_owned(), vec![LEDGER_TAG.to_owned(), "question".to_owned()]),
        ]
    );
    assert_eq!(engrams[0].claim, "deploy target: beta-02");
    assert!(ledger_engrams("not a ledger", "c", "operator", "2026-01-01T00:00:00Z").expect("ok").is_empty());
}
