//! `--summarizer extractive|llm` and its model options, shared by `lessrt run` (the run's summarizer actors) and
//! `lessrt dag build|backfill`: the runtime's deterministic `Extractive`, or `less-agents`' `LlmSummarizer` over a
//! live, recorded or replayed model.

use std::sync::Arc;

use less_agents::summarizer::LlmSummarizer;
use less_agents::{ModelSettings, ModelSource, live_model, model_for};
use less_runtime::LlmSpec;
use less_runtime::dag::{Extractive, Summarizer};

/// Who writes the summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SummarizerKind {
    /// Deterministic extraction of decisions, constraints, obligations and facts, citing their messages (no model).
    Extractive,
    /// A model behind an OpenAI-compatible API; a failed, empty or overlong answer escalates to the aggressive level,
    /// then to deterministic truncation, so summarizing never blocks on the model.
    Llm,
}

/// The summarizer and, for `llm`, its model.
#[derive(Debug, clap::Args)]
pub(crate) struct SummarizerChoice {
    /// Who writes the session, arc and epoch summaries.
    #[arg(long, value_enum, default_value_t = SummarizerKind::Extractive)]
    summarizer: SummarizerKind,
    /// With `--summarizer llm`: the API's base URL (default: $LESSRT_LLM_BASE_URL, else the local server of
    /// `scripts/local-llm.sh`).
    #[arg(long, value_name = "URL")]
    llm_base_url: Option<String>,
    /// With `--summarizer llm`: the model name sent with each request.
    #[arg(long, value_name = "NAME")]
    llm_model: Option<String>,
    /// With `--summarizer llm`: the environment variable holding the API key (none for a local server).
    #[arg(long, value_name = "VAR")]
    llm_api_key_env: Option<String>,
}

impl SummarizerChoice {
    /// Whether `--summarizer llm` was asked for.
    pub(crate) fn is_llm(&self) -> bool {
        self.summarizer == SummarizerKind::Llm
    }

    /// Whether a model option was given without `--summarizer llm`.
    /// Whether it names a model endpoint or key of its own (`--llm-base-url`, `--llm-api-key-env`).
    pub(crate) fn names_an_endpoint(&self) -> bool {
        self.llm_base_url.is_some() || self.llm_api_key_env.is_some()
    }

    fn misplaced_llm_option(&self) -> bool {
        let llm_only = self.llm_base_url.is_some() || self.llm_model.is_some() || self.llm_api_key_env.is_some();
        llm_only && !self.is_llm()
    }

    /// The summarizer the options name, its model answering as `source` says; `None` when the options do not fit
    /// together (a model option without `--summarizer llm`), a usage error the caller reports.
    pub(crate) fn summarizer(&self, source: &ModelSource) -> anyhow::Result<Option<Arc<dyn Summarizer>>> {
        if self.misplaced_llm_option() {
            return Ok(None);
        }
        match self.summarizer {
            SummarizerKind::Extractive => Ok(Some(Arc::new(Extractive))),
            SummarizerKind::Llm => {
                let spec = LlmSpec {
                    model: self.llm_model.clone(),
                    api_key_env: self.llm_api_key_env.clone(),
                    ..LlmSpec::default()
                };
                // An explicit URL beats the environment, which beats the default.
                let spec = match &self.llm_base_url {
                    Some(url) => ModelSettings::of(&LlmSpec { base_url: Some(url.clone()), ..spec }),
                    None => ModelSettings::from_env(&spec),
                };
                let live = live_model(&spec);
                let model = model_for(live, source).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
                Ok(Some(Arc::new(LlmSummarizer::new(model, format!("llm:{}", spec.model), spec.temperature))))
            }
        }
    }
}
