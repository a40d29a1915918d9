//! The standard `process_*` metrics, read from `/proc/self` at
//! scrape time, the names and meanings of the Prometheus client
//! libraries' process collectors, so stock dashboards and alerts work.
//! Off Linux only `process_start_time_seconds` is reported.

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// `/proc` reports CPU time in clock ticks of `USER_HZ`, which the kernel
/// fixes at 100 for what it exports to user space on every architecture
/// (`sysconf(_SC_CLK_TCK)` answers the same).
const USER_HZ: f64 = 100.0;

#[derive(Debug)]
pub struct Process {
    /// Seconds since the epoch when this pamd started.
    started: f64,
}

impl Process {
    pub fn new() -> Process {
        Process {
            started: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }
}

/// What `/proc/self` says now; `None` where it cannot be read.
#[derive(Debug, Default, PartialEq)]
struct Read {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<i64>,
    virtual_bytes: Option<i64>,
    threads: Option<i64>,
    open_fds: Option<i64>,
    max_fds: Option<i64>,
}

fn read() -> Read {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |field: &str| -> Option<i64> {
        let line = status.lines().find(|l| l.starts_with(field))?;
        let n: i64 = line[field.len()..]
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(if line.ends_with("kB") { n * 1024 } else { n })
    };
    Read {
        cpu_seconds: std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| cpu_seconds(&s)),
        resident_bytes: kib("VmRSS:"),
        virtual_bytes: kib("VmSize:"),
        threads: kib("Threads:"),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| i64::try_from(d.count()).unwrap_or(i64::MAX)),
        max_fds: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|s| max_open_files(&s)),
    }
}

/// utime + stime (fields 14 and 15 of `/proc/self/stat`, counted after
/// the command name, which may hold spaces and parentheses).
fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<i64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = read();
        if let Some(v) = r.cpu_seconds {
            let c = ConstCounter::new(v);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                c.metric_type(),
            )?)?;
        }
        let gauges: [(&str, &str, Option<i64>); 5] = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                r.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                r.virtual_bytes,
            ),
            ("process_threads", "Number of OS threads", r.threads),
            (
                "process_open_fds",
                "Number of open file descriptors",
                r.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                r.max_fds,
            ),
        ];
        for (name, help, v) in gauges {
            if let Some(v) = v {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
        }
        let g = ConstGauge::new(self.started);
        g.encode(encoder.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            None,
            g.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_limits_are_read_past_an_odd_command_name() {
        let stat =
            "4242 (pam d) (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read() {
        let r = read();
        assert!(r.cpu_seconds.is_some_and(|s| s >= 0.0), "{r:?}");
        assert!(r.resident_bytes.is_some_and(|b| b > 0), "{r:?}");
        assert!(r.threads.is_some_and(|n| n >= 1), "{r:?}");
        assert!(r.open_fds.is_some_and(|n| n >= 3), "{r:?}");
        assert!(r.max_fds.is_some_and(|n| n >= 3), "{r:?}");
    }
}
