//! The enforcement core's tests: its pure parts (the meter, the grant book, patterns), then one table of cases run
//! against both of its adapters, a run's gateway (grants in a [`GrantBook`], the turn's meter, a resolver over the
//! workspace) and the MCP desk (a real [`Desk`] over a temporary store). Both must answer each case with the same
//! code and the same message; refusals decided before reading name files that do not exist, so a side that read
//! first would answer `LESS_POINTER_UNRESOLVED` instead.

use std::collections::HashMap;

use less_contract::{Budget, ErrorCode, Grant, GrantSpec, GrantTerms, Pointer, PointerType, Violation};

use super::*;
use crate::desk::{Desk, DeskConfig, NewGrant};
use crate::resolver::{Resolver, SamSource};

fn terms(grantee: &str, patterns: &[&str], uses: u32, expires_at: &str) -> GrantTerms {
    GrantTerms {
        grant_id: "g".into(),
        issuer: "lead".into(),
        grantee: grantee.into(),
        patterns: patterns.iter().map(|p| (*p).to_owned()).collect(),
        max_derefs: 3,
        max_tokens: 500,
        inline_code_tokens: 0,
        expires_at: expires_at.into(),
        uses,
    }
}

fn pointer(text: &str) -> Pointer {
    Pointer::parse(text).expect("pointer")
}

const FUTURE: &str = "2999-01-01T00:00:00Z";
const PAST: &str = "2000-01-01T00:00:00Z";

fn glob_matches(pattern: &str, text: &str) -> bool {
    glob_regex(pattern).is_some_and(|glob| glob.is_match(text))
}

#[test]
fn the_meter_admits_up_to_each_cap_and_no_further() {
    let budget =
        Budget { max_repo_spans: 2, max_artifact_sections: 1, max_deref_tokens_total: 100, ..Budget::default() };
    let meter = DerefMeter::default();
    let after = meter.admit(&budget, &[(PointerType::Repo, 40), (PointerType::Test, 40)]).expect("two spans fit");
    assert_eq!((after.repo_spans, after.tokens), (2, 80));
    assert!(after.admit(&budget, &[(PointerType::Repo, 1)]).is_none(), "a third span does not");
    assert!(after.admit(&budget, &[(PointerType::Artifact, 21)]).is_none(), "101 tokens do not");
    assert!(after.admit(&budget, &[(PointerType::Artifact, 20)]).is_some());
    assert!(meter.admit(&budget, &[(PointerType::Sam, 1), (PointerType::Sam, 1), (PointerType::Sam, 1)]).is_none());
}

#[test]
fn the_grant_book_checks_every_term() {
    let secret = [3u8; 32];
    let now = time::OffsetDateTime::now_utc();
    let mut book = GrantBook::default();
    let forged = {
        let mut g = Grant::issue(terms("dev", &["repo:src/**"], 1, FUTURE), &secret);
        g.terms.max_tokens = 10_000;
        g
    };
    assert_eq!(book.accept(forged, "dev", &secret, true).expect_err("forged").code, ErrorCode::GrantInvalid);
    let other_run = Grant::issue(terms("dev", &["repo:src/**"], 1, FUTURE), &[4u8; 32]);
    assert_eq!(book.accept(other_run, "dev", &secret, true).expect_err("other run").code, ErrorCode::GrantInvalid);
    let misdirected = Grant::issue(terms("peer", &["repo:src/**"], 1, FUTURE), &secret);
    assert_eq!(book.accept(misdirected, "dev", &secret, true).expect_err("not mine").code, ErrorCode::GrantInvalid);
    let from_a_stranger = Grant::issue(terms("dev", &["repo:src/**"], 1, FUTURE), &secret);
    assert_eq!(
        book.accept(from_a_stranger, "dev", &secret, false).expect_err("not an ancestor").code,
        ErrorCode::GrantInvalid
    );

    let valid = Grant::issue(terms("dev", &["repo:src/**"], 1, FUTURE), &secret);
    book.accept(valid.clone(), "dev", &secret, true).expect("valid grant");
    let again = book.accept(valid, "dev", &secret, true).expect_err("a grant is delivered once");
    assert_eq!(again.code, ErrorCode::GrantInvalid);
    let items = [(pointer("repo:src/a.rs#L1-L9"), 100), (pointer("repo:src/deep/b.rs"), 100)];
    let outside = [(pointer("repo:docs/x.md"), 10)];
    let code = |r: Result<(), Violation>| r.expect_err("refused").code;
    assert_eq!(code(spend_on_deref(&mut book, "g", "dev", &outside, now)), ErrorCode::DerefDenied);
    let too_big = [(pointer("repo:src/a.rs"), 501)];
    assert_eq!(code(spend_on_deref(&mut book, "g", "dev", &too_big, now)), ErrorCode::DerefDenied);
    assert_eq!(code(spend_on_deref(&mut book, "g", "peer", &items, now)), ErrorCode::GrantInvalid);
    assert_eq!(book.left("g"), Some(GrantLeft { uses: 1, derefs: 3, tokens: 500 }), "refusals spend nothing");
    spend_on_deref(&mut book, "g", "dev", &items, now).expect("covered");
    assert_eq!(book.left("g"), Some(GrantLeft { uses: 0, derefs: 1, tokens: 300 }));
    assert_eq!(code(spend_on_deref(&mut book, "g", "dev", &items, now)), ErrorCode::GrantInvalid);
    assert_eq!(code(spend_on_deref(&mut book, "nope", "dev", &items, now)), ErrorCode::GrantInvalid);

    let mut book = GrantBook::default();
    book.accept(Grant::issue(terms("dev", &["repo:src/*.rs"], 5, PAST), &secret), "dev", &secret, true)
        .expect("accepted");
    assert_eq!(code(spend_on_deref(&mut book, "g", "dev", &items[..1], now)), ErrorCode::GrantInvalid);
}

#[test]
fn single_star_stays_within_a_path_segment() {
    assert!(glob_matches("repo:src/*.rs*", "repo:src/a.rs#L1-L2"));
    assert!(!glob_matches("repo:src/*.rs", "repo:src/deep/a.rs"));
    assert!(glob_matches("repo:src/**", "repo:src/deep/a.rs#L1@abc"));
    assert!(glob_matches("test:billing::*", "test:billing::capture_is_idempotent"));
    assert!(glob_matches("diff:main..pr-142#**", "diff:main..pr-142#src/bucket.rs"));
    assert!(!glob_matches("diff:main..pr-142#*", "diff:main..pr-142#src/bucket.rs"));
    assert!(glob_matches("repo:src/?.rs", "repo:src/a.rs"));
    assert!(!glob_matches("repo:src/a.rs", "repo:src/a.rsx"));
    assert!(!glob_matches("repo:docs/**", "repo:src/a.rs"));
    // Regex metacharacters in a pattern are themselves.
    assert!(glob_matches("artifact:docs/A (v2).md#sec=Plans [2026]", "artifact:docs/A (v2).md#sec=Plans [2026]"));
    assert!(!glob_matches("repo:src/a.rs", "repo:src/aXrs"));
    assert!(!glob_matches("repo:src/.*", "repo:src/a.rs"));
    // Stars that would make a backtracking matcher exponential are answered at once.
    let stars = "repo:".to_owned() + &"**a".repeat(40) + "b";
    assert!(!glob_matches(&stars, &("repo:".to_owned() + &"a".repeat(200))));
}

// The shared suite.

/// The hierarchy of the suite, as the desk's configuration: lead above mgr above dev; mgr (and dev below it) reach
/// `repo:src/**` only; dev's turn holds two repo spans and 40 tokens.
const CONFIG: &str = r#"
[clients.lead]
role = "lead"
[clients.mgr]
role = "mgr"
parent = "lead"
reach = ["repo:src/**"]
[clients.dev]
role = "dev"
parent = "mgr"
[clients.dev.budget]
max_repo_spans = 2
max_deref_tokens_total = 40
"#;

/// The workspace of the suite: two files within dev's reach, one outside it.
fn workspace(dir: &std::path::Path) -> std::path::PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::create_dir_all(ws.join("docs")).expect("mkdir");
    std::fs::write(ws.join("src/short.rs"), "fn a() {}\n").expect("write");
    let long: String = (1..=60).map(|i| format!("fn f{i}() -> u32 {{ {i} }}\n")).collect();
    std::fs::write(ws.join("src/long.rs"), long).expect("write");
    std::fs::write(ws.join("docs/notes.md"), "# Notes\n\nThe cache is cleared on capture.\n").expect("write");
    ws
}

/// A grant a case starts from, signed with the side's key.
struct Gift {
    id: &'static str,
    issuer: &'static str,
    to: &'static str,
    patterns: &'static [&'static str],
    uses: u32,
    max_tokens: u32,
    expires_at: &'static str,
    /// Altered after signing (its uses raised).
    forged: bool,
}

const GIFT: Gift = Gift {
    id: "g-1",
    issuer: "mgr",
    to: "dev",
    patterns: &["repo:docs/**"],
    uses: 1,
    max_tokens: 4000,
    expires_at: FUTURE,
    forged: false,
};

impl Gift {
    fn terms(&self) -> GrantTerms {
        GrantTerms {
            grant_id: self.id.into(),
            issuer: self.issuer.into(),
            grantee: self.to.into(),
            patterns: self.patterns.iter().map(|p| (*p).to_owned()).collect(),
            max_derefs: 3,
            max_tokens: self.max_tokens,
            inline_code_tokens: 0,
            expires_at: self.expires_at.into(),
            uses: self.uses,
        }
    }
}

/// One step of a case.
enum Step {
    /// `who` dereferences `pointers`, presenting `grant`.
    Deref(&'static str, &'static [&'static str], Option<&'static str>),
    /// `issuer` grants `to` these patterns, once, for at most `max_tokens` tokens, for an hour.
    Issue(&'static str, &'static str, &'static [&'static str], u32),
}

/// What a case ends in: every step allowed, or the first refusal with this code and a message containing this.
type Expect = Result<(), (ErrorCode, &'static str)>;

struct Case {
    name: &'static str,
    gifts: &'static [Gift],
    steps: &'static [Step],
    expect: Expect,
}

use Step::{Deref, Issue};

const CASES: &[Case] = &[
    Case {
        name: "within budget",
        gifts: &[],
        steps: &[Deref("dev", &["repo:src/short.rs#L1-L1"], None)],
        expect: Ok(()),
    },
    Case {
        name: "over the deref count, refused before reading",
        gifts: &[],
        steps: &[Deref("dev", &["repo:src/missing.rs#L1-L1", "repo:src/missing.rs#L2-L2", "repo:src/gone.rs"], None)],
        expect: Err((
            ErrorCode::DerefDenied,
            "3 pointers exceed this turn's deref budget (used: repo 0/2, artifact 0/2, sam 0/2) and no grant was \
             presented",
        )),
    },
    Case {
        name: "over the deref count, counting what the turn read before",
        gifts: &[],
        steps: &[
            Deref("dev", &["repo:src/short.rs#L1-L1"], None),
            Deref("dev", &["repo:src/missing.rs#L1-L1", "repo:src/missing.rs#L2-L2"], None),
        ],
        expect: Err((ErrorCode::DerefDenied, "2 pointers exceed this turn's deref budget (used: repo 1/2,")),
    },
    Case {
        name: "over the token budget, refused after counting what was read",
        gifts: &[],
        steps: &[Deref("dev", &["repo:src/long.rs#L1-L40"], None)],
        expect: Err((
            ErrorCode::DerefDenied,
            "tokens exceed this turn's deref budget (used: repo 0/2, artifact 0/2, sam 0/2, tokens 0/40) and no \
             grant was presented",
        )),
    },
    Case {
        name: "outside reach, refused before reading",
        gifts: &[],
        steps: &[Deref("dev", &["repo:docs/missing.md#L1-L1"], None)],
        expect: Err((
            ErrorCode::DerefDenied,
            "repo:docs/missing.md#L1-L1 is outside what dev may read without a grant (repo:src/**): ask the parent \
             for a grant that covers it",
        )),
    },
    Case {
        name: "a grant covers what is outside reach",
        gifts: &[GIFT],
        steps: &[Deref("dev", &["repo:docs/notes.md#L1-L3"], Some("g-1"))],
        expect: Ok(()),
    },
    Case {
        name: "a grant covers what the budget does not",
        gifts: &[Gift { patterns: &["repo:src/long.rs"], ..GIFT }],
        steps: &[Deref("dev", &["repo:src/long.rs#L1-L40"], Some("g-1"))],
        expect: Ok(()),
    },
    Case {
        name: "a grant does not cover, refused before reading",
        gifts: &[Gift { patterns: &["repo:docs/notes.md"], ..GIFT }],
        steps: &[Deref("dev", &["repo:docs/missing.md#L1-L1"], Some("g-1"))],
        expect: Err((ErrorCode::DerefDenied, "grant g-1 does not cover repo:docs/missing.md#L1-L1")),
    },
    Case {
        name: "a grant with too few tokens left",
        gifts: &[Gift { patterns: &["repo:src/long.rs"], max_tokens: 50, ..GIFT }],
        steps: &[Deref("dev", &["repo:src/long.rs#L1-L40"], Some("g-1"))],
        expect: Err((ErrorCode::DerefDenied, "grant g-1 has 3 derefs and 50 tokens left; the request needs 1 and ")),
    },
    Case {
        name: "a grant expired, refused before reading",
        gifts: &[Gift { expires_at: PAST, ..GIFT }],
        steps: &[Deref("dev", &["repo:docs/missing.md#L1-L1"], Some("g-1"))],
        expect: Err((ErrorCode::GrantInvalid, "grant g-1: expired at 2000-01-01T00:00:00Z")),
    },
    Case {
        name: "a grant whose uses are spent, refused before reading",
        gifts: &[GIFT],
        steps: &[
            Deref("dev", &["repo:docs/notes.md#L1-L3"], Some("g-1")),
            Deref("dev", &["repo:docs/missing.md#L1-L1"], Some("g-1")),
        ],
        expect: Err((ErrorCode::GrantInvalid, "grant g-1: no uses left")),
    },
    Case {
        name: "a forged grant",
        gifts: &[Gift { forged: true, ..GIFT }],
        steps: &[Deref("dev", &["repo:docs/missing.md#L1-L1"], Some("g-1"))],
        expect: Err((ErrorCode::GrantInvalid, "grant \"g-1\" was not issued by this run or was altered")),
    },
    Case {
        name: "a grant never issued",
        gifts: &[],
        steps: &[Deref("dev", &["repo:docs/missing.md#L1-L1"], Some("g-never"))],
        expect: Err((
            ErrorCode::GrantInvalid,
            "grant g-never: dev holds no such grant (grants cannot be shared or forged)",
        )),
    },
    Case {
        name: "another's grant",
        gifts: &[Gift { issuer: "lead", to: "mgr", ..GIFT }],
        steps: &[Deref("dev", &["repo:docs/missing.md#L1-L1"], Some("g-1"))],
        expect: Err((ErrorCode::GrantInvalid, "grant g-1: dev holds no such grant")),
    },
    Case {
        name: "a narrower pass-on of what the issuer reaches",
        gifts: &[],
        steps: &[Issue("mgr", "dev", &["repo:src/a.rs"], 1000)],
        expect: Ok(()),
    },
    Case {
        name: "a narrower pass-on of a grant the issuer holds",
        gifts: &[Gift { issuer: "lead", to: "mgr", uses: 3, ..GIFT }],
        steps: &[Issue("mgr", "dev", &["repo:docs/notes.md"], 1000)],
        expect: Ok(()),
    },
    Case {
        name: "a pass-on wider than the issuer holds",
        gifts: &[Gift { issuer: "lead", to: "mgr", uses: 3, ..GIFT }],
        steps: &[Issue("mgr", "dev", &["repo:**"], 1000)],
        expect: Err((
            ErrorCode::GrantInvalid,
            "grant G: repo:** is wider than mgr holds (it reads repo:src/** without a grant, and no grant it holds \
             covers this one's pattern, uses, derefs, tokens and lifetime): an agent grants only what it may read \
             itself",
        )),
    },
    Case {
        name: "a pass-on of more tokens than the held grant has left",
        gifts: &[Gift { issuer: "lead", to: "mgr", uses: 3, max_tokens: 500, ..GIFT }],
        steps: &[Issue("mgr", "dev", &["repo:docs/notes.md"], 1000)],
        expect: Err((ErrorCode::GrantInvalid, "grant G: repo:docs/notes.md is wider than mgr holds")),
    },
    Case {
        name: "a grant to a non-descendant",
        gifts: &[],
        steps: &[Issue("dev", "mgr", &["repo:src/a.rs"], 1000)],
        expect: Err((ErrorCode::GrantInvalid, "grant G: dev may only grant to its descendants, not mgr")),
    },
];

/// One adapter of the core, driven by the cases.
trait Side {
    /// Gives a grant as this side keeps one it accepted.
    fn give(&mut self, gift: &Gift) -> Result<(), Violation>;
    /// A deref; the tokens read.
    fn deref(&mut self, who: &str, pointers: &[&str], grant: Option<&str>) -> Result<u32, Violation>;
    /// A grant issued.
    fn issue(&mut self, issuer: &str, to: &str, patterns: &[&str], max_tokens: u32) -> Result<(), Violation>;
}

/// `sam:` pointers have nothing to read in the suite.
struct NoEpisodes;

impl SamSource for NoEpisodes {
    fn lookup(&self, _: &str, _: &str) -> Option<String> {
        None
    }
}

/// A run's side: each agent's grants in its gateway's [`GrantBook`], its turn in a [`DerefMeter`], reads by a
/// [`Resolver`] as the run's resolver actor reads, in the order `GatewayState::deref` and `issue_grant` take.
struct GatewaySide {
    secret: [u8; 32],
    resolver: Resolver,
    books: HashMap<String, GrantBook>,
    meters: HashMap<String, DerefMeter>,
    config: DeskConfig,
}

impl GatewaySide {
    fn new(ws: &std::path::Path) -> GatewaySide {
        GatewaySide {
            secret: [9u8; 32],
            resolver: Resolver::new(ws).expect("resolver"),
            books: HashMap::new(),
            meters: HashMap::new(),
            config: DeskConfig::from_toml(CONFIG).expect("config"),
        }
    }
}

impl Side for GatewaySide {
    fn give(&mut self, gift: &Gift) -> Result<(), Violation> {
        let mut grant = Grant::issue(gift.terms(), &self.secret);
        if gift.forged {
            grant.terms.uses += 10;
        }
        let is_ancestor = self.config.is_ancestor(gift.issuer, gift.to);
        self.books.entry(gift.to.to_owned()).or_default().accept(grant, gift.to, &self.secret, is_ancestor)
    }

    fn deref(&mut self, who: &str, pointers: &[&str], grant: Option<&str>) -> Result<u32, Violation> {
        let client = self.config.client(who);
        let reader = Reader { id: who, budget: &client.budget, reach: &client.reach };
        let pointers: Vec<Pointer> = pointers.iter().map(|p| pointer(p)).collect();
        let now = time::OffsetDateTime::now_utc();
        let book = self.books.entry(who.to_owned()).or_default();
        let meter = self.meters.entry(who.to_owned()).or_default();
        let plan = check_deref(&reader, meter, &pointers, |_| false, grant, book, now)?;
        let resolved = self.resolver.resolve_all(&pointers, &NoEpisodes)?;
        let counter = less_contract::TokenCounter::shared(less_contract::Encoding::default());
        let items: Vec<(Pointer, u32)> =
            resolved.iter().map(|r| (r.pointer.clone(), counter.count(&r.content))).collect();
        commit_deref(&plan, &reader, meter, &items, book, now)?;
        Ok(items.iter().map(|(_, n)| n).sum())
    }

    fn issue(&mut self, issuer: &str, to: &str, patterns: &[&str], max_tokens: u32) -> Result<(), Violation> {
        let spec = GrantSpec {
            id: "g-new".into(),
            to: to.into(),
            patterns: patterns.iter().map(|p| (*p).to_owned()).collect(),
            max_derefs: u32::try_from(patterns.len()).expect("few"),
            max_tokens,
            uses: 1,
            ttl: "PT1H".into(),
            inline_code_tokens: 0,
            tamper: false,
        };
        let now = time::OffsetDateTime::now_utc();
        let terms = spec.terms(issuer, now)?;
        let client = self.config.client(issuer);
        let book = self.books.entry(issuer.to_owned()).or_default();
        check_issue(&terms, self.config.is_ancestor(issuer, to), &client.reach, book, now)?;
        let is_ancestor = self.config.is_ancestor(issuer, to);
        let grant = Grant::issue(terms, &self.secret);
        self.books.entry(to.to_owned()).or_default().accept(grant, to, &self.secret, is_ancestor)
    }
}

/// The desk's side: a real desk over a temporary store, its grants in SQLite.
struct DeskSide {
    desk: Desk,
}

impl Side for DeskSide {
    fn give(&mut self, gift: &Gift) -> Result<(), Violation> {
        let forged = gift.forged;
        self.desk.keep_grant(gift.terms(), |grant| {
            if forged {
                grant.terms.uses += 10;
            }
        })
    }

    fn deref(&mut self, who: &str, pointers: &[&str], grant: Option<&str>) -> Result<u32, Violation> {
        let pointers: Vec<String> = pointers.iter().map(|p| (*p).to_owned()).collect();
        let (items, _) = self.desk.deref(&self.desk.client(who), &pointers, grant)?;
        Ok(items.iter().map(|item| item.tokens).sum())
    }

    fn issue(&mut self, issuer: &str, to: &str, patterns: &[&str], max_tokens: u32) -> Result<(), Violation> {
        let order = NewGrant {
            to: to.into(),
            patterns: patterns.iter().map(|p| (*p).to_owned()).collect(),
            uses: Some(1),
            ttl: Some("PT1H".into()),
            max_tokens: Some(max_tokens),
            answers: None,
        };
        self.desk.issue_grant(&self.desk.client(issuer), &order).map(|_| ())
    }
}

/// What `side` answers `case`: `Ok` when every step is allowed, else the first refusal (its code and message, the
/// id of a grant being issued, which each side makes its own way, written `G`).
fn play(side: &mut dyn Side, case: &Case) -> Result<(), (ErrorCode, String)> {
    let refused = |v: Violation| {
        let ids = regex::Regex::new(r"grant g-(new|[0-9a-f]{12})\b").expect("regex");
        (v.code, ids.replace_all(&v.message, "grant G").into_owned())
    };
    for gift in case.gifts {
        side.give(gift).map_err(refused)?;
    }
    for step in case.steps {
        match step {
            Deref(who, pointers, grant) => side.deref(who, pointers, *grant).map(|_| ()),
            Issue(issuer, to, patterns, max_tokens) => side.issue(issuer, to, patterns, *max_tokens),
        }
        .map_err(refused)?;
    }
    Ok(())
}

#[test]
fn the_gateway_and_the_desk_answer_every_case_alike() {
    let mut failures = Vec::new();
    for case in CASES {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = workspace(dir.path());
        let config = DeskConfig::from_toml(CONFIG).expect("config");
        let mut desk = DeskSide { desk: Desk::open(&dir.path().join("store"), Some(&ws), config).expect("desk") };
        let mut gateway = GatewaySide::new(&ws);
        let (by_gateway, by_desk) = (play(&mut gateway, case), play(&mut desk, case));
        let expected = |answer: &Result<(), (ErrorCode, String)>| match (&case.expect, answer) {
            (Ok(()), Ok(())) => true,
            (Err((code, message)), Err((got_code, got))) => code == got_code && got.contains(message),
            _ => false,
        };
        if !expected(&by_gateway) || !expected(&by_desk) || by_gateway != by_desk {
            failures.push(format!(
                "{}:\n  expected {:?}\n  gateway  {by_gateway:?}\n  desk     {by_desk:?}",
                case.name, case.expect
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

/// The desk refuses before reading: a deref over the turn's counts of a FIFO and of a file larger than the resolver
/// reads is refused on its counts (a side that opened them first would answer `LESS_POINTER_UNRESOLVED`).
#[cfg(unix)]
#[test]
fn the_desk_refuses_a_deref_over_its_counts_without_opening_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = workspace(dir.path());
    let fifo = ws.join("src/pipe.rs");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let huge = usize::try_from(crate::resolver::MAX_FILE_BYTES).expect("small") + 1;
    std::fs::write(ws.join("src/huge.rs"), vec![b'x'; huge]).expect("write");
    let desk =
        Desk::open(&dir.path().join("store"), Some(&ws), DeskConfig::from_toml(CONFIG).expect("config")).expect("desk");
    let dev = desk.client("dev");
    let three = ["repo:src/pipe.rs#L1-L1", "repo:src/huge.rs#L1-L9", "repo:src/pipe.rs#L2-L2"].map(str::to_owned);
    let refused = desk.deref(&dev, &three, None).expect_err("three spans, two in the budget");
    assert_eq!(refused.code, ErrorCode::DerefDenied, "{refused}");
    assert!(refused.message.starts_with("3 pointers exceed this turn's deref budget"), "{refused}");
    assert!(refused.message.contains("repo 0/2"), "nothing was charged before: {refused}");
}

/// What a lookup may bring inline: a search or a listing over the reader's `max_inline_tokens` is refused with the
/// budget's code; a description is cut from the end, its pointers kept; a recall keeps the best engrams that fit.
#[test]
fn a_lookup_over_the_inline_budget_is_cut_or_refused() {
    let budget = Budget { max_inline_tokens: 100, ..Budget::default() };
    assert!(check_search(5, 100, || unreachable!("asked only when refused"), &budget).is_ok());
    let search = check_search(5, 101, || 3, &budget).expect_err("over");
    assert_eq!((search.code, search.path.as_str()), (ErrorCode::BudgetExceeded, "/k"));
    assert_eq!(
        search.message,
        "5 hits are 101 inline tokens; the reader accepts at most 100 in one answer: search again with k = 3 or \
         fewer, or with narrower words"
    );
    assert!(check_list(9, 100, &budget).is_ok());
    let list = check_list(9, 140, &budget).expect_err("over");
    assert_eq!((list.code, list.path.as_str()), (ErrorCode::BudgetExceeded, "/pattern"));

    // Pointers of 10 tokens bare and 40 described; the third has no description to drop.
    let count = |kept: &[bool]| kept.iter().map(|&k| if k { 40 } else { 10 }).sum::<u32>();
    let fit = fit_descriptions(&[true, true, false, true, true], &budget, count).expect("fits cut");
    assert_eq!(fit, DescribeFit { cut: vec![1, 3, 4], tokens: 80 });
    let nothing_cut = fit_descriptions(&[true, false], &budget, count).expect("fits");
    assert_eq!(nothing_cut, DescribeFit { cut: Vec::new(), tokens: 50 });
    let bare = fit_descriptions(&[false; 11], &budget, count).expect_err("not even bare");
    assert_eq!((bare.code, bare.path.as_str()), (ErrorCode::BudgetExceeded, "/pointers"));

    // Five engrams of 30 tokens; the rest named in a note of 5 tokens.
    let answer = |kept: usize| 30 * kept as u32 + if kept < 5 { 5 } else { 0 };
    assert_eq!(fit_recall(5, &budget, answer).expect("cut"), (3, 95));
    assert_eq!(fit_recall(2, &budget, |k| 30 * k as u32).expect("whole"), (2, 60));
    let refused = fit_recall(3, &budget, |_| 101).expect_err("not even pointers");
    assert_eq!((refused.code, refused.path.as_str()), (ErrorCode::BudgetExceeded, "/k"));
}

/// A search answer over the inline budget is refused by a run's gateway and by the desk alike, over the same
/// workspace and budget: one code, one path, one wording (the enforcement core's `check_search`).
#[tokio::test]
async fn a_search_over_the_inline_budget_is_refused_alike_by_the_gateway_and_the_desk() {
    let h = crate::run::tests::harness("[budgets.roles.lead]\nmax_inline_tokens = 30\n").await;
    for i in 0..6 {
        let text = format!("/// Refills bucket {i} of the limiter from the clock.\nfn refill_bucket_{i}() {{}}\n");
        std::fs::write(h._workspace.path().join(format!("b{i}.rs")), text).expect("write");
    }
    let gateway = h.ctx.directory.get("lead").expect("lead");
    let search = crate::run::wire::SearchAction { query: "refill bucket".to_owned(), k: 6 };
    let by_gateway =
        ractor::call!(gateway, crate::run::gateway::GatewayMsg::Search, search).expect("answered").expect_err("over");
    let store = tempfile::tempdir().expect("tempdir");
    let config =
        DeskConfig::from_toml("[clients.lead]\nrole = \"lead\"\n[clients.lead.budget]\nmax_inline_tokens = 30\n")
            .expect("config");
    let desk = Desk::open(store.path(), Some(h._workspace.path()), config).expect("desk");
    let by_desk = desk.search(&desk.client("lead"), "refill bucket", 6).expect_err("over");
    assert_eq!(by_gateway.code, ErrorCode::BudgetExceeded, "{by_gateway}");
    assert!(by_gateway.message.starts_with("6 hits are "), "{by_gateway}");
    assert!(by_gateway.message.contains("search again with k = "), "{by_gateway}");
    assert_eq!(
        (by_gateway.code, &by_gateway.path, &by_gateway.message),
        (by_desk.code, &by_desk.path, &by_desk.message)
    );
}
