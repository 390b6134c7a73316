//! Progress bars on stderr for work that takes more than a moment (`eval locomo`, `memory ingest`, `memory
//! reindex`, `dag build`/`backfill`, `bench`): [`Bars`] draws what the runtime reports through its
//! [`less_runtime::Progress`] trait, and what a command's own loops report through the same trait.
//!
//! Bars are drawn only when stderr is a terminal and `--quiet` is off: piped or redirected output, logs and tests
//! see nothing of them. One bar at a time: a new phase replaces the previous one, a finished phase clears its bar.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use less_runtime::Progress;

/// The progress of one command, drawn on stderr.
pub(crate) struct Bars {
    /// Whether anything is drawn.
    visible: bool,
    /// The current phase and its bar.
    current: Mutex<Option<(String, ProgressBar)>>,
}

impl Bars {
    /// Bars for a command: drawn when stderr is a terminal, unless `quiet`.
    pub(crate) fn new(quiet: bool) -> Arc<Bars> {
        Arc::new(Bars { visible: !quiet && std::io::stderr().is_terminal(), current: Mutex::new(None) })
    }

    /// Clears whatever bar is left (a phase that never reported its end, e.g. after an error).
    pub(crate) fn clear(&self) {
        if let Some((_, bar)) = self.current.lock().unwrap_or_else(PoisonError::into_inner).take() {
            bar.finish_and_clear();
        }
    }

    fn bar(phase: &str, total: u64) -> ProgressBar {
        let bar = if total > 0 {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {human_pos}/{human_len} ({eta} left)")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            bar
        } else {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar
        };
        bar.set_message(phase.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }
}

impl Bars {
    /// A hook for [`less_runtime::memory::Memory::on_embed_progress`]: embedding claims (in engrams) as a bar.
    pub(crate) fn embedding(self: &Arc<Bars>) -> impl FnMut(usize, usize) + Send + 'static {
        let bars = self.clone();
        move |done, total| bars.update("embedding claims", done as u64, total as u64)
    }
}

impl Progress for Bars {
    fn update(&self, phase: &str, done: u64, total: u64) {
        if !self.visible {
            return;
        }
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_none_or(|(name, _)| name != phase) {
            if let Some((_, old)) = current.take() {
                old.finish_and_clear();
            }
            *current = Some((phase.to_owned(), Bars::bar(phase, total)));
        }
        let Some((_, bar)) = current.as_ref() else { return };
        if total > 0 && bar.length() != Some(total) {
            bar.set_length(total);
        }
        bar.set_position(done);
        if total > 0 && done >= total {
            bar.finish_and_clear();
            *current = None;
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.clear();
    }
}
