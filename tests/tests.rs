//! The one integration-test binary of lessrt. Each module tests one surface a user touches.

/// The attack suite: forged and misused grants, traversal, cross-project access, injection, hostile input.
mod attacks;
/// `lessrt bench`: every scenario in both modes, graded tasks, the bench files, the README's and docs' tables.
mod bench;
/// A real browser (headless chromium through chromedriver) for the tests of `lessrt serve`.
mod browser;
/// The `lessrt` command line, run as a user runs it: exit codes, output lines, JSON reports.
mod cli;
/// A run across `lessrt node` processes over ractor_cluster: the same report, a lost node, the cookie.
mod cluster;
/// `lessrt compact` and `lessrt eval context`: the context ledger from the command line.
mod context;
/// LLM agents against the real local model server, record and replay, the LLM summarizer.
mod llm;
/// `lessrt mcp` driven by the official Python MCP SDK over stdio.
mod mcp;
/// Regression tests of defects found by trying to break lessrt (issue 17), each through the built binary.
mod regression;
/// The runtime through its actors: gateway rules, grants, the resolver, restarts.
mod runtime;
/// `lessrt serve` and `lessrt run --serve`: the JSON API, the live stream, the page in a real browser.
mod serve;
/// Guard tests that keep the repository honest: module docs, schemas with examples, the documented error codes, links.
mod tidy;
