//! A run across processes: agents (with their gateways) on `lessrt node` worker nodes, over `ractor_cluster`.
//!
//! ```text
//! head (lessrt run)                                 node n1 (lessrt node)          node n2 (lessrt node)
//! RunSupervisor                                     NodeHost "lessrt:node:n1"      NodeHost "lessrt:node:n2"
//! ├── TokenLedger, ResolverActor, MemoryActor,      └── GatewayActor(a) → Agent    └── GatewayActor(b) → Agent
//! │   SummarizerSupervisor (the run's state)
//! ├── HeadBridge (ids, archive, memory for nodes)
//! └── GatewayActor(lead) → Agent  (unplaced agents)
//! ```
//!
//! The head keeps what must be one per run: the supervisor and driver, the ledger, the resolver and the memory. A
//! worker node hosts agents and, beside each, its gateway, so everything an agent receives was admitted by its own
//! gateway on its own node. Nodes find each other's actors through ractor's process groups (`pg`), which
//! `ractor_cluster` keeps in sync between connected nodes: the head's services and every gateway join a group named
//! after the run and the actor. The messages that cross are written as JSON ([`serial`]).
//!
//! Nodes authenticate with ractor_cluster's magic-cookie handshake (a challenge on a shared secret); the cookie is
//! required, and a connection that fails the handshake is refused and logged. With TLS ([`Tls`]: certificates from
//! files, mutual, one CA) the link is encrypted and a peer without a certificate the CA signed is refused before the
//! cookie is checked; without it, nodes stay on loopback (a node listens elsewhere, and the head places agents on a
//! node elsewhere, only over TLS), since the run's grant key crosses the link.
//!
//! The head pings every node's host a few times per heartbeat timeout; a node silent for longer is lost like one whose
//! connection dropped (its connection is closed). A lost node's agents move to the live worker node with the fewest
//! agents (the head when none is left), their gateways taking back from the head's ledger what they had.

pub(crate) mod head;
pub(crate) mod host;
pub(crate) mod serial;
mod tls;

use std::time::Duration;

pub(crate) use head::HeadMsg;
pub use head::{ClusterFile, ClusterHandle, ClusterOptions, DEFAULT_HEARTBEAT_TIMEOUT};
pub use host::{FactoryMaker, HostMsg, HostSpec, ModelDirs, NodeHandle, start_node};
pub use tls::{Tls, TlsFiles};

/// The process group of a run's actor: `<run key>:<actor>` (the run key is the run id and its mode).
pub(crate) fn group(run_key: &str, actor: &str) -> String {
    format!("lessrt:{run_key}:{actor}")
}

/// The process group of a node's host actor.
pub(crate) fn node_group(name: &str) -> String {
    format!("lessrt:node:{name}")
}

/// Longest the head waits for a node to connect and show its host, and for a group to appear on a node.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a connection to a node server may take to pass the cookie handshake before it is closed: a peer that
/// opens connections and never finishes would otherwise hold them (and their sessions) for as long as it likes.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The fewest characters other than whitespace a cookie has.
pub const MIN_COOKIE_CHARS: usize = 16;

/// The cookie from the environment variable `var`: required, at least [`MIN_COOKIE_CHARS`] characters that are not
/// whitespace (sixteen spaces are as guessable as none).
pub fn cookie_from_env(var: &str) -> Result<String, String> {
    match std::env::var(var) {
        Ok(cookie) => check_cookie(&cookie).map(|()| cookie).map_err(|why| format!("the cookie in ${var} {why}")),
        Err(_) => Err(format!(
            "no cookie: set ${var} to a shared secret of at least {MIN_COOKIE_CHARS} characters (the same on the head \
             and every node)"
        )),
    }
}

/// The least a cookie's characters must carry, in bits: their count times the entropy of their frequencies (a
/// repeated character or a short cycle carries little whatever its length; 16 random hex digits carry 64).
pub const MIN_COOKIE_BITS: f64 = 48.0;

/// Whether `cookie` can be a secret: printable ASCII (spaces aside, which do not count), at least
/// [`MIN_COOKIE_CHARS`] characters, and at least [`MIN_COOKIE_BITS`] of estimated entropy. The error says what is wrong
/// with it.
fn check_cookie(cookie: &str) -> Result<(), String> {
    const HOW: &str = "use a random secret of printable ASCII, e.g. `openssl rand -hex 16`";
    if let Some(bad) = cookie.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
        return Err(format!("holds {:?} (U+{:04X}), which is not printable ASCII: {HOW}", bad, u32::from(bad)));
    }
    let solid: Vec<char> = cookie.chars().filter(|c| *c != ' ').collect();
    if solid.is_empty() {
        return Err(format!("is blank: {HOW}"));
    }
    if solid.len() < MIN_COOKIE_CHARS {
        return Err(format!(
            "has {} characters that are not whitespace, fewer than {MIN_COOKIE_CHARS}: {HOW}",
            solid.len()
        ));
    }
    let bits = entropy_bits(&solid);
    if bits < MIN_COOKIE_BITS {
        return Err(format!(
            "is too predictable (about {bits:.0} bits in its repeated characters, at least {MIN_COOKIE_BITS:.0} needed): \
             {HOW}"
        ));
    }
    Ok(())
}

/// `chars`' length times the Shannon entropy of their frequencies, in bits.
fn entropy_bits(chars: &[char]) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in chars {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = chars.len() as f64;
    let per_char: f64 = counts.values().map(|&k| k as f64 / n).map(|p| -p * p.log2()).sum();
    per_char * n
}

/// The members of `group` on this node or any connected one; waits up to `timeout` for one to appear.
pub(crate) async fn wait_for_group(group: &str, timeout: Duration) -> Option<ractor::ActorCell> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let members = ractor::pg::get_members(&group.to_owned());
        // A member of a lost node may linger a moment: prefer a live one.
        if let Some(cell) = members.into_iter().find(|c| c.get_status() == ractor::ActorStatus::Running) {
            return Some(cell);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Logs the sessions a node server opens and closes, and says so when one closed before it authenticated: a peer
/// that failed the cookie handshake (or went away during it) is refused.
pub(crate) struct SessionLog {
    pub(crate) node: String,
    pub(crate) authenticated: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<ractor::ActorId>>>,
    pub(crate) lost: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// The addresses of peers refused, newest last.
    pub(crate) refused: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ractor_cluster::NodeEventSubscription for SessionLog {
    fn node_session_opened(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        tracing::info!(target: "less.cluster", "{}: connection from {}", self.node, ses.peer_addr);
        // A session not authenticated by the deadline is stopped, which closes its connection (and logs the
        // refusal below, as for a wrong cookie).
        let authenticated = self.authenticated.clone();
        let node = self.node.clone();
        let session = ses.actor.clone();
        tokio::spawn(async move {
            tokio::time::sleep(HANDSHAKE_TIMEOUT).await;
            let passed =
                authenticated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&session.get_id());
            if !passed && session.get_status() == ractor::ActorStatus::Running {
                tracing::warn!(target: "less.cluster", "{node}: a connection did not pass the handshake within {} s; closing it", HANDSHAKE_TIMEOUT.as_secs());
                session.stop(Some("the cookie handshake took too long".to_owned()));
            }
        });
    }

    fn node_session_disconnected(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        let id = ses.actor.get_id();
        let was_in = self.authenticated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
        let peer = ses.peer_name.as_ref().map(|n| n.name.clone()).unwrap_or_else(|| "an unnamed peer".to_owned());
        if was_in {
            tracing::warn!(target: "less.cluster", "{}: node {peer} at {} disconnected", self.node, ses.peer_addr);
            if let Some(lost) = &self.lost {
                // ractor_cluster names a peer `name@host`; runs know nodes by name.
                let name = peer.split('@').next().unwrap_or_default().to_owned();
                let _ = lost.send(name);
            }
        } else {
            self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(ses.peer_addr.clone());
            // Logged at error level on purpose: a refusal is what an operator must see (the binary shows errors on
            // stderr by default; the runtime itself never prints).
            tracing::error!(
                target: "less.cluster",
                "{}: refused a connection from {} ({peer}): the cookie handshake failed (a wrong cookie, or not a \
                 lessrt node)",
                self.node,
                ses.peer_addr
            );
        }
    }

    fn node_session_authenticated(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        self.authenticated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(ses.actor.get_id());
        let peer = ses.peer_name.as_ref().map(|n| n.name.clone()).unwrap_or_default();
        tracing::info!(target: "less.cluster", "{}: node {peer} at {} authenticated", self.node, ses.peer_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cookie is a secret only with 16 characters that are not whitespace (issue 34: 16 spaces were accepted).
    #[test]
    fn a_cookie_needs_sixteen_characters_that_are_not_whitespace() {
        assert!(check_cookie("0123456789abcdef").is_ok());
        assert!(check_cookie(" 0123456789 abcdef ").is_ok());
        for blank in [" ".repeat(16), String::new()] {
            assert!(check_cookie(&blank).is_err_and(|why| why.starts_with("is blank")), "{blank:?}");
        }
        let short = check_cookie("abc def ghi jkl mno").expect_err("15 characters that are not whitespace");
        assert!(short.contains("has 15 characters"), "{short}");
    }

    /// Weak cookies are refused (issue 61): one character repeated, invisible or control characters, a short cycle;
    /// what `openssl rand -hex 16` and `-base64 24` print is accepted.
    #[test]
    fn a_cookie_is_printable_ascii_and_hard_to_guess() {
        let invisible = check_cookie(&"\u{200b}".repeat(16)).expect_err("zero-width spaces");
        assert!(invisible.contains("U+200B") && invisible.contains("not printable ASCII"), "{invisible}");
        let control = check_cookie(&"\u{1}".repeat(16)).expect_err("control bytes");
        assert!(control.contains("U+0001"), "{control}");
        assert!(check_cookie(&"\t\n \u{a0}".repeat(8)).is_err(), "tabs, newlines and no-break spaces");
        for weak in ["a".repeat(16), "a".repeat(64), "ab".repeat(16), "abcd".repeat(4)] {
            let why = check_cookie(&weak).expect_err("predictable");
            assert!(why.contains("too predictable"), "{weak}: {why}");
        }
        for strong in ["9f86d081884c7d659a2feaa0c55ad015", "3q2+7wIeDcBQ5u0hBv1jQm5OaF7xY0Zl", "0123456789abcdef"] {
            assert_eq!(check_cookie(strong), Ok(()), "{strong}");
        }
    }
}
