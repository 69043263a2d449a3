//! Headless Chromium (Debian's, or `HCPFLOW_CHROMIUM`): a page's DOM after
//! its scripts ran, and screenshots.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Chromium with a fresh profile in the test's directory.
pub struct Browser {
    program: String,
    profile: PathBuf,
}

impl Browser {
    pub fn new(dir: &Path) -> Browser {
        let program = std::env::var("HCPFLOW_CHROMIUM").unwrap_or_else(|_| "chromium".into());
        Browser {
            program,
            profile: dir.join("profile"),
        }
    }

    pub async fn run(&self, extra: &[String], url: &str) -> Vec<u8> {
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".to_string(),
            "--disable-gpu".to_string(),
            "--hide-scrollbars".to_string(),
            format!("--user-data-dir={}", self.profile.display()),
            // Long enough for the first fetches and render; the pages'
            // polling timers are virtual and cost no real time.
            "--virtual-time-budget=4000".to_string(),
        ];
        args.extend_from_slice(extra);
        args.push(url.to_string());
        let child = tokio::process::Command::new(&self.program)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): install Debian's chromium; .ci/run does",
                    self.program
                )
            });
        let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("{} did not finish {url} within 30s", self.program))
            .unwrap();
        assert!(output.status.success(), "{} failed on {url}", self.program);
        output.stdout
    }

    pub async fn dom(&self, url: &str) -> String {
        String::from_utf8(self.run(&["--dump-dom".to_string()], url).await).unwrap()
    }

    pub async fn screenshot(&self, url: &str, to: &Path) {
        self.run(
            &[
                format!("--screenshot={}", to.display()),
                "--window-size=1400,1000".to_string(),
            ],
            url,
        )
        .await;
        let png = std::fs::read(to).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
            "{} is not a screenshot of a rendered page ({} bytes)",
            to.display(),
            png.len()
        );
    }
}
