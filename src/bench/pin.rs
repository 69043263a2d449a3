//! Scrape latency is measured with the exporter alone on one core and the
//! world and the scraping client on the other (docs/performance.md): on a
//! two-core machine, three busy parties sharing both cores measure the
//! scheduler, not the exporter. `taskset` (util-linux) does the pinning, so
//! the bench needs no platform code of its own.

use std::process::Command;

/// Where the bench runs each party.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// The exporter on CPU `exporter`, this process (world and scraper) on
    /// `others`.
    Pinned { exporter: usize, others: usize },
    /// Not pinned, and why.
    Shared(String),
}

impl Pinning {
    /// Pin this process (every thread) to the second CPU and say where the
    /// exporter goes, when there are two CPUs and `taskset` works.
    pub fn apply() -> Pinning {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return Pinning::Shared(format!("{cpus} CPU: nothing to separate"));
        }
        let (exporter, others) = (0, 1);
        let pinned = Command::new("taskset")
            .args(["-a", "-p", "-c", &others.to_string()])
            .arg(std::process::id().to_string())
            .output();
        match pinned {
            Ok(out) if out.status.success() => Pinning::Pinned { exporter, others },
            Ok(out) => Pinning::Shared(format!(
                "taskset refused: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Pinning::Shared(format!("taskset unavailable: {e}")),
        }
    }

    /// The command that starts the exporter: `exe` itself, or under
    /// `taskset -c CPU`.
    pub fn command(&self, exe: &std::path::Path) -> Command {
        match self {
            Pinning::Pinned { exporter, .. } => {
                let mut command = Command::new("taskset");
                command.args(["-c", &exporter.to_string()]).arg(exe);
                command
            }
            Pinning::Shared(_) => Command::new(exe),
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        match self {
            Pinning::Pinned { exporter, others } => format!(
                "exporter alone on CPU {exporter}; world and scraper on CPU {others} (taskset)"
            ),
            Pinning::Shared(why) => format!("not pinned ({why})"),
        }
    }
}
