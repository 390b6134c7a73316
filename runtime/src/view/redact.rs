//! What the page may show of a run: every string of an answer redacted (secrets and IP addresses, with the context
//! ledger's [`crate::context::redact`], the one the DAG and its answers use), but identifiers and digests, which the
//! redaction would take for secrets; a grant's MAC never shown. `lessrt serve` puts every API answer through
//! [`redacted`], so no secret in a workspace file, a claim or an archived message reaches the page.

use serde_json::Value;

/// Keys whose values are identifiers or digests: a value there shaped like one ([`id_shaped`]) is left as it is (a
/// digest is a long hex run, which the redaction would take for a secret); any other value is redacted like free
/// text, since an id is written by whoever wrote the document.
const VERBATIM_KEYS: [&str; 14] = [
    "digest",
    "pinned",
    "id",
    "msg_id",
    "brief_id",
    "grant_id",
    "request_id",
    "seq",
    "superseded_by",
    "supersedes",
    "contradictions",
    "returned",
    "via_grant",
    "answers",
];

/// `value` with every string redacted (secrets and IP addresses, as the DAG and the context ledger redact), but
/// identifiers; a grant's MAC is left out (it stays with the gateway that verified it).
pub fn redacted(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::String(text) => {
                let clean = redact_text(text);
                if clean != *text {
                    *text = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            Value::Object(object) => {
                if let Some(mac) = object.get_mut("mac")
                    && mac.is_string()
                {
                    *mac = Value::String("(kept by the gateway)".to_owned());
                }
                for (key, item) in object.iter_mut() {
                    let ids = || match &*item {
                        Value::String(text) => id_shaped(text),
                        Value::Array(items) => items.iter().all(|i| i.as_str().is_some_and(id_shaped)),
                        other => !other.is_object(),
                    };
                    if key == "mac" || (VERBATIM_KEYS.contains(&key.as_str()) && ids()) {
                        continue;
                    }
                    walk(item);
                }
            }
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// Whether `text` is shaped like an identifier the redaction could mistake for a secret: a digest or hash (hex
/// digits, perhaps after `blake3:`), or a short word and a hex run (`eg_0f8c…`, `m-3a9…`). Anything else under an id
/// key goes through the redaction like free text.
fn id_shaped(text: &str) -> bool {
    let body = text.strip_prefix("blake3:").unwrap_or(text);
    let hex = |s: &str| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if hex(body) {
        return true;
    }
    match body.find(['_', '-']) {
        Some(at) => {
            let (word, run) = (&body[..at], &body[at + 1..]);
            (1..=12).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_alphabetic()) && hex(run)
        }
        None => false,
    }
}

/// A text redacted; the digests in it (`blake3:` and 64 hex digits, in a document's JSON) are kept, since the
/// redaction takes any long hex run for a secret, and a grant's MAC is hidden.
pub fn redact_text(text: &str) -> String {
    const PREFIX: &str = "blake3:";
    let text = hide_macs(text);
    if !text.contains(PREFIX) {
        return crate::context::redact(&text).text;
    }
    // Digests are set aside behind markers the redaction leaves alone (private-use characters), then put back.
    let mut kept = Vec::new();
    let mut masked = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(PREFIX) {
        let hex = &rest[at + PREFIX.len()..];
        let n_hex = hex.bytes().take_while(u8::is_ascii_hexdigit).count();
        if n_hex == 64 {
            masked.push_str(&rest[..at]);
            masked.push_str(&format!("\u{e000}{}\u{e001}", kept.len()));
            kept.push(&rest[at..at + PREFIX.len() + 64]);
            rest = &hex[64..];
        } else {
            masked.push_str(&rest[..at + PREFIX.len()]);
            rest = hex;
        }
    }
    masked.push_str(rest);
    let mut clean = crate::context::redact(&masked).text;
    for (n, digest) in kept.iter().enumerate() {
        clean = clean.replace(&format!("\u{e000}{n}\u{e001}"), digest);
    }
    clean
}

/// A grant's MAC inside a text (an archived message holds the grant's JSON): replaced.
fn hide_macs(text: &str) -> String {
    const KEY: &str = "\"mac\":\"";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let value = &rest[at + KEY.len()..];
        out.push_str(&rest[..at + KEY.len()]);
        out.push_str("(kept by the gateway)");
        rest = value.find('"').map_or("", |end| &value[end..]);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A secret in any free text is redacted; digests and ids are not; a grant's MAC is never shown.
    #[test]
    fn answers_are_redacted_but_identifiers() {
        let digest = format!("blake3:{}", "ab".repeat(32));
        let value = redacted(json!({
            "claim": "the staging password=hunter2-very-secret is in the wiki",
            "digest": digest,
            "id": "eg_0f8c2d5769c98528",
            "grant": {"mac": digest, "grant_id": "g1"},
        }));
        assert!(!value["claim"].as_str().unwrap_or_default().contains("hunter2"), "{value}");
        assert_eq!(value["digest"], json!(digest));
        assert_eq!(value["id"], "eg_0f8c2d5769c98528");
        assert_eq!(value["grant"]["mac"], "(kept by the gateway)");
        // An id is written by whoever wrote the document: a secret placed there is redacted all the same.
        let leaky = redacted(json!({
            "id": "ghp_0123456789abcdefghijABCDEFGHIJklmnop",
            "msg_id": "password=hunter2-very-secret",
            "returned": ["eg_0f8c2d5769c98528", "sk-proj-0123456789abcdefghijKLMNOP"],
        }));
        for (key, secret) in [("id", "ghp_0123"), ("msg_id", "hunter2"), ("returned", "sk-proj-0123")] {
            assert!(!leaky[key].to_string().contains(secret), "{key}: {leaky}");
        }
        assert!(id_shaped("m-0f8c2d5769c9") && id_shaped(&digest) && id_shaped("4f2a9c1"), "ids and digests pass");
        let text = format!("{{\"grant_id\":\"g1\",\"mac\":\"{digest}\",\"uses\":1}}");
        assert_eq!(hide_macs(&text), "{\"grant_id\":\"g1\",\"mac\":\"(kept by the gateway)\",\"uses\":1}");
        let doc = format!("{{\"digest\":\"{digest}\",\"claim\":\"token sk-live-0123456789abcdefghijklmnop\"}}");
        let clean = redact_text(&doc);
        assert!(clean.contains(&digest) && !clean.contains("sk-live-0123456789"), "{clean}");
    }
}
