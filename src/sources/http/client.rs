//! One source's HTTP client (TLS, timeout, bearer token, body limit,
//! counting) and the pacing of its retries.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;
use url::Url;

use crate::config::{Auth, HttpSourceConfig};
use crate::metrics::exporter::{ExporterMetrics, RequestErrorKind};

/// Largest response body read. Maestro pages of 100 bundles with nested
/// feedback stay far below; a body this large is an upstream bug.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// Longest part of an error body kept in an error message.
const ERROR_BODY_EXCERPT: usize = 256;

/// Why an upstream call failed. Each variant knows its `kind` label.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("reading the bearer token file {path}")]
    Credentials {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building a request URL from {base} and {path}")]
    InvalidUrl {
        base: String,
        path: String,
        #[source]
        source: url::ParseError,
    },
    #[error("GET {url} failed ({kind:?})")]
    Transport {
        url: String,
        kind: RequestErrorKind,
        #[source]
        source: reqwest::Error,
    },
    #[error("GET {url} answered HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        /// The start of the error body, for the log.
        body: String,
    },
    #[error("GET {url}: body larger than the {limit} byte limit")]
    BodyTooLarge { url: String, limit: usize },
    #[error("refusing to follow {url}: it leaves the source's base URL {base}")]
    ForeignLink { url: String, base: String },
    #[error("GET {url}: body is not the expected JSON")]
    Decode {
        url: String,
        #[source]
        source: serde_json::Error,
    },
}

impl SourceError {
    pub fn kind(&self) -> RequestErrorKind {
        match self {
            SourceError::Credentials { .. } => RequestErrorKind::credentials,
            SourceError::InvalidUrl { .. } | SourceError::ForeignLink { .. } => {
                RequestErrorKind::other
            }
            SourceError::Transport { kind, .. } => *kind,
            SourceError::Status { status, .. } if *status >= 500 => RequestErrorKind::status_5xx,
            SourceError::Status { status, .. } if *status >= 400 => RequestErrorKind::status_4xx,
            SourceError::Status { .. } => RequestErrorKind::other,
            SourceError::BodyTooLarge { .. } => RequestErrorKind::body_too_large,
            SourceError::Decode { .. } => RequestErrorKind::decode,
        }
    }
}

/// Why a client could not be built from its config.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("reading the CA bundle {path}")]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing the CA bundle {path} as PEM")]
    ParseCa {
        path: PathBuf,
        #[source]
        source: reqwest::Error,
    },
    #[error("building the HTTP client")]
    Client(#[source] reqwest::Error),
}

/// Adds headers to every outgoing request: the place where a W3C
/// `traceparent` goes once the exporter traces its own polls.
pub trait RequestHook: Send + Sync {
    fn add_headers(&self, headers: &mut HeaderMap);
}

/// A bearer token kept in memory and re-read only when the file's mtime or
/// size changes, so a rotated token is used on the next request without a
/// read per request.
#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    cached: Mutex<Option<CachedToken>>,
}

#[derive(Debug)]
struct CachedToken {
    modified: Option<SystemTime>,
    len: u64,
    header: HeaderValue,
}

impl TokenFile {
    async fn header(&self) -> Result<HeaderValue, SourceError> {
        let err = |source| SourceError::Credentials {
            path: self.path.clone(),
            source,
        };
        let meta = tokio::fs::metadata(&self.path).await.map_err(err)?;
        let modified = meta.modified().ok();
        if let Some(cached) = self.cached.lock().as_ref()
            && cached.modified == modified
            && cached.len == meta.len()
        {
            return Ok(cached.header.clone());
        }
        let raw = tokio::fs::read_to_string(&self.path).await.map_err(err)?;
        let token = raw.trim();
        if token.is_empty() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the token file is empty",
            )));
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the token holds characters not allowed in an HTTP header",
            ))
        })?;
        header.set_sensitive(true);
        tracing::debug!(path = %self.path.display(), "bearer token (re)loaded");
        *self.cached.lock() = Some(CachedToken {
            modified,
            len: meta.len(),
            header: header.clone(),
        });
        Ok(header)
    }
}

/// One source's HTTP client: TLS, timeout, auth, body limit, counting.
#[derive(Clone)]
pub struct HttpClient {
    source: String,
    base_url: Url,
    client: reqwest::Client,
    token: Option<Arc<TokenFile>>,
    metrics: ExporterMetrics,
    body_limit: usize,
    hook: Option<Arc<dyn RequestHook>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("source", &self.source)
            .field("base_url", &self.base_url.as_str())
            .field("body_limit", &self.body_limit)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// Build the client of source `source` (the `source` label value).
    /// Needs a rustls crypto provider installed process-wide.
    pub fn new(
        source: &str,
        cfg: &HttpSourceConfig,
        metrics: ExporterMetrics,
    ) -> Result<HttpClient, BuildError> {
        let mut builder = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout)
            .user_agent(concat!("hcp-flow/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &cfg.ca_file {
            let pem = std::fs::read(path).map_err(|source| BuildError::ReadCa {
                path: path.clone(),
                source,
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                BuildError::ParseCa {
                    path: path.clone(),
                    source,
                }
            })?;
            builder = builder.tls_certs_merge(certs);
        }
        if cfg.insecure_skip_tls_verify {
            tracing::warn!(source, "TLS verification is turned off for this source");
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let client = builder.build().map_err(BuildError::Client)?;
        let token = match &cfg.auth {
            Auth::None => None,
            Auth::BearerTokenFile(path) => Some(Arc::new(TokenFile {
                path: path.clone(),
                cached: Mutex::new(None),
            })),
        };
        metrics.declare_source(source);
        Ok(HttpClient {
            source: source.to_string(),
            base_url: cfg.base_url.clone(),
            client,
            token,
            metrics,
            body_limit: DEFAULT_BODY_LIMIT,
            hook: None,
        })
    }

    pub fn with_body_limit(mut self, bytes: usize) -> HttpClient {
        self.body_limit = bytes;
        self
    }

    pub fn with_request_hook(mut self, hook: Arc<dyn RequestHook>) -> HttpClient {
        self.hook = Some(hook);
        self
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn metrics(&self) -> &ExporterMetrics {
        &self.metrics
    }

    /// `base_url` + `/` + `path`, keeping any path prefix of
    /// the base URL (an upstream behind a path-routing proxy).
    pub fn url(&self, path: &str) -> Result<Url, SourceError> {
        let base = self.base_url.as_str().trim_end_matches('/');
        let sep = if path.is_empty() || path.starts_with('/') {
            ""
        } else {
            "/"
        };
        Url::parse(&format!("{base}{sep}{path}")).map_err(|source| SourceError::InvalidUrl {
            base: self.base_url.to_string(),
            path: path.to_string(),
            source,
        })
    }

    /// Check that a link an upstream handed us (ARM `nextLink`) stays on the
    /// source's origin, so credentials are never sent elsewhere.
    pub fn same_origin(&self, link: &str) -> Result<Url, SourceError> {
        let foreign = || SourceError::ForeignLink {
            url: link.to_string(),
            base: self.base_url.to_string(),
        };
        Url::parse(link)
            .ok()
            .filter(|url| url.origin() == self.base_url.origin())
            .ok_or_else(|| {
                let err = foreign();
                self.metrics.request_failed(&self.source, err.kind());
                err
            })
    }

    /// GET `url` and decode its JSON body.
    pub async fn get_json<T: DeserializeOwned>(&self, url: Url) -> Result<T, SourceError> {
        match self.get_json_or_absent(url.clone()).await? {
            Some(value) => Ok(value),
            None => {
                let err = SourceError::Status {
                    url: url.to_string(),
                    status: 404,
                    body: String::new(),
                };
                self.metrics.request_failed(&self.source, err.kind());
                Err(err)
            }
        }
    }

    /// GET `url`; a 404 is an answer ("it is gone"), not an error.
    pub async fn get_json_or_absent<T: DeserializeOwned>(
        &self,
        url: Url,
    ) -> Result<Option<T>, SourceError> {
        let result = self.get_body(&url).await.and_then(|body| match body {
            None => Ok(None),
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| SourceError::Decode {
                        url: url.to_string(),
                        source,
                    })
            }
        });
        if let Err(err) = &result {
            self.metrics.request_failed(&self.source, err.kind());
        }
        result
    }

    async fn get_body(&self, url: &Url) -> Result<Option<Vec<u8>>, SourceError> {
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token {
            headers.insert(AUTHORIZATION, token.header().await?);
        }
        if let Some(hook) = &self.hook {
            hook.add_headers(&mut headers);
        }
        let started = Instant::now();
        let result = self.send(url, headers).await;
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.request_done(&self.source, seconds);
        match &result {
            Ok(body) => {
                tracing::debug!(source = %self.source, %url, seconds, found = body.is_some(), "GET")
            }
            Err(err) => {
                tracing::debug!(source = %self.source, %url, seconds, error = %err, "GET failed")
            }
        }
        result
    }

    async fn send(&self, url: &Url, headers: HeaderMap) -> Result<Option<Vec<u8>>, SourceError> {
        let transport = |source: reqwest::Error| SourceError::Transport {
            url: url.to_string(),
            kind: if source.is_timeout() {
                RequestErrorKind::timeout
            } else if source.is_connect() {
                RequestErrorKind::connect
            } else {
                RequestErrorKind::other
            },
            source,
        };
        let mut response = self
            .client
            .get(url.clone())
            .headers(headers)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let too_large = || SourceError::BodyTooLarge {
            url: url.to_string(),
            limit: self.body_limit,
        };
        if response
            .content_length()
            .is_some_and(|len| len > self.body_limit as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > self.body_limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let mut end = text.len().min(ERROR_BODY_EXCERPT);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            return Err(SourceError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                body: text[..end].to_string(),
            });
        }
        Ok(Some(body))
    }
}

/// Exponential backoff with jitter for failed syncs, so a struggling
/// upstream is not hammered at the fast interval.
#[derive(Debug, Clone)]
pub struct Backoff {
    failures: u32,
    base: Duration,
    cap: Duration,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff {
            failures: 0,
            base,
            cap: cap.max(base),
        }
    }

    /// The delay before the next attempt after one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.failures.min(16);
        self.failures = self.failures.saturating_add(1);
        let delay = self.base.saturating_mul(1 << exp).min(self.cap);
        // ±20 % so that restarted instances do not retry in lockstep.
        Duration::try_from_secs_f64(delay.as_secs_f64() * rand::random_range(0.8..1.2))
            .unwrap_or(delay)
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// `from + delay`, saturating far in the future instead of panicking on an
/// absurd configured interval.
pub fn after(from: Instant, delay: Duration) -> Instant {
    from.checked_add(delay)
        .unwrap_or_else(|| from + Duration::from_secs(365 * 24 * 3600))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
        let delays: Vec<f64> = (0..6).map(|_| b.next_delay().as_secs_f64()).collect();
        assert!(delays[0] >= 0.8 && delays[0] <= 1.2, "{delays:?}");
        assert!(delays[2] >= 3.2 && delays[2] <= 4.8, "{delays:?}");
        assert!(delays[5] <= 8.0 * 1.2, "{delays:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(1200));
    }
}
