//! `manifest.json`: what a run directory does not otherwise say about its run, written by `lessrt run` when a mode
//! starts (the binary writes it; a view only reads it): the scenario's file and workspace (so `lessrt serve` can resolve the run's pointers afterwards), the
//! hierarchy (every agent, even one that never sent anything) and each agent's budget.
//!
//! A directory without one (written by an older lessrt, or by `lessrt bench`) is still served: `--scenario FILE`
//! supplies the same facts, and without it the hierarchy is read from the briefs and reports in the ledger and
//! pointers of files cannot be opened (`LESS_INPUT_UNREADABLE`, saying to pass `--scenario`).

use std::path::{Path, PathBuf};

use crate::{AgentKind, Budget, Scenario, WireMode};
use serde::{Deserialize, Serialize};

/// The file's name in a mode's directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// What `manifest.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// The scenario's name.
    pub scenario: String,
    /// Its one-line description.
    #[serde(default)]
    pub description: String,
    /// The mode this directory ran in (`less`, `verbatim`, `verbatim-whole`).
    pub mode: String,
    /// When the mode started (RFC 3339): a page watching the directory tells a new run from the last one by it.
    pub started_at: String,
    /// The scenario file, absolute.
    pub scenario_file: Option<PathBuf>,
    /// The workspace the run's pointers resolve in, absolute.
    pub workspace: Option<PathBuf>,
    /// The tokenizer the run counted with.
    pub tokenizer: String,
    /// The plan's goal.
    #[serde(default)]
    pub goal: String,
    /// Every agent, in the scenario's order.
    pub agents: Vec<ManifestAgent>,
    /// The number of steps the run drives.
    #[serde(default)]
    pub steps: usize,
}

/// One agent of the hierarchy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestAgent {
    /// Its id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// Its parent's id (none for the lead).
    pub parent: Option<String>,
    /// `scripted` or `llm`.
    pub kind: String,
    /// The budget its gateway enforces.
    pub budget: Budget,
}

impl Manifest {
    /// The manifest of `scenario` (loaded from `file`) run in `mode`, starting now.
    pub fn of(scenario: &Scenario, file: Option<&Path>, mode: WireMode) -> Manifest {
        let absolute = |path: &Path| path.canonicalize().ok().or_else(|| std::path::absolute(path).ok());
        Manifest {
            scenario: scenario.name.clone(),
            description: scenario.description.clone(),
            mode: mode.as_str().to_owned(),
            started_at: crate::now_rfc3339(),
            scenario_file: file.and_then(absolute),
            workspace: absolute(&scenario.workspace),
            tokenizer: scenario.tokenizer.to_string(),
            goal: scenario.plan.goal.clone(),
            agents: scenario
                .agents
                .iter()
                .map(|a| ManifestAgent {
                    id: a.id.clone(),
                    role: a.role.clone(),
                    parent: a.parent.clone(),
                    kind: match a.kind {
                        AgentKind::Scripted => "scripted".to_owned(),
                        AgentKind::Llm => "llm".to_owned(),
                    },
                    budget: scenario.budgets.of(&a.role),
                })
                .collect(),
            steps: scenario.steps.len(),
        }
    }

    /// Reads a mode directory's manifest; `None` when there is none or it does not parse.
    pub fn read(dir: &Path) -> Option<Manifest> {
        let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }
}
