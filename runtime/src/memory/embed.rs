//! The local embedding model for stage-2 recall: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, mean pooling,
//! unit-normalised), run by ONNX Runtime loaded dynamically from a path. A query's products multiply the model's
//! int8 weights as int8 (`int8.rs` rewrites the graph for a second session); stored texts keep fp32 products.
//!
//! Nothing is downloaded here: `scripts/provision-model.sh` puts the files in the user cache, and [`ModelPaths`]
//! finds them (`LESSRT_MODEL_DIR`, `LESSRT_ORT_LIB` override). When something is missing, [`Embedder::load`] says
//! exactly what and how to fix it, and memory falls back to stage-1 recall, saying so in every result.
//!
//! Useful for: turning claims and queries into vectors, in batches, on a blocking thread.
//! Not for: ranking (see `Memory::query`) or storing vectors (see `vectors.rs`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

/// Dimensions of the model's vectors.
pub const DIMENSIONS: usize = 384;

/// Identity of the model; stored beside every vector so that a different model re-embeds instead of mixing spaces.
pub const MODEL_ID: &str = "all-MiniLM-L6-v2-int8/mean/256";

/// The ONNX Runtime library file the provisioning script installs.
pub const ORT_LIB_NAME: &str = "libonnxruntime.so.1.31.1";

/// Tokens per text; longer texts are truncated (sentence-transformers' setting for this model).
const MAX_LENGTH: usize = 256;

/// Texts per model call.
const BATCH: usize = 64;

/// The files the model needs, by name in the model directory.
pub const MODEL_FILES: [&str; 5] =
    ["model.onnx", "tokenizer.json", "config.json", "tokenizer_config.json", "special_tokens_map.json"];

/// Why the model could not be loaded or run; each says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A model file is missing or unreadable.
    #[error(
        "embedding model file {path} is missing ({source}); run scripts/provision-model.sh or set LESSRT_MODEL_DIR"
    )]
    ModelFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The ONNX Runtime library could not be loaded.
    #[error(
        "ONNX Runtime {path} could not be loaded ({message}); run scripts/provision-model.sh or set LESSRT_ORT_LIB"
    )]
    Runtime {
        /// The library.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The model loaded but failed to run.
    #[error("embedding failed: {0}")]
    Model(String),
}

/// Where the model and the runtime are looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPaths {
    /// The directory holding [`MODEL_FILES`].
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library.
    pub ort_lib: PathBuf,
}

impl ModelPaths {
    /// The paths from the environment: `LESSRT_MODEL_DIR` and `LESSRT_ORT_LIB`, else the user cache
    /// (`$LESSRT_CACHE_DIR`, else `$XDG_CACHE_HOME/lessrt`, else `~/.cache/lessrt`) where the provisioning script
    /// puts them.
    pub fn from_env() -> ModelPaths {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let cache = var("LESSRT_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("lessrt")))
            .or_else(|| var("HOME").map(|h| h.join(".cache").join("lessrt")))
            .unwrap_or_else(|| PathBuf::from(".lessrt-cache"));
        ModelPaths {
            model_dir: var("LESSRT_MODEL_DIR").unwrap_or_else(|| cache.join("models").join("all-MiniLM-L6-v2")),
            ort_lib: var("LESSRT_ORT_LIB").unwrap_or_else(|| cache.join("onnxruntime").join(ORT_LIB_NAME)),
        }
    }

    /// What is missing, one line each (empty: everything is in place). Used by `lessrt doctor`.
    pub fn missing(&self) -> Vec<PathBuf> {
        let mut missing: Vec<PathBuf> =
            MODEL_FILES.iter().map(|f| self.model_dir.join(f)).filter(|p| !p.is_file()).collect();
        if !self.ort_lib.is_file() {
            missing.push(self.ort_lib.clone());
        }
        missing
    }
}

/// How a query (one text, [`Embedder::embed_one`]) is multiplied. Stored texts ([`Embedder::embed`]) are always
/// multiplied as the model file says, so their vectors do not depend on the batch they were computed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryArithmetic {
    /// The int8 weights multiplied as int8, the query's activations quantized (`int8.rs`): the default, about twice
    /// as fast on a short query; the vector is within a cosine of 0.99 of the fp32 one.
    Int8,
    /// As the model file says (its int8 weights dequantized to fp32 once, every product in fp32).
    AsShipped,
}

/// The loaded model: one ONNX session for stored texts and, when the model stores int8 weights, a second one for
/// queries that multiplies them as int8. Calls to a session are serialised; run them off the async executor.
pub struct Embedder {
    texts: Mutex<TextEmbedding>,
    queries: Option<Mutex<TextEmbedding>>,
    int8_matmuls: usize,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("model", &MODEL_ID).field("int8_matmuls", &self.int8_matmuls).finish()
    }
}

/// ONNX Runtime allows one environment per process: the first load fixes the library, later loads reuse it.
static ENVIRONMENT: OnceLock<Result<(PathBuf, ort::environment::Environment), String>> = OnceLock::new();

fn environment(lib: &Path) -> Result<ort::environment::Environment, EmbedError> {
    let runtime_error = |message: String| EmbedError::Runtime { path: lib.to_owned(), message };
    if !lib.is_file() {
        return Err(runtime_error("no such file".into()));
    }
    let loaded = ENVIRONMENT.get_or_init(|| {
        let builder = ort::init_from(lib).map_err(|e| e.to_string())?;
        let env = builder.with_name("lessrt").with_telemetry(false).build().map_err(|e| e.to_string())?;
        Ok((lib.to_owned(), env))
    });
    match loaded {
        Ok((path, env)) if path == lib => Ok(env.clone()),
        Ok((path, _)) => Err(runtime_error(format!("this process already loaded {}", path.display()))),
        Err(message) => Err(runtime_error(message.clone())),
    }
}

impl Embedder {
    /// Loads the model from `paths`, queries multiplied as int8 unless `LESSRT_EMBED_QUERIES=as-shipped`; every
    /// missing piece is reported with its fix.
    pub fn load(paths: &ModelPaths) -> Result<Embedder, EmbedError> {
        let queries = match std::env::var("LESSRT_EMBED_QUERIES").as_deref() {
            Ok("as-shipped") => QueryArithmetic::AsShipped,
            _ => QueryArithmetic::Int8,
        };
        Embedder::load_as(paths, queries)
    }

    /// Loads the model from `paths`, queries multiplied as `queries` says.
    pub fn load_as(paths: &ModelPaths, queries: QueryArithmetic) -> Result<Embedder, EmbedError> {
        let onnx = read_model_file(paths, "model.onnx")?;
        let rewritten = match queries {
            QueryArithmetic::AsShipped => None,
            // A model the rewrite cannot read is used as it is: ONNX Runtime says what is wrong with it, if anything.
            QueryArithmetic::Int8 => match super::int8::int8_matmuls(&onnx) {
                Ok(rewritten) if rewritten.matmuls > 0 => Some(rewritten),
                Ok(_) => None,
                Err(unreadable) => {
                    tracing::warn!(target: "less.memory", "{unreadable}; queries are multiplied as the model says");
                    None
                }
            },
        };
        let texts = session(paths, onnx)?;
        // A runtime that cannot load the rewritten graph still embeds queries, in fp32 as stored texts.
        let queries = rewritten.and_then(|r| match session(paths, r.model) {
            Ok(session) => Some((session, r.matmuls)),
            Err(err) => {
                tracing::warn!(target: "less.memory", "the int8 query session did not load ({err}); queries are \
                    multiplied as the model says");
                None
            }
        });
        let int8_matmuls = queries.as_ref().map_or(0, |(_, n)| *n);
        Ok(Embedder { texts: Mutex::new(texts), queries: queries.map(|(s, _)| Mutex::new(s)), int8_matmuls })
    }

    /// How many of the model's matrix products multiply int8 for a query (0: all are fp32).
    pub fn int8_matmuls(&self) -> usize {
        self.int8_matmuls
    }

    /// Unit vectors for `texts`, in order, computed in batches.
    pub fn embed<S: AsRef<str> + Send + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // A batch is padded to its longest text: texts of similar length go together (by length in bytes, a cheap
        // proxy for tokens), and the vectors go back in the caller's order.
        let order = by_length(texts);
        let sorted: Vec<&str> = order.iter().map(|&i| texts[i].as_ref()).collect();
        let mut model = self.texts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let computed = model.embed(&sorted, Some(BATCH)).map_err(|e| EmbedError::Model(e.to_string()))?;
        drop(model);
        let mut vectors = vec![Vec::new(); computed.len()];
        for (vector, &at) in computed.into_iter().zip(&order) {
            if let Some(slot) = vectors.get_mut(at) {
                *slot = vector;
            }
        }
        checked(vectors, texts.len())
    }

    /// The unit vector of one text (a query), by the query session when there is one: alone in its batch, so the
    /// same text always gets the same vector.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let Some(queries) = &self.queries else { return Ok(self.embed(&[text])?.remove(0)) };
        let mut model = queries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let computed = model.embed([text], Some(1)).map_err(|e| EmbedError::Model(e.to_string()))?;
        drop(model);
        Ok(checked(computed, 1)?.remove(0))
    }
}

/// `vectors` if there are `expected` of them, each of [`DIMENSIONS`].
fn checked(vectors: Vec<Vec<f32>>, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vectors.len() != expected || vectors.iter().any(|v| v.len() != DIMENSIONS) {
        return Err(EmbedError::Model(format!(
            "the model returned {} vectors of {} dimensions for {expected} texts; expected {DIMENSIONS} dimensions",
            vectors.len(),
            vectors.first().map_or(0, Vec::len),
        )));
    }
    Ok(vectors)
}

fn read_model_file(paths: &ModelPaths, name: &str) -> Result<Vec<u8>, EmbedError> {
    let path = paths.model_dir.join(name);
    std::fs::read(&path).map_err(|source| EmbedError::ModelFile { path, source })
}

/// An ONNX session of `onnx` with the model directory's tokenizer.
fn session(paths: &ModelPaths, onnx: Vec<u8>) -> Result<TextEmbedding, EmbedError> {
    let tokenizer_files = TokenizerFiles {
        tokenizer_file: read_model_file(paths, "tokenizer.json")?,
        config_file: read_model_file(paths, "config.json")?,
        special_tokens_map_file: read_model_file(paths, "special_tokens_map.json")?,
        tokenizer_config_file: read_model_file(paths, "tokenizer_config.json")?,
    };
    let env = environment(&paths.ort_lib)?;
    let model = UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
    let mut options = InitOptionsUserDefined::new().with_environment(env).with_max_length(MAX_LENGTH);
    if let Some(threads) = std::env::var("LESSRT_EMBED_THREADS").ok().and_then(|t| t.parse().ok()) {
        options = options.with_intra_threads(threads);
    }
    // ONNX Runtime's pool threads spin between operators by default: on a machine whose cores are shared (other
    // processes, or the caller's own threads) the spinning takes the cycles the other intra-op thread needs.
    if std::env::var("LESSRT_EMBED_SPIN").as_deref() != Ok("1") {
        options = options.with_session_config("session.intra_op.allow_spinning", "0");
    }
    TextEmbedding::try_new_from_user_defined(model, options)
        .map_err(|e| EmbedError::Model(format!("loading {}: {e}", paths.model_dir.display())))
}

/// The positions of `texts` ordered by length (ties keep their order).
fn by_length<S: AsRef<str>>(texts: &[S]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].as_ref().len());
    order
}

/// Cosine of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_batched_by_length_and_every_position_comes_back_once() {
        let texts = ["a long text of many words", "short", "", "medium text", "short"];
        let order = by_length(&texts);
        assert_eq!(order, [2, 1, 4, 3, 0]);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4]);
    }
}
