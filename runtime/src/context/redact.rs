//! Redaction of secrets and IP addresses in text the context ledger emits from the cold history.
//!
//! Secrets become `credential_ref:credential:<hash>`, where the hash is the first 12 hex digits of the blake3 of the
//! secret: the same secret gives the same reference in every message and every run, so a reader can tell that two
//! mentions are the same credential without seeing it. IPv4 and IPv6 addresses become `[REDACTED_IP]`.
//!
//! The detectors run in a fixed order (PEM blocks, credentials in URLs, `Authorization:` headers, key/value pairs,
//! token shapes, long base64/hex runs, IPv6, IPv4); a detector runs only when the lowercased text contains one of its
//! literal keys, so most messages cost a few substring searches. Redaction is idempotent: references and
//! `[REDACTED_IP]` are never matched again.

use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The prefix of every credential reference.
pub const CREDENTIAL_REF_PREFIX: &str = "credential_ref:credential:";

/// What replaces an IP address.
pub const REDACTED_IP: &str = "[REDACTED_IP]";

/// Hex digits of the blake3 prefix in a credential reference.
const REF_HEX: usize = 12;

/// The text with secrets and addresses replaced, and what was replaced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Redacted {
    /// The redacted text.
    pub text: String,
    /// Each credential found, in order of appearance: its reference and the kind of detector that found it.
    pub credentials: Vec<(String, &'static str)>,
    /// How many IP addresses were replaced.
    pub n_ips: usize,
}

/// The stable reference of a secret: `credential_ref:credential:<first 12 hex of blake3(secret)>`.
pub fn credential_ref(secret: &str) -> String {
    let hash = blake3::hash(secret.as_bytes()).to_hex();
    format!("{CREDENTIAL_REF_PREFIX}{}", &hash.as_str()[..REF_HEX])
}

/// Redacts `text`: every secret becomes its [`credential_ref`], every IP address [`REDACTED_IP`].
pub fn redact(text: &str) -> Redacted {
    redact_collecting(text, &mut Vec::new())
}

/// [`redact`], also pushing each raw secret found onto `secrets` (kept out of [`Redacted`], whose `Debug` may be
/// logged).
pub(crate) fn redact_collecting(text: &str, secrets: &mut Vec<(String, &'static str)>) -> Redacted {
    let mut out = Redacted { text: String::new(), credentials: Vec::new(), n_ips: 0 };
    let lower = text.to_lowercase();
    let mut current = text.to_owned();
    for (detector, regex) in DETECTOR_TABLE.iter().zip(DETECTORS.iter()) {
        if detector.keys.iter().any(|k| lower.contains(k)) {
            current = replace(regex, &current, |haystack, caps| detector.apply(haystack, caps, &mut out, secrets));
        }
    }
    out.text = current;
    out
}

/// Redacts several texts of one conversation together: each text as [`redact`] does, then every secret found in any
/// of them wherever it recurs in the others, even bare (a password given once as `password=…` and repeated alone).
pub fn redact_all<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut secrets = Vec::new();
    let mut redacted: Vec<Redacted> = texts.into_iter().map(|t| redact_collecting(t, &mut secrets)).collect();
    let known = KnownSecrets::new(secrets);
    for r in &mut redacted {
        known.apply(r);
    }
    redacted.into_iter().map(|r| r.text).collect()
}

/// Secrets found anywhere in the cold history, replaced wherever they recur, even bare (a password said once as
/// `password=…` and later on its own).
pub(crate) struct KnownSecrets {
    // Invariant: matches exactly the keys of `refs`, longest first.
    regex: Option<Regex>,
    /// Each secret's reference and the kind of detector that first found it.
    refs: std::collections::HashMap<String, (String, &'static str)>,
}

/// Shorter secrets are not propagated: a short string recurs by chance inside ordinary words.
const MIN_PROPAGATED_CHARS: usize = 8;

impl KnownSecrets {
    /// The set of `secrets` long enough to propagate.
    pub(crate) fn new(secrets: Vec<(String, &'static str)>) -> KnownSecrets {
        let mut refs: std::collections::HashMap<String, (String, &'static str)> = std::collections::HashMap::new();
        for (secret, kind) in secrets {
            if secret.chars().count() >= MIN_PROPAGATED_CHARS {
                let reference = credential_ref(&secret);
                refs.entry(secret).or_insert((reference, kind));
            }
        }
        let mut unique: Vec<&String> = refs.keys().collect();
        unique.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        let regex = if unique.is_empty() {
            None
        } else {
            let alternation = unique.iter().map(|s| regex::escape(s)).collect::<Vec<_>>().join("|");
            // Escaped literals always compile; a failure (size limit) only means no propagation.
            Regex::new(&alternation).ok()
        };
        KnownSecrets { regex, refs }
    }

    /// Replaces every known secret in `redacted` that is not inside a credential reference.
    pub(crate) fn apply(&self, redacted: &mut Redacted) {
        let Some(regex) = &self.regex else { return };
        if !regex.is_match(&redacted.text) {
            return;
        }
        let ref_spans: Vec<(usize, usize)> = redacted
            .text
            .match_indices(CREDENTIAL_REF_PREFIX)
            .map(|(pos, _)| (pos, pos + CREDENTIAL_REF_PREFIX.len() + REF_HEX))
            .collect();
        let mut found = Vec::new();
        let text = replace(regex, &redacted.text, |_, caps| {
            let whole = caps.get(0)?;
            if ref_spans.iter().any(|&(start, end)| whole.start() < end && start < whole.end()) {
                return None;
            }
            let (reference, kind) = self.refs.get(whole.as_str())?.clone();
            found.push((reference.clone(), kind));
            Some(reference)
        });
        redacted.text = text;
        redacted.credentials.extend(found);
    }
}

/// What a detector does with a match.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// The `secret` group is a credential of this kind.
    Secret(&'static str),
    /// The `secret` group is a credential of this kind if it is quoted or looks like one ([`plausible_secret`]).
    PlausibleSecret(&'static str),
    /// The `secret` group is a credential only if it looks random (mixed case and digits, or long hex).
    RandomRun,
    /// The `secret` group is a credential only if it is password-shaped ([`looks_like_password`]).
    PasswordShape,
    /// The whole match is an IPv6 address if it parses as one.
    Ipv6,
    /// The whole match is an IPv4-like address.
    Ipv4,
}

struct Detector {
    action: Action,
    /// Lowercase literals of which the text must contain one for the pattern to run (a cheap prefilter).
    keys: &'static [&'static str],
    pattern: &'static str,
}

/// The kind of the detectors that find a value after a key word (`password: …`).
const KEY_VALUE: &str = "key/value secret";

/// The detectors, in the order they run.
const DETECTOR_TABLE: &[Detector] = &[
    Detector {
        action: Action::Secret("pem block"),
        keys: &["-----begin"],
        pattern: r"(?s)(?P<secret>-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\z))",
    },
    Detector {
        action: Action::Secret("url credentials"),
        keys: &["://"],
        pattern: r"(?i)\b[a-z][a-z0-9+.-]{1,15}://(?P<secret>[^\s:/@]+:[^\s/@]+|[^\s:/@]{16,})@",
    },
    Detector {
        action: Action::Secret("authorization"),
        keys: &["authorization"],
        pattern: r#"(?i)\b(?:proxy-)?authorization\b["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest)\s+)?(?P<secret>[^\s"',;]+)"#,
    },
    Detector {
        action: Action::Secret("bearer token"),
        keys: &["bearer"],
        pattern: r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
    },
    Detector {
        // An environment variable of a secret, in capitals, its key word glued to a prefix (`PGPASSWORD=…`,
        // `DB_PASS=…`, `SMTP_PASS: …`, `MYSQL_PWD=…`).
        action: Action::Secret(KEY_VALUE),
        keys: &["pass", "pwd", "secret", "token"],
        pattern: concat!(
            r#"(?-i:\b[A-Z][A-Z0-9]*_?(?:PASS|PASSWORD|PASSWD|PWD|SECRET|TOKEN))\b["']?\s*(?::=|[:=：])\s*"#,
            r#"(?P<secret>"[^"\n]{1,200}"|'[^'\n]{1,200}'|[^\s"'`,;]{3,})"#
        ),
    },
    Detector {
        // A secret given as a command-line flag or an XML element: `--password X`, `--password=X`, `curl -u user:X`,
        // `<password>X</password>`.
        action: Action::Secret(KEY_VALUE),
        keys: &["--pass", "-u ", "--user", "<pass", "<secret", "<token", "<api"],
        pattern: concat!(
            r#"(?i)(?:--(?:password|passwd|pass|secret|token|api-key)(?:=|\s+)|(?:\s-u\s+|--user[=\s])[^\s:"']+:|"#,
            r#"<(?:password|passwd|secret|token|api_?key)>)(?P<secret>"[^"\n]{1,200}"|'[^'\n]{1,200}'|[^\s"'`,;<]{3,})"#
        ),
    },
    Detector {
        // A password named without a colon ("with password Rr37ttYy", "the password should be …"): taken when the
        // value looks like a secret, since prose has this shape too.
        action: Action::PlausibleSecret(KEY_VALUE),
        keys: &["password", "passwort", "passcode"],
        pattern: r#"(?i)\b(?:password|passwort|passcode)\s+(?:should\s+be\s+|will\s+be\s+|was\s+)?(?P<secret>[^\s"'`,;]{4,})"#,
    },
    Detector {
        // A PIN: four to eight digits after the word.
        action: Action::Secret(KEY_VALUE),
        keys: &["pin"],
        pattern: r"(?i)\bpin(?:\s*code)?\s*[:=：]\s*(?P<secret>\d{4,8})\b",
    },
    Detector {
        // A login given as a pair (`login: admin / Xk29vLq8`, `creds: admin:Xk29vLq8`): the part after the user is
        // the password.
        action: Action::Secret("login pair"),
        keys: &["login", "cred", "user"],
        pattern: concat!(
            r#"(?i)\b(?:login|credentials|creds|user(?:name)?\s*/\s*pass(?:word)?)\b["']?\s*[:=]\s*"#,
            r#"[^\s/:"'`,;]{1,64}\s*[/:]\s*(?P<secret>"[^"\n]{1,200}"|'[^'\n]{1,200}'|[^\s"'`,;]{3,})"#
        ),
    },
    Detector {
        action: Action::Secret(KEY_VALUE),
        keys: &[
            "key",
            "secret",
            "token",
            "pass",
            "pwd",
            "пароль",
            "токен",
            "ключ",
            "секрет",
            "kennwort",
            "contrase",
            "senha",
            "wachtwoord",
            "hasło",
            "haslo",
            "salasana",
            "lösenord",
            "losenord",
            "parola",
            "mot de passe",
            "şifre",
        ],
        pattern: concat!(
            // `_` before the key too: DB_PASSWORD=…, AWS_SECRET_ACCESS_KEY=….
            r#"(?i)(?:\b|_)(?:api[_ -]?key|apikey|api[_ -]?secret|access[_ -]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|"#,
            r#"secret[_ -]?key|client[_ -]?secret|secret|access[_ -]?token|auth[_ -]?token|refresh[_ -]?token|token|"#,
            r#"(?:unseal|recovery|root|master|encryption|signing|deploy|license)[_ -]?(?:key|token)|"#,
            r#"password|passwd|pwd|passphrase|passcode|private[_ -]?key|пароль|токен|ключ api|api ключ|секрет|"#,
            // The word for a password in other languages: German, French, Spanish, Portuguese, Dutch, Polish,
            // Finnish, Swedish, Italian, Turkish.
            r#"kennwort|passwort|mot de passe|contraseña|contrasena|senha|wachtwoord|hasło|haslo|salasana|"#,
            r#"lösenord|losenord|parola d'ordine|parola chiave|şifre)\b["']?"#,
            // Up to four words between the key and a colon or `=` ("password for the billing db: …", "пароль от
            // базы billing: …"); words only, so the colon is in the same phrase as the key.
            r#"(?:\s*(?::=|[:=：]|=>|\bis\b|—|–)|(?:\s+[\p{L}\p{N}][\p{L}\p{N}_.-]{0,15}){1,4}\s*[:=：])\s*"#,
            // A quoted value is taken whole, spaces and all; an unquoted one up to a space or separator.
            r#"(?P<secret>"[^"\n]{1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|[^\s"'`,;]{3,})"#
        ),
    },
    Detector {
        // "the password for staging is …", "пароль от базы — …": words between the key and `is` or a dash; taken
        // only when the value looks like a secret (see `plausible_secret`), since ordinary prose has this shape too.
        action: Action::PlausibleSecret(KEY_VALUE),
        keys: &["key", "secret", "token", "pass", "pwd", "пароль", "токен", "ключ", "секрет"],
        pattern: concat!(
            r#"(?i)\b(?:api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|secret|access[_-]?token|token|"#,
            r#"(?:unseal|recovery|root|master|encryption|signing|deploy|license)[_ -]?(?:key|token)|"#,
            r#"password|passwd|passphrase|private[_-]?key|пароль|токен|ключ|секрет)\b"#,
            r#"(?:\s+\p{L}{1,12}){1,3}(?:\s+(?:is|are|это)\b|\s*[—–]|\s+-)\s*"#,
            r#"(?P<secret>"[^"\n]{1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|[^\s"'`,;]{3,})"#
        ),
    },
    Detector {
        action: Action::Secret("google api key"),
        keys: &["aiza"],
        pattern: r"(?-u:\b)(?P<secret>AIza[0-9A-Za-z_-]{35})",
    },
    Detector {
        action: Action::Secret("stripe key"),
        keys: &["sk_", "rk_"],
        pattern: r"(?-u:\b)(?P<secret>(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,})",
    },
    Detector {
        action: Action::Secret("openai-style key"),
        keys: &["sk-"],
        pattern: r"(?-u:\b)(?P<secret>sk-[A-Za-z0-9_-]{16,})",
    },
    Detector {
        action: Action::Secret("github token"),
        keys: &["gh", "github_pat_"],
        pattern: r"(?-u:\b)(?P<secret>(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))",
    },
    Detector {
        action: Action::Secret("aws access key"),
        keys: &["akia", "asia"],
        pattern: r"(?-u:\b)(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})(?-u:\b)",
    },
    Detector {
        action: Action::Secret("slack token"),
        keys: &["xox"],
        pattern: r"(?-u:\b)(?P<secret>xox[abprse]-[A-Za-z0-9-]{10,})",
    },
    Detector {
        action: Action::Secret("jwt"),
        keys: &["eyj"],
        pattern: r"(?-u:\b)(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    },
    Detector { action: Action::RandomRun, keys: &[""], pattern: r"(?P<secret>[A-Za-z0-9+/_-]{32,}={0,2})" },
    Detector {
        // A password-shaped word: 10 to 31 letters and digits in short mixed-case pieces (`Rc6USZaUVb`), which
        // identifiers (`getUserById`, `PostgreSQL`) and words are not; see `looks_like_password`.
        action: Action::PasswordShape,
        keys: &[""],
        pattern: r"(?-u:\b)(?P<secret>[A-Za-z0-9]{10,31})(?-u:\b)",
    },
    Detector {
        action: Action::Ipv6,
        keys: &[":"],
        pattern: r"(?i)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:\.\d{1,3}){0,3}",
    },
    Detector { action: Action::Ipv4, keys: &["."], pattern: r"(?-u:\b)\d{1,3}(?:\.\d{1,3}){3}(?-u:\b)" },
];

// Invariant: `DETECTORS[i]` is `DETECTOR_TABLE[i].pattern`, compiled.
static DETECTORS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    // Constant patterns, compiled by every test; a bad one panics here and `compact` fails closed.
    DETECTOR_TABLE.iter().map(|d| Regex::new(d.pattern).expect("the detector table compiles")).collect()
});

impl Detector {
    /// The replacement of the whole match, or `None` to keep it.
    fn apply(
        &self,
        haystack: &str,
        caps: &Captures<'_>,
        out: &mut Redacted,
        secrets: &mut Vec<(String, &'static str)>,
    ) -> Option<String> {
        let whole = caps.get(0)?;
        match self.action {
            Action::Secret(kind) | Action::PlausibleSecret(kind) => {
                // A key word that is part of a path (`/etc/passwd`, `config/secret.yaml`) names a file, not a secret
                // that follows: `pointer "repo:/etc/passwd": path outside…` keeps its words.
                if kind == KEY_VALUE && haystack[..whole.start()].ends_with(['/', '\\', '.']) {
                    return None;
                }
                // A reference between the key and a colon (`password for staging is credential_ref:credential:…`):
                // the value was redacted already.
                if kind == KEY_VALUE && whole.as_str().contains("credential_ref") {
                    return None;
                }
                let group = caps.name("secret")?;
                let (offset, secret) = unquoted(group.as_str());
                if matches!(self.action, Action::PlausibleSecret(_)) && offset == 0 && !plausible_secret(secret) {
                    return None;
                }
                let start = group.start() - whole.start() + offset;
                if secret.is_empty() || is_already_redacted(&haystack[group.start() + offset..]) {
                    return None;
                }
                let reference = credential_ref(secret);
                out.credentials.push((reference.clone(), kind));
                secrets.push((secret.to_owned(), kind));
                let text = whole.as_str();
                Some(format!("{}{reference}{}", &text[..start], &text[start + secret.len()..]))
            }
            Action::RandomRun | Action::PasswordShape => {
                let group = caps.name("secret")?;
                let secret = group.as_str();
                let (shaped, kind) = match self.action {
                    Action::RandomRun => (looks_random(secret), "base64/hex run"),
                    _ => (looks_like_password(secret), "password-shaped word"),
                };
                if !shaped || is_already_redacted(&haystack[group.start()..]) {
                    return None;
                }
                let reference = credential_ref(secret);
                out.credentials.push((reference.clone(), kind));
                secrets.push((secret.to_owned(), kind));
                Some(reference)
            }
            Action::Ipv6 => {
                let candidate = whole.as_str();
                let trimmed = candidate.trim_end_matches([':', '.']);
                if trimmed.parse::<Ipv6Addr>().is_err() {
                    return None;
                }
                // A path in code (`pricing::capture_payment`, `std::fs`) parses as an address (`::ca`, `::f`) but
                // sits inside a word: an address is never glued to letters, digits or `_`.
                let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
                let before = haystack[..whole.start()].chars().next_back();
                let after = haystack[whole.start() + trimmed.len()..].chars().next();
                if before.is_some_and(word) || after.is_some_and(word) {
                    return None;
                }
                out.n_ips += 1;
                Some(format!("{REDACTED_IP}{}", &candidate[trimmed.len()..]))
            }
            Action::Ipv4 => {
                out.n_ips += 1;
                Some(REDACTED_IP.to_owned())
            }
        }
    }
}

/// A quoted value without its quotes (and the offset of its first character); an unquoted one without the
/// sentence punctuation after it.
fn unquoted(value: &str) -> (usize, &str) {
    for quote in ['"', '\'', '`'] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return (1, &value[1..value.len() - 1]);
        }
    }
    (0, value.trim_end_matches(['.', ')', ']', '}', '>', '!', '?']))
}

/// Whether an unquoted value after "… is" or a dash looks like a secret rather than a word of prose: a digit or a
/// symbol in it, or at least 16 characters.
fn plausible_secret(value: &str) -> bool {
    value.chars().count() >= 16 || value.chars().any(|c| c.is_ascii_digit() || (!c.is_alphanumeric() && c != '-'))
}

/// Whether the text at a match's start is a reference or an IP marker this module wrote.
fn is_already_redacted(at: &str) -> bool {
    at.starts_with(CREDENTIAL_REF_PREFIX) || at.starts_with(REDACTED_IP)
}

/// A long run is a secret when it is long hex, or long mixed-case alphanumerics with digits (base64-like).
fn looks_random(run: &str) -> bool {
    let body = run.trim_end_matches('=');
    if body.len() >= 32 && body.bytes().all(|b| b.is_ascii_hexdigit()) {
        return true;
    }
    let has = |f: fn(&u8) -> bool| body.as_bytes().iter().any(f);
    body.len() >= 40 && has(u8::is_ascii_digit) && has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase)
}

/// A password-shaped word has upper- and lowercase letters and a digit, in at least five camel-case pieces (`Rc`,
/// `6`, `US`, `Za`, `U`, `Vb`) averaging at most two characters: identifiers and names split into longer pieces
/// (`getUser2ById`: `get`, `User`, `2`, `By`, `Id`, 2.4), and `PostgreSQL` or `eu-central-1` lack a class.
fn looks_like_password(word: &str) -> bool {
    let class = |c: char| {
        if c.is_ascii_digit() {
            0u8
        } else if c.is_ascii_uppercase() {
            1
        } else {
            2
        }
    };
    let classes: Vec<u8> = word.chars().map(class).collect();
    if !(0..3).all(|k| classes.contains(&k)) {
        return false;
    }
    let mut pieces: Vec<String> = Vec::new();
    let mut previous: Option<char> = None;
    for c in word.chars() {
        let starts_piece = match (previous, pieces.last_mut()) {
            (Some(prev), Some(last)) if class(prev) == 1 && class(c) == 2 => {
                // Capitals then lowercase: the last capital begins the next word (`USZa` is `US`, `Za`).
                if last.len() > 1 {
                    let capital = last.pop();
                    pieces.push(capital.map(String::from).unwrap_or_default());
                }
                false
            }
            (Some(prev), Some(_)) => class(prev) != class(c),
            _ => true,
        };
        if starts_piece {
            pieces.push(String::new());
        }
        if let Some(last) = pieces.last_mut() {
            last.push(c);
        }
        previous = Some(c);
    }
    pieces.len() >= 5 && (word.len() as f64) <= 2.0 * pieces.len() as f64
}

/// `regex.replace_all` with a replacement that may keep a match; allocates only when something changes.
fn replace(regex: &Regex, text: &str, mut f: impl FnMut(&str, &Captures<'_>) -> Option<String>) -> String {
    let mut out = String::new();
    let mut last = 0;
    for caps in regex.captures_iter(text) {
        let Some(whole) = caps.get(0) else { continue };
        if let Some(replacement) = f(text, &caps) {
            out.push_str(&text[last..whole.start()]);
            out.push_str(&replacement);
            last = whole.end();
        }
    }
    if last == 0 && out.is_empty() {
        return text.to_owned();
    }
    out.push_str(&text[last..]);
    out
}
