//! A real browser for the tests of `lessrt serve`: Debian's chromium, headless, driven over the W3C WebDriver
//! protocol through chromedriver (both installed by `scripts/browser.sh`). A missing browser fails the test naming
//! that script; nothing is skipped.
//!
//! The client is the few WebDriver commands the tests use, over plain HTTP on 127.0.0.1. Chromium runs with a fresh
//! profile and without the background traffic that would make it wait on network lookups.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless chromium session, and the chromedriver that runs it (stopped on drop).
pub(crate) struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: ureq::Agent,
    _profile: tempfile::TempDir,
}

/// Where a binary is, or the failure that says how to install it.
pub(crate) fn installed(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "{name} is not installed: run `bash scripts/browser.sh` once (it installs Debian's chromium and \
             chromium-driver with apt-get); the tests of `lessrt serve` drive a real browser"
        )
    })
}

/// A port nobody listens on now.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless chromium session of `width`×`height`.
    pub(crate) fn start(width: u32, height: u32) -> Browser {
        let chromium = installed("chromium");
        let chromedriver = installed("chromedriver");
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Browser { driver, base, session: String::new(), http, _profile: profile };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = browser.http.get(format!("{}/status", browser.base)).call().ok().and_then(|mut r| {
                let body: Value = serde_json::from_str(&r.body_mut().read_to_string().ok()?).ok()?;
                body["value"]["ready"].as_bool()
            });
            if ready == Some(true) {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer on port {port} within 20 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", browser._profile.path().display()),
            format!("--window-size={width},{height}"),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium.display().to_string(), "args": args},
        }}});
        let created = browser.raw("POST", "/session", Some(caps));
        browser.session =
            created["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {created}")).to_owned();
        browser
    }

    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let response = match method {
            "GET" => self.http.get(&url).call(),
            "DELETE" => self.http.delete(&url).call(),
            _ => self
                .http
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_else(|| json!({})).to_string()),
        };
        let mut response = response.unwrap_or_else(|err| panic!("WebDriver {method} {path}: {err}"));
        let text = response.body_mut().read_to_string().unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("WebDriver {method} {path}: not JSON: {text}"))
    }

    /// A command of this session; panics on a WebDriver error.
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let answer = self.raw(method, &format!("/session/{}{path}", self.session), body);
        if let Some(error) = answer["value"]["error"].as_str() {
            panic!("WebDriver {method} {path}: {error}: {}", answer["value"]["message"]);
        }
        answer["value"].clone()
    }

    /// Opens `url`.
    pub(crate) fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page and gives back what it returns.
    pub(crate) fn exec(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/execute/sync", Some(json!({"script": script, "args": args})))
    }

    /// Waits until `script` returns something truthy (not null, false, 0 or ""), at most `secs` seconds.
    pub(crate) fn wait_for(&self, what: &str, script: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let value = self.exec(script, json!([]));
            let truthy = match &value {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return value;
            }
            assert!(Instant::now() < deadline, "waited {secs} s for {what}; last: {value}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The first element matching `css`.
    pub(crate) fn find(&self, css: &str) -> String {
        let found = self.cmd("POST", "/element", Some(json!({"using": "css selector", "value": css})));
        found[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}")).to_owned()
    }

    /// Every element matching `css`.
    pub(crate) fn find_all(&self, css: &str) -> Vec<String> {
        let found = self.cmd("POST", "/elements", Some(json!({"using": "css selector", "value": css})));
        found.as_array().into_iter().flatten().filter_map(|e| e[ELEMENT].as_str().map(str::to_owned)).collect()
    }

    /// An element's rendered text.
    pub(crate) fn text(&self, element: &str) -> String {
        self.cmd("GET", &format!("/element/{element}/text"), None).as_str().unwrap_or_default().to_owned()
    }

    /// Clicks an element (scrolled into view first).
    pub(crate) fn click(&self, element: &str) {
        self.cmd("POST", &format!("/element/{element}/click"), None);
    }

    /// Types `text` into an element.
    pub(crate) fn type_into(&self, element: &str, text: &str) {
        self.cmd("POST", &format!("/element/{element}/value"), Some(json!({"text": text})));
    }

    /// Presses keys on whatever has the focus (`\u{E004}` is Tab, `\u{E007}` Enter).
    pub(crate) fn press(&self, keys: &str) {
        let mut actions = Vec::new();
        for key in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": key.to_string()}));
            actions.push(json!({"type": "keyUp", "value": key.to_string()}));
        }
        self.cmd("POST", "/actions", Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})));
    }

    /// Saves a PNG of an element.
    pub(crate) fn screenshot(&self, element: &str, path: &Path) {
        use base64::Engine as _;
        // Below the page's sticky header, not under it.
        self.exec(
            "arguments[0].scrollIntoView({block: 'start'}); window.scrollBy(0, -document.querySelector('header').offsetHeight - 8);",
            json!([{ELEMENT: element}]),
        );
        let data = self.cmd("GET", &format!("/element/{element}/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD.decode(data.as_str().unwrap_or_default()).expect("base64");
        std::fs::write(path, png).expect("write the screenshot");
    }

    /// An element as a script argument.
    pub(crate) fn arg(element: &str) -> Value {
        json!({ELEMENT: element})
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.raw("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
