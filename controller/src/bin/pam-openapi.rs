//! Writes the OpenAPI document of pamd's HTTP API (`schemas/openapi.json`).
//!
//! Usage: `cargo run -p pam-controller --bin pam-openapi -- schemas/openapi.json`

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: pam-openapi FILE");
        return ExitCode::from(2);
    };
    if let Err(e) = std::fs::write(&path, pam_controller::api::routes::openapi_text()) {
        eprintln!("pam-openapi: write {}: {e}", path.to_string_lossy());
        return ExitCode::FAILURE;
    }
    eprintln!("wrote {}", path.to_string_lossy());
    ExitCode::SUCCESS
}
