//! less-agents: implementations of the agents that run inside lessrt's actor tree.
//!
//! The runtime (`less-runtime`) defines the contract and knows no concrete agent or LLM provider; this crate depends
//! on it and provides the agents: scripted agents driven by scenario steps, then OpenAI-compatible LLM agents and a
//! replaying agent for recorded runs. The root `lessrt` binary wires the two together.
//!
//! It is empty until the runtime issue lands the agent trait it implements.
