//! Standard output of the commands: `outln!` and `out!` in place of `println!` and `print!`.
//!
//! Rust ignores SIGPIPE, so writing into a pipe whose reader has gone (`lessrt dag show | head`) fails with
//! [`io::ErrorKind::BrokenPipe`]; `println!` panics on that. Here such a write ends the process quietly with status
//! 141, what a process killed by SIGPIPE reports; any other failure to write is one line on stderr and status 2
//! (could not run).

use std::fmt;
use std::io::{self, Write};

/// Status of a process whose standard output was closed by its reader (128 + SIGPIPE).
const EXIT_BROKEN_PIPE: u8 = 141;
/// Status of a process that could not write its standard output: could not run.
const EXIT_OUTPUT_FAILED: u8 = 2;

/// Writes `args` (and a newline when `newline`) to standard output, or ends the process as the module says.
pub(crate) fn write(args: fmt::Arguments<'_>, newline: bool) {
    let mut out = io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
    if let Err(err) = written {
        exit_on(&err);
    }
}

/// Ends the process after a failed write to standard output.
pub(crate) fn exit_on(err: &io::Error) -> ! {
    if err.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(EXIT_BROKEN_PIPE));
    }
    eprintln!("lessrt: cannot write to standard output: {err}");
    std::process::exit(i32::from(EXIT_OUTPUT_FAILED));
}

/// `println!` for the commands: see the module.
macro_rules! outln {
    () => { $crate::output::write(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), true) };
}

/// `print!` for the commands: see the module.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), false) };
}
