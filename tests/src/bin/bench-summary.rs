//! bench-summary: reads the figures the benchmarks recorded
//! (`$PAM_BENCH_SUMMARY`, one JSON object per line, see
//! [`pam_tests::bench::record`]) and writes one JSON summary — every
//! figure with its baseline, ratio, target and verdict — then prints it as
//! a table. `scripts/bench` runs every benchmark and then this.
//!
//! `bench-summary FIGURES.jsonl SUMMARY.json`

use serde_json::{json, Value};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() == 3,
        "usage: bench-summary FIGURES.jsonl SUMMARY.json"
    );
    let text = std::fs::read_to_string(&args[1])?;
    let figures: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let missed = figures.iter().filter(|f| f["pass"] == false).count();
    let summary = json!({
        "date": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "figures": figures,
        "missed": missed,
    });
    std::fs::write(&args[2], serde_json::to_string_pretty(&summary)?)?;
    println!(
        "{:<62} {:>12} {:<10} {:>12} {:>8}  {:<40} verdict",
        "figure", "value", "unit", "baseline", "ratio", "target"
    );
    for f in &figures {
        let num = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.2}"));
        println!(
            "{:<62} {:>12} {:<10} {:>12} {:>8}  {:<40} {}",
            f["name"].as_str().unwrap_or(""),
            num(&f["value"]),
            f["unit"].as_str().unwrap_or(""),
            num(&f["baseline"]),
            f["ratio"]
                .as_f64()
                .map_or("-".to_string(), |r| format!("{r:.2}x")),
            f["target"].as_str().unwrap_or(""),
            if f["pass"] == true { "PASS" } else { "MISS" }
        );
    }
    println!(
        "{} figures, {missed} missed; summary written to {}",
        figures.len(),
        args[2]
    );
    Ok(())
}
