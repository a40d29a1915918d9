//! Terminal facts: whether to colour, whether to ask, and writing data to
//! stdout without panicking when the reader goes away (`pamctl get | head`).

use std::io::{IsTerminal, Write};

/// Which stream a colour decision is for.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Colour only on a terminal, and never with `NO_COLOR` set (non-empty,
/// per no-color.org).
pub fn colour(stream: Stream) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if no_color {
        return false;
    }
    match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    }
}

/// ANSI styles used by pamctl (kept to a handful).
#[derive(Debug, Clone, Copy)]
pub enum Style {
    Red,
    Green,
    Cyan,
    Bold,
}

pub fn paint(on: bool, style: Style, text: &str) -> String {
    if !on {
        return text.to_string();
    }
    let code = match style {
        Style::Red => "1;31",
        Style::Green => "32",
        Style::Cyan => "36",
        Style::Bold => "1",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Writes data to stdout. A closed pipe ends pamctl quietly with success:
/// the reader has all it wanted.
pub fn out(text: &str) {
    out_bytes(text.as_bytes());
}

/// [`out`] for bytes that may not be UTF-8 (a run's raw log).
pub fn out_bytes(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    let result = stdout.write_all(bytes).and_then(|_| stdout.flush());
    if let Err(e) = result {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// [`out`] plus a newline.
pub fn outln(text: &str) {
    out(&format!("{text}\n"));
}

/// Talk for the operator (notes, progress): stderr.
pub fn note(text: &str) {
    eprintln!("{text}");
}

/// Asks a yes/no question on stderr, reading stdin; only call when stdin
/// is a terminal.
pub fn confirm(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}
