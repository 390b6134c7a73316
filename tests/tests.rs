//! The integration tests of lessrt that need nothing provisioned (plain `cargo test` runs them on a fresh clone).
//! Each module tests one surface a user touches; the tests that need the embedding model, the local LLM server,
//! chromium or the Python MCP client are in `provisioned.rs`.

/// The attack suite: forged and misused grants, traversal, cross-project access, injection, hostile input.
mod attacks;
/// `lessrt bench`: every scenario in both modes, graded tasks, the bench files, the README's and docs' tables.
mod bench;
/// The `lessrt` command line, run as a user runs it: exit codes, output lines, JSON reports.
mod cli;
/// A run across `lessrt node` processes over ractor_cluster: the same report, a lost node, the cookie.
mod cluster;
/// Turns at once: steps start when what they wait for ended, and the report does not depend on parallelism.
mod conduct;
/// `lessrt compact` and `lessrt eval context`: the context ledger from the command line.
mod context;
/// LLM agents without a server: recordings replayed, a dead server recorded, the local server's script.
mod llm;
/// `lessrt mcp` over its JSON-RPC bytes: tool schemas, refusals, configuration.
mod mcp;
/// Regression tests of defects found by trying to break lessrt (issue 17), each through the built binary.
mod regression;
/// `lessrt run --resume`: a killed run goes on from its ledger.
mod resume;
/// The runtime through its actors: gateway rules, grants, the resolver, restarts.
mod runtime;
/// `lessrt serve` and `lessrt run --serve`: the JSON API, the live stream, a baseline's sent text.
mod serve;
/// Helpers both test binaries share.
mod support;
/// Guard tests that keep the repository honest: module docs, schemas with examples, the documented error codes, links.
mod tidy;
