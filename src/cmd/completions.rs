//! `lessrt completions SHELL`: shell completions generated from the command line's own definition (`clap_complete`),
//! so they list every command, option and value the binary accepts.

use std::process::ExitCode;

/// Arguments of `lessrt completions`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut command = crate::command();
    clap_complete::generate(args.shell, &mut command, "lessrt", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
