//! Tests of the gateway's pure rules: the deref meter and the grant book.

use super::*;
use crate::GrantTerms;

fn grant(secret: &[u8; 32], grantee: &str, patterns: &[&str], uses: u32, expires_at: &str) -> Grant {
    Grant::issue(
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
        },
        secret,
    )
}

fn pointer(text: &str) -> Pointer {
    Pointer::parse(text).expect("pointer")
}

const FUTURE: &str = "2999-01-01T00:00:00Z";

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
        let mut g = grant(&secret, "dev", &["repo:src/**"], 1, FUTURE);
        g.terms.max_tokens = 10_000;
        g
    };
    assert_eq!(book.accept(forged, "dev", &secret, true).expect_err("forged").code, ErrorCode::GrantInvalid);
    let other_run = grant(&[4u8; 32], "dev", &["repo:src/**"], 1, FUTURE);
    assert_eq!(book.accept(other_run, "dev", &secret, true).expect_err("other run").code, ErrorCode::GrantInvalid);
    let misdirected = grant(&secret, "peer", &["repo:src/**"], 1, FUTURE);
    assert_eq!(book.accept(misdirected, "dev", &secret, true).expect_err("not mine").code, ErrorCode::GrantInvalid);
    let from_a_stranger = grant(&secret, "dev", &["repo:src/**"], 1, FUTURE);
    assert_eq!(
        book.accept(from_a_stranger, "dev", &secret, false).expect_err("not an ancestor").code,
        ErrorCode::GrantInvalid
    );

    book.accept(grant(&secret, "dev", &["repo:src/**"], 1, FUTURE), "dev", &secret, true).expect("valid grant");
    let items = [(pointer("repo:src/a.rs#L1-L9"), 100), (pointer("repo:src/deep/b.rs"), 100)];
    let outside = [(pointer("repo:docs/x.md"), 10)];
    assert_eq!(book.authorize("g", "dev", &outside, now).expect_err("pattern").code, ErrorCode::DerefDenied);
    let too_big = [(pointer("repo:src/a.rs"), 501)];
    assert_eq!(book.authorize("g", "dev", &too_big, now).expect_err("tokens").code, ErrorCode::DerefDenied);
    assert_eq!(book.authorize("g", "peer", &items, now).expect_err("presenter").code, ErrorCode::GrantInvalid);
    book.authorize("g", "dev", &items, now).expect("covered");
    assert_eq!(book.authorize("g", "dev", &items, now).expect_err("replay").code, ErrorCode::GrantInvalid);
    assert_eq!(book.authorize("nope", "dev", &items, now).expect_err("unknown").code, ErrorCode::GrantInvalid);

    let mut book = GrantBook::default();
    book.accept(grant(&secret, "dev", &["repo:src/*.rs"], 5, "2000-01-01T00:00:00Z"), "dev", &secret, true)
        .expect("accepted");
    assert_eq!(book.authorize("g", "dev", &items[..1], now).expect_err("expired").code, ErrorCode::GrantInvalid);
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
