//! The page of `lessrt serve` in a real browser: headless chromium driven over WebDriver (`browser.rs`), and plain
//! `chromium --headless` as a first look sees it: every panel of a UC1 run against its report and ledger, a pointer
//! opened by click and by keyboard, readable contrast, the live view of a running scenario, the checks and graded
//! tasks, and a baseline's sent text. Screenshots of each panel go to `$CARGO_TARGET_TMPDIR/serve-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::browser::Browser;
use crate::support::serve::*;

/// A review with eight graded tasks (scripted agents).
const LANTERNFISH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/review-lanternfish.toml");

/// `scenario` run in both modes into `out` (`out/<name>/{less,verbatim}`).
fn run_both(scenario: &str, name: &str, out: &Path) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", scenario, "--out", &out.to_string_lossy(), "-q"])
        .output()
        .expect("lessrt run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out.join(name)
}

/// Where the screenshots go.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-screenshots");
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// Waits until the page has loaded its run.
fn ready(browser: &Browser) {
    browser.wait_for("the page to load its run", "return document.body.getAttribute('data-ready') === 'true';", 30);
}

/// The WCAG contrast ratio of two CSS `rgb(…)` colours.
fn contrast(a: &str, b: &str) -> f64 {
    fn luminance(css: &str) -> f64 {
        let inner = css.trim_start_matches("rgba(").trim_start_matches("rgb(").trim_end_matches(')');
        let parts: Vec<f64> = inner.split(',').take(3).map(|p| p.trim().parse().expect("a channel")).collect();
        let lin = |c: f64| {
            let c = c / 255.0;
            if c <= 0.03928 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * lin(parts[0]) + 0.7152 * lin(parts[1]) + 0.0722 * lin(parts[2])
    }
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// The page of a finished UC1 run in chromium: every panel, with the values of its report and ledger; a pointer
/// clicked shows its span; filters, the DAG, the query box, LESS against verbatim; a screenshot of each panel.
#[test]
fn the_page_of_a_uc1_run_in_a_real_browser() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let less_dir = scenario_dir.join("less");
    let events = ledger(&less_dir);
    let report = report(&less_dir);
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let browser = Browser::start(1400, 1000);
    let started = Instant::now();
    browser.goto(&server.url("/"));
    ready(&browser);
    eprintln!("serve: the page of UC1 loaded (every panel's data) in {:?}", started.elapsed());

    for panel in ["hierarchy", "briefs", "feed", "timeline", "memory", "compare", "pointer"] {
        browser.find(&format!("section#{panel}, aside#{panel}"));
    }
    let title = browser.text(&browser.find("#run-title"));
    assert!(title.contains("uc1-refactor") && title.contains("less"), "{title}");

    // The hierarchy: every role of the report, and the programmer's meter as the report and ledger have it.
    for role in report["roles"].as_object().expect("roles").keys() {
        browser.find(&format!(".agent[data-role='{role}']"));
    }
    let per_turn = report["roles"]["programmer"]["per_turn"].as_array().expect("per_turn");
    let cap =
        events.iter().rfind(|e| e["event"] == "delivered" && e["from"] == "programmer").expect("sent")["max_tokens"]
            .clone();
    let inline = browser.text(&browser.find("#agent-programmer [data-meter='inline tokens, last turn'] .value"));
    assert_eq!(inline, format!("{} / {} tok", per_turn.last().expect("a turn"), cap));
    let spans = browser.text(&browser.find("#agent-programmer [data-meter='repo spans'] .value"));
    let first_deref = events
        .iter()
        .find(|e| {
            e["event"] == "deref" && e["agent"] == "programmer" && e["granted"] == true && e["via_grant"].is_null()
        })
        .expect("a deref");
    assert!(spans.starts_with(&format!("{} /", first_deref["pointers"].as_array().map_or(0, Vec::len))), "{spans}");
    let facts = browser.text(&browser.find("#agent-programmer [data-facts]"));
    assert!(facts.contains(&format!("{} refused", report["roles"]["programmer"]["rejections"])), "{facts}");
    let reviewer = browser.text(&browser.find("#agent-reviewer"));
    assert!(reviewer.contains(&format!("restarted ×{}", report["roles"]["reviewer"]["restarts"])), "{reviewer}");

    // The Shared Brief panel: each brief delivered, its lines and its pointer pack.
    let brief = events.iter().find(|e| e["event"] == "delivered" && e["kind"] == "brief").expect("a brief");
    let shown = browser.text(&browser.find(&format!("[data-brief='{}']", brief["msg_id"].as_str().expect("id"))));
    assert!(shown.contains(brief["doc"]["what_matters_now"][0].as_str().expect("a line")), "{shown}");
    let n_pack: usize = brief["doc"]["pointer_packs"]
        .as_object()
        .expect("packs")
        .values()
        .map(|v| v.as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(
        browser.find_all(&format!("[data-brief='{}'] .ptr", brief["msg_id"].as_str().expect("id"))).len(),
        n_pack
    );

    // The engram feed: every claim, in delivery order; the kind filter.
    let engrams = delivered_engrams(&events);
    let items = browser.find_all("#engram-list > li");
    assert_eq!(items.len(), engrams.len());
    let risk = engrams.iter().find(|e| e["kind"] == "risk" && e["pointers"][0]["digest"].is_string()).expect("a risk");
    let risk_id = risk["id"].as_str().expect("id");
    let item = browser.find(&format!("[data-engram='{risk_id}']"));
    assert!(browser.text(&item).contains(risk["claim"].as_str().expect("claim")));
    assert_eq!(browser.find_all(&format!("[data-engram='{risk_id}'] .side")).len(), 2, "a risk shows both sides");

    // Click a pointer: the pointer panel shows its span marked, its digest and its cost.
    let pointer = &risk["pointers"][0];
    let text = pointer_text(pointer);
    browser.click(&browser.find(&format!("[data-engram='{risk_id}'] .ptr[data-pointer='{text}']")));
    browser.wait_for("the pointer to resolve", "return document.querySelector('#pointer-view .digest');", 20);
    let digest = browser.text(&browser.find("#pointer-view .digest"));
    assert_eq!(digest, pointer["digest"].as_str().expect("digest"));
    let (from, to) = span_lines(pointer["span"].as_str().expect("span"));
    let marked: Vec<String> = browser
        .find_all("#pointer-view .ln.hl .tx")
        .iter()
        .map(|e| {
            browser
                .exec("return arguments[0].textContent;", json!([Browser::arg(e)]))
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(marked, fixture_lines(pointer["ref"].as_str().expect("ref"), from, to), "the span, marked");
    let tokens = browser.text(&browser.find("#pointer-view [data-tokens]"));
    assert!(tokens.ends_with("(o200k_base)") && !tokens.starts_with('0'), "{tokens}");

    // The timeline: every event; the denied deref with its code and the grant that covers it.
    assert_eq!(browser.find_all("#timeline-list > li").len(), events.len());
    let cover = browser.text(&browser.find("#timeline-list [data-cover]"));
    let grant = events.iter().find(|e| e["event"] == "grant_issued").expect("a grant");
    assert!(cover.contains("LESS_DEREF_DENIED") && cover.contains(grant["grant_id"].as_str().expect("id")), "{cover}");

    // LESS against verbatim, from both reports.
    let verbatim = self::report(&scenario_dir.join("verbatim"));
    let total = browser.text(&browser.find("table[data-compare='verbatim'] tr[data-role='TOTAL']"));
    let want = format!("TOTAL {} ", report["totals"]["inline_tokens"]["total"]);
    assert!(total.starts_with(&want), "{total}");
    assert!(total.contains(&verbatim["totals"]["inline_tokens"]["total"].to_string()), "{total}");

    // Memory: the session node opens to its messages; the query box answers.
    browser.wait_for("the DAG", "return document.querySelector('#dag-tree details.node');", 20);
    let n_delivered = events.iter().filter(|e| e["event"] == "delivered").count();
    browser.click(&browser.find("#dag-tree details.node > summary"));
    browser.wait_for(
        "the session's messages",
        &format!("return document.querySelectorAll('#dag-tree [data-message]').length === {n_delivered};"),
        20,
    );
    browser.type_into(&browser.find("#dag-q"), "event ordering of the capture");
    browser.click(&browser.find("#dag-query button"));
    let answer = browser.wait_for(
        "an answer",
        "const a = document.querySelector('#dag-answer [data-answer]'); return a && a.textContent;",
        20,
    );
    assert!(answer.as_str().unwrap_or_default().contains("sam:msg:"), "{answer}");

    let shots = screenshots();
    for panel in ["hierarchy", "briefs", "feed", "timeline", "memory", "compare", "pointer"] {
        browser.screenshot(&browser.find(&format!("#{panel}")), &shots.join(format!("{panel}.png")));
    }
    // Filters last: the feed shows only risks.
    browser.exec("const s = document.getElementById('filter-kind'); s.value = 'risk'; s.dispatchEvent(new Event('change', {bubbles: true}));", json!([]));
    let n_risks = engrams.iter().filter(|e| e["kind"] == "risk").count();
    browser.wait_for("the risk filter", &format!("const l = document.querySelectorAll('#engram-list > li'); return l.length === {n_risks} && [...l].every(e => e.dataset.kind === 'risk');"), 20);
    browser.screenshot(&browser.find("body"), &shots.join("page.png"));
    eprintln!("serve: screenshots in {}", shots.display());
}

/// `L<a>-L<b>` as numbers.
fn span_lines(span: &str) -> (usize, usize) {
    let (a, b) = span.split_once('-').expect("a range");
    (a.trim_start_matches('L').parse().expect("a"), b.trim_start_matches('L').parse().expect("b"))
}

/// Keyboard alone reaches a pointer (Tab) and opens it (Enter); Escape goes back to it. Main and muted text have a
/// contrast of at least 4.5:1 against their backgrounds.
#[test]
fn the_page_works_from_the_keyboard_and_reads_well() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let browser = Browser::start(1400, 1000);
    browser.goto(&server.url("/?run=less"));
    ready(&browser);
    let mut reached = None;
    for _ in 0..200 {
        browser.press("\u{E004}");
        let focused = browser.exec(
            "const a = document.activeElement; return a && a.classList.contains('ptr') ? a.dataset.pointer : null;",
            json!([]),
        );
        if let Some(pointer) = focused.as_str() {
            reached = Some(pointer.to_owned());
            break;
        }
    }
    let pointer = reached.expect("Tab reaches a pointer within 200 presses");
    browser.press("\u{E007}");
    let shown = browser.wait_for(
        "the pointer opened with Enter",
        "const p = document.querySelector('#pointer-view .pointer-text'); return p && p.textContent;",
        20,
    );
    assert_eq!(shown.as_str(), Some(pointer.as_str()));
    let focus = browser.exec("return document.activeElement.id;", json!([]));
    assert_eq!(focus, "pointer-h", "the focus moves to the pointer panel");
    browser.press("\u{E00C}");
    let back = browser.exec("return document.activeElement.dataset.pointer || null;", json!([]));
    assert_eq!(back.as_str(), Some(pointer.as_str()), "Escape returns to the pointer");

    let colours = browser.exec(
        "const c = (s, p) => getComputedStyle(document.querySelector(s))[p];
         return [c('body', 'color'), c('body', 'backgroundColor'), c('.claim', 'color'), c('.panel', 'backgroundColor'),
                 c('.hint', 'color'), c('.ptr', 'color'), c('.ptr', 'backgroundColor')];",
        json!([]),
    );
    let c: Vec<&str> = colours.as_array().expect("colours").iter().filter_map(Value::as_str).collect();
    for (what, fg, bg) in [
        ("main text", c[0], c[1]),
        ("a claim on its panel", c[2], c[3]),
        ("muted text", c[4], c[3]),
        ("a pointer", c[5], c[6]),
    ] {
        let ratio = contrast(fg, bg);
        eprintln!("serve: contrast of {what}: {ratio:.1}:1 ({fg} on {bg})");
        assert!(ratio >= 4.5, "{what}: {ratio:.2}:1 ({fg} on {bg})");
    }
}

/// `lessrt run --serve`: the page opened while the scenario runs (paced) sees events arrive without a reload, then
/// the report; the page stays up after the run until Ctrl-C, and the exit status is the run's.
#[test]
fn the_live_view_of_a_running_scenario() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().to_string_lossy().into_owned();
    let server =
        Server::start(&["run", UC1, "--mode", "less", "--out", &out, "--serve", "127.0.0.1:0", "--pace", "500", "-q"]);
    let browser = Browser::start(1400, 1000);
    let opened = Instant::now();
    browser.goto(&server.url("/"));
    ready(&browser);
    browser.exec("window.__same_page = true;", json!([]));
    let at_load = browser
        .exec("return document.querySelectorAll('#timeline-list > li').length;", json!([]))
        .as_u64()
        .unwrap_or(0);
    let dir = tmp.path().join("uc1-refactor/less");
    // While the run goes on, events arrive a few at a time (the ledger writes each within 200 ms, the page tails
    // it): the page shows several different counts before the report exists. Then the run ends (its report is
    // written), and every ledger line is on the page, which never reloaded.
    let count = || browser.exec("return document.querySelectorAll('#timeline-list > li').length;", json!([]));
    let mut seen_during_run = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join("report.json").is_file() {
        assert!(Instant::now() < deadline, "the run did not finish");
        if let Some(n) = count().as_u64().filter(|n| *n > 0) {
            seen_during_run.insert(n);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        seen_during_run.len() >= 3,
        "events arrive as the run goes, not all at its end: counts seen during the run {seen_during_run:?}"
    );
    let total = ledger(&dir).len();
    browser.wait_for(
        "every event on the page",
        &format!("return document.querySelectorAll('#timeline-list > li').length === {total};"),
        30,
    );
    browser.wait_for(
        "the finished status",
        "return document.getElementById('live-status').textContent === 'finished';",
        30,
    );
    assert_eq!(browser.exec("return window.__same_page === true;", json!([])), true, "the page was not reloaded");
    assert!((at_load as usize) < total, "the page opened before the run ended ({at_load} of {total} events)");
    eprintln!(
        "serve: live page opened at event {at_load} of {total}; all arrived {:?} after opening",
        opened.elapsed()
    );
    browser.screenshot(&browser.find("#timeline"), &screenshots().join("live-timeline.png"));
    // The run is over and the page is still served; Ctrl-C ends it with the run's status.
    let (status, _) = get(&server, "/api/run", &[]);
    assert_eq!(status, 200);
    let mut server = server;
    let said: Vec<String> =
        std::iter::from_fn(|| server.stderr.recv_timeout(Duration::from_secs(5)).ok()).take(20).collect();
    assert!(said.iter().any(|l| l.contains("until Ctrl-C")), "{said:?}");
    let killed = Command::new("kill").args(["-INT", &server.child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status.code();
        }
        assert!(Instant::now() < deadline, "lessrt run --serve did not stop on Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0), "the run's status: UC1 passes its checks");
}

/// The checks and graded-tasks panel of a finished run in chromium: every check of the report with its status and
/// evidence, every graded task with its status and the engram that answered it; and in the verbatim run, a brief's
/// "sent text" opens what the baseline actually sent, as the run directory's `wire.jsonl` holds it.
#[test]
fn the_checks_and_tasks_panel_and_a_baselines_sent_text_in_a_real_browser() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_both(LANTERNFISH, "review-lanternfish", tmp.path());
    let report = report(&scenario_dir.join("less"));
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let browser = Browser::start(1400, 1000);
    browser.goto(&server.url("/?run=less"));
    ready(&browser);

    let rows = browser.exec(
        "return [...document.querySelectorAll('#outcome tr[data-check]')].map(r =>
           [r.dataset.check, r.querySelector('.badge').textContent, r.querySelector('.evidence').textContent]);",
        json!([]),
    );
    let checks = report["checks"].as_array().expect("checks");
    assert!(!checks.is_empty());
    let label = |status: &str| match status {
        "pass" => "PASS",
        "fail" => "FAIL",
        _ => "n/a",
    };
    let expected: Vec<Value> = checks
        .iter()
        .map(|c| json!([c["name"], label(c["status"].as_str().unwrap_or_default()), c["detail"]]))
        .collect();
    assert_eq!(rows, Value::Array(expected), "every check with its status and evidence");

    let tasks = report["tasks"]["items"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 8);
    assert_eq!(browser.find_all("#outcome li[data-task]").len(), tasks.len());
    for task in tasks {
        let id = task["id"].as_str().expect("id");
        let shown = browser.text(&browser.find(&format!("#outcome li[data-task='{id}']")));
        let status = browser.text(&browser.find(&format!("#outcome li[data-task='{id}'] [data-task-status]")));
        assert_eq!(status == "solved", task["solved"] == true, "{id}: {status}");
        assert!(shown.contains(task["evidence"].as_str().expect("evidence")), "{id}: {shown}");
        let engram = task["answer"]["engram"].as_str().expect("an answer");
        let answered = browser.find(&format!("#outcome li[data-task='{id}'] [data-answer-engram='{engram}']"));
        assert!(browser.text(&answered).contains(task["answer"]["claim"].as_str().expect("claim")), "{id}");
    }
    let verdict = browser.text(&browser.find("#outcome .verdict"));
    assert!(verdict.contains("8 of 8 graded tasks solved"), "{verdict}");
    // LESS §12's rates, as the report has them.
    let rates = browser.text(&browser.find("#outcome [data-rates]"));
    let pct = |rate: &Value| rate.as_f64().map_or_else(|| "-".to_owned(), |r| format!("{}%", (r * 100.0).round()));
    let expected = format!("deref denial {}", pct(&report["rates"]["deref_denial_rate"]));
    assert!(rates.starts_with("Rates: resend ") && rates.contains(&expected), "{rates} (want {expected})");
    let top = &report["rates"]["top_engram_kinds"][0];
    assert!(rates.contains(&format!("{} {}", top["kind"].as_str().unwrap_or("-"), top["count"])), "{rates}");
    browser.screenshot(&browser.find("#outcome"), &screenshots().join("outcome.png"));

    // The verbatim run: its checks about LESS mechanisms do not apply, and a brief opens what was sent.
    let verbatim_dir = scenario_dir.join("verbatim");
    let verbatim = self::report(&verbatim_dir);
    browser.goto(&server.url("/?run=verbatim"));
    ready(&browser);
    let na = verbatim["checks"].as_array().expect("checks").iter().filter(|c| c["status"] == "n/a").count();
    assert!(na > 0);
    assert_eq!(browser.find_all("#outcome tr[data-check] .status-na").len(), na);
    let sent = wire_lines(&verbatim_dir);
    let brief = browser.find("#brief-list [data-brief] .wire-btn");
    let msg_id = browser.exec("return arguments[0].dataset.wire;", json!([Browser::arg(&brief)]));
    let msg_id = msg_id.as_str().expect("a message id").to_owned();
    browser.click(&brief);
    let shown = browser.wait_for(
        "the sent text",
        &format!("const p = document.querySelector('#pointer-view [data-wire-text=\"{msg_id}\"]'); return p && p.textContent;"),
        20,
    );
    let line = sent.iter().find(|l| l["msg_id"] == msg_id.as_str()).expect("the brief's line in wire.jsonl");
    assert_eq!(shown, line["text"], "the page shows what the run directory holds");
    assert!(shown.as_str().unwrap_or_default().starts_with("Brief from "), "{shown}");
    assert_eq!(browser.text(&browser.find("#pointer-h")), "What was sent");
    browser.screenshot(&browser.find("#pointer"), &screenshots().join("sent-text.png"));
}

/// A plain `chromium --headless` (no WebDriver, no waiting for scripts or streams) sees the run on the page's first
/// view: its title, its checks and its timeline, never "loading…"; its screenshot is written.
#[test]
fn a_plain_headless_chromium_sees_the_run_on_the_first_view() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let less_dir = scenario_dir.join("less");
    let report = report(&less_dir);
    let events = ledger(&less_dir);
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let chromium = super::browser::installed("chromium");
    let profile = tempfile::tempdir().expect("profile");
    let plain = |extra: &str| {
        let output = Command::new(&chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1400,1000"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(extra)
            .arg(server.url("/"))
            .output()
            .expect("chromium runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let dom = plain("--dump-dom");
    assert!(!dom.contains("loading…"), "the first view is not a loading page");
    assert!(dom.contains("uc1-refactor · less mode"), "the run's title");
    let check = &report["checks"][0];
    let name = check["name"].as_str().expect("a check").replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(dom.contains(&format!("data-check=\"{name}\" data-status=\"PASS\"")), "the first check, passed");
    assert_eq!(dom.matches("<li data-seq=").count(), events.len(), "every event on the timeline");
    let png = tmp.path().join("first-view.png");
    plain(&format!("--screenshot={}", png.display()));
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{} bytes", bytes.len());
    std::fs::copy(&png, screenshots().join("first-view.png")).expect("copy");
    // Without a script at all, the page still names the run.
    let page = http().get(server.url("/")).call().expect("the page").into_body().read_to_string().expect("HTML");
    assert!(page.contains("uc1-refactor · less mode") && page.contains("id=\"initial-state\""), "{page}");
}
