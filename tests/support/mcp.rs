//! The desk the MCP tests serve, for the raw protocol tests (`tests`) and the Python SDK's (`provisioned`).

use std::path::{Path, PathBuf};

const CONFIG: &str = r#"project = "demo"
[budget]
max_deref_tokens_total = 40
[clients.lead]
role = "lead"
[clients.dev]
role = "dev"
parent = "lead"
[clients.other]
role = "dev"
project = "elsewhere"
"#;

/// A workspace of three files (a long source, a short one, a test log) with the desk's configuration beside it.
pub(crate) fn workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    let long: String = (1..=60).map(|i| format!("fn f{i}() -> u32 {{ {i} }}\n")).collect();
    std::fs::write(ws.join("long.rs"), long).expect("write");
    std::fs::write(ws.join("short.rs"), "fn a() {}\n").expect("write");
    let log: String = (0..40).map(|i| format!("test suite::case_{i} ... ok PLANTED-{i}\n")).collect();
    std::fs::write(ws.join("report.txt"), log + "test result: ok. 40 passed; 0 failed\n").expect("write");
    std::fs::write(dir.join("desk.toml"), CONFIG).expect("write");
    ws
}
