//! `lessrt doctor`: what this machine has for lessrt (the embedding model and ONNX Runtime), what is missing, and
//! the fix for each.

use std::process::ExitCode;
use std::time::Instant;

use less_runtime::memory::{Embedder, MODEL_FILES, MODEL_ID, ModelPaths};
use serde_json::{Value, json};

use super::args::OutputArgs;

/// Arguments of `lessrt doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// JSON: the findings as one object, {"ok", "model_dir", "ort_lib", "checks"}.
    #[command(flatten)]
    output: OutputArgs,
}

const FIX: &str = "run scripts/provision-model.sh (downloads from PyPI, checks sha256), or point LESSRT_MODEL_DIR and \
                   LESSRT_ORT_LIB at existing files";

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let paths = ModelPaths::from_env();
    let missing = paths.missing();
    let mut checks: Vec<Value> = Vec::new();
    for file in MODEL_FILES {
        let path = paths.model_dir.join(file);
        let found = path.is_file();
        checks.push(json!({"check": format!("model file {file}"), "ok": found, "path": path,
            "fix": if found { Value::Null } else { json!(FIX) }}));
    }
    let found = paths.ort_lib.is_file();
    checks.push(json!({"check": "ONNX Runtime library", "ok": found, "path": paths.ort_lib,
        "fix": if found { Value::Null } else { json!(FIX) }}));
    let rerank = if missing.is_empty() {
        let started = Instant::now();
        match Embedder::load(&paths).and_then(|e| {
            let loaded = started.elapsed();
            let probe = Instant::now();
            let v = e.embed_one("the dev server listens on port 5173")?;
            Ok((loaded, probe.elapsed(), v.len(), e.int8_matmuls()))
        }) {
            Ok((loaded, probe, dims, int8)) => json!({"check": "embedding model runs", "ok": true,
                "detail": format!("{} ({dims} dimensions, {int8} int8 products a query): loaded in {} ms, one \
                    embedding in {:.1} ms", MODEL_ID, loaded.as_millis(), probe.as_secs_f64() * 1000.0)}),
            Err(err) => json!({"check": "embedding model runs", "ok": false, "detail": err.to_string(), "fix": FIX}),
        }
    } else {
        json!({"check": "embedding model runs", "ok": false,
            "detail": "not tried: files are missing; memory recall runs on stage 1 (hash keys) only", "fix": FIX})
    };
    checks.push(rerank);
    let healthy = checks.iter().all(|c| c["ok"] == json!(true));
    let doc = json!({"ok": healthy, "model_dir": paths.model_dir, "ort_lib": paths.ort_lib, "checks": checks});
    args.output.emit(&doc, || {
        for check in &checks {
            let mark = if check["ok"] == json!(true) { "ok     " } else { "MISSING" };
            let detail = check.get("detail").or_else(|| check.get("path")).cloned().unwrap_or(Value::Null);
            let detail = detail.as_str().map_or_else(|| detail.to_string(), str::to_owned);
            outln!("{mark} {:<36} {detail}", check["check"].as_str().unwrap_or(""));
        }
        if !healthy {
            outln!("fix: {FIX}");
        }
        outln!(
            "{}",
            if healthy {
                "everything lessrt uses is in place: memory recall runs both stages"
            } else {
                "memory recall runs on stage 1 only until the model is provisioned"
            }
        );
    })?;
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
