//! `hcp-flow demo` as a user runs it: the binary as a child process, its
//! banner read for each instance it started and the Prometheus scrape
//! configuration it printed, its stderr kept for the failure message. The
//! child is killed (by its pid) when the test ends before it exits.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_hcp-flow");

/// A running `hcp-flow demo`.
pub struct DemoProcess {
    pub child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Drop for DemoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DemoProcess {
    /// `child` with its stderr drained into memory.
    pub fn new(mut child: Child) -> DemoProcess {
        let stderr = match child.stderr.take() {
            Some(stream) => drain(stream),
            None => Arc::default(),
        };
        DemoProcess { child, stderr }
    }

    /// Everything it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The last `n` lines of its stderr.
    pub fn stderr_tail(&self, n: usize) -> String {
        let text = self.stderr();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// `hcp-flow demo ARGS` with `RUST_LOG=log`, and the lines it prints.
pub fn spawn(args: &[&str], log: &str) -> (DemoProcess, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .arg("demo")
        .args(args)
        .env("RUST_LOG", log)
        // Every thread at one priority, as in this process (common::init).
        .env("HCPFLOW_BACKGROUND_NICENESS", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines(child.stdout.take().unwrap());
    (DemoProcess::new(child), stdout)
}

/// One exporter the demo started.
#[derive(Debug)]
pub struct Instance {
    pub name: String,
    pub role: String,
    /// `http://host:port`
    pub base: String,
}

/// What the demo printed at startup.
pub struct Banner {
    pub instances: Vec<Instance>,
    pub scrape_yaml: String,
    pub scrape_path: std::path::PathBuf,
}

/// Every line of `stream`, read on a thread so the child never blocks on
/// a full pipe.
pub fn lines(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Everything `stream` writes, kept as it comes.
pub fn drain(stream: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    let rx = lines(stream);
    std::thread::spawn(move || {
        for line in rx {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

/// The banner up to its last line, within `limit`.
pub fn read_banner(demo: &DemoProcess, stdout: &mpsc::Receiver<String>, limit: Duration) -> Banner {
    let deadline = Instant::now() + limit;
    let mut printed = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stdout.recv_timeout(left) {
            Ok(line) => {
                let last = line.trim() == "Ctrl-C stops.";
                printed.push(line);
                if last {
                    break;
                }
            }
            Err(e) => panic!(
                "the demo's banner did not end ({e:?}):\n{}\n--- stderr ---\n{}",
                printed.join("\n"),
                demo.stderr()
            ),
        }
    }
    parse_banner(&printed)
}

fn parse_banner(printed: &[String]) -> Banner {
    let text = printed.join("\n");
    let mut instances: Vec<Instance> = Vec::new();
    let mut scrape = None;
    for (at, line) in printed.iter().enumerate() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("instance ") {
            // "instance NAME, role ROLE, reads …"
            let mut parts = rest.split(", ");
            let name = parts.next().unwrap().to_string();
            let role = parts
                .next()
                .and_then(|p| p.strip_prefix("role "))
                .unwrap_or_else(|| panic!("no role in `{line}`"))
                .to_string();
            instances.push(Instance {
                name,
                role,
                base: String::new(),
            });
        } else if let Some(url) = trimmed.split_whitespace().next()
            && let Some(base) = url.strip_suffix("/metrics")
        {
            let instance = instances
                .last_mut()
                .unwrap_or_else(|| panic!("a URL before any instance:\n{text}"));
            instance.base = base.to_string();
        } else if let Some(rest) = trimmed.strip_prefix("Prometheus scrape configuration (also in ")
        {
            // The YAML follows flush left, between blank lines, to paste.
            let yaml: Vec<&str> = printed[at + 1..]
                .iter()
                .skip_while(|l| l.is_empty())
                .take_while(|l| !l.is_empty())
                .map(String::as_str)
                .collect();
            let path = rest.trim_end_matches("):");
            scrape = Some((yaml.join("\n"), std::path::PathBuf::from(path)));
        }
    }
    assert!(
        instances.iter().all(|i| i.base.starts_with("http://")),
        "every instance has a metrics URL: {instances:?}\n{text}"
    );
    let (scrape_yaml, scrape_path) =
        scrape.unwrap_or_else(|| panic!("no scrape configuration printed:\n{text}"));
    Banner {
        instances,
        scrape_yaml,
        scrape_path,
    }
}
