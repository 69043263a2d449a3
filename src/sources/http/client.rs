//! One source's HTTP client (TLS, timeout, bearer token, body limit,
//! counting) and the pacing of its retries.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;
use tracing::Instrument;
use url::Url;

use crate::config::{Auth, HttpSourceConfig};
use crate::metrics::exporter::{ExporterMetrics, RequestErrorKind};
use crate::sources::health::cause_chain;

/// Largest response body read. Maestro pages of 100 bundles with nested
/// feedback stay far below; a body this large is an upstream bug.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// Longest part of an error body kept in an error message.
const ERROR_BODY_EXCERPT: usize = 256;

/// Why an upstream call failed. Each variant knows its `kind` label, and
/// its message (with [`crate::sources::health::cause_chain`]) names the
/// cause an SRE acts on: refused, DNS, the TLS verification reason, the
/// status with the start of the body, the JSON path that did not decode
/// (docs/design/09-reading-the-upstreams.md §9.8).
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
    #[error("GET {url}: {}", .kind.describe())]
    Transport {
        url: String,
        kind: RequestErrorKind,
        #[source]
        source: reqwest::Error,
    },
    #[error("GET {url}: no complete answer within the {}s deadline", .after.as_secs_f64())]
    Deadline { url: String, after: Duration },
    #[error("GET {url} answered HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        /// The start of the error body, sanitised, for the log.
        body: String,
    },
    #[error("GET {url}: body larger than the {limit} byte limit")]
    BodyTooLarge { url: String, limit: usize },
    #[error("refusing to follow {url}: it leaves the source's base URL {base}")]
    ForeignLink { url: String, base: String },
    #[error("GET {url}: body is not the expected JSON at `{path}` (near: {excerpt})")]
    Decode {
        url: String,
        /// Where in the document decoding stopped (`items[3].id`).
        path: String,
        /// The body around the failure, sanitised.
        excerpt: String,
        #[source]
        source: serde_json::Error,
    },
    /// A 200 that decoded but is not a well-formed list of its API: no
    /// items, another `kind`, or a `total` its items contradict. Never read
    /// as an empty list (docs/design/09-reading-the-upstreams.md §9.9).
    #[error("GET {url}: not a well-formed {expected}: {problem}")]
    NotAList {
        url: String,
        expected: &'static str,
        problem: String,
    },
    /// A list stopped between two pages because what it served is gone (the
    /// Maestro stream it reconciles was lost, docs/design/09b-reading-the-upstreams.md §9.10).
    #[error("the list stopped between two pages: {0}")]
    Interrupted(String),
}

impl SourceError {
    pub fn kind(&self) -> RequestErrorKind {
        match self {
            SourceError::Credentials { .. } => RequestErrorKind::credentials,
            SourceError::InvalidUrl { .. } | SourceError::ForeignLink { .. } => {
                RequestErrorKind::other
            }
            SourceError::Transport { kind, .. } => *kind,
            SourceError::Deadline { .. } => RequestErrorKind::timeout,
            SourceError::Status { status, .. } if *status >= 500 => RequestErrorKind::status_5xx,
            SourceError::Status { status, .. } if *status >= 400 => RequestErrorKind::status_4xx,
            SourceError::Status { .. } => RequestErrorKind::other,
            SourceError::BodyTooLarge { .. } => RequestErrorKind::body_too_large,
            SourceError::Decode { .. } | SourceError::NotAList { .. } => RequestErrorKind::decode,
            SourceError::Interrupted(_) => RequestErrorKind::other,
        }
    }

    /// A decode failure of `body` fetched from `url`, with the JSON path
    /// and the text around where it failed.
    pub fn decode(
        url: &Url,
        body: &[u8],
        err: serde_path_to_error::Error<serde_json::Error>,
    ) -> SourceError {
        let path = err.path().to_string();
        let source = err.into_inner();
        SourceError::Decode {
            url: url.to_string(),
            path,
            excerpt: excerpt_around(body, source.line(), source.column()),
            source,
        }
    }
}

impl RequestErrorKind {
    /// What the kind means, for the error message.
    fn describe(self) -> &'static str {
        match self {
            RequestErrorKind::timeout => "timed out",
            RequestErrorKind::connect_refused => "connection refused",
            RequestErrorKind::dns => "the host name did not resolve",
            RequestErrorKind::tls => "TLS handshake failed",
            RequestErrorKind::connect => "could not connect",
            _ => "request failed",
        }
    }
}

/// Sort a reqwest failure into its `kind` by walking its cause chain: reqwest
/// itself only says "connect" or "timeout". An `io::Error` hides the error
/// it wraps from `source()`, so each one is opened with `get_ref`.
pub fn classify(err: &reqwest::Error) -> RequestErrorKind {
    if err.is_timeout() {
        return RequestErrorKind::timeout;
    }
    let mut found = None;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        let mut inner = Some(e);
        while let Some(e) = inner {
            if e.downcast_ref::<rustls::Error>().is_some() {
                return RequestErrorKind::tls;
            }
            inner = match e.downcast_ref::<std::io::Error>() {
                Some(io) => {
                    match io.kind() {
                        std::io::ErrorKind::ConnectionRefused => {
                            found.get_or_insert(RequestErrorKind::connect_refused);
                        }
                        std::io::ErrorKind::TimedOut => {
                            found.get_or_insert(RequestErrorKind::timeout);
                        }
                        _ => {}
                    }
                    io.get_ref()
                        .map(|e| e as &(dyn std::error::Error + 'static))
                }
                None => None,
            };
        }
        // hyper-util's connector names a resolver failure "dns error"; it
        // has no type of its own to match.
        if e.to_string().starts_with("dns error") {
            found.get_or_insert(RequestErrorKind::dns);
        }
        cause = e.source();
    }
    match found {
        Some(kind) => kind,
        None if err.is_connect() => RequestErrorKind::connect,
        None => RequestErrorKind::other,
    }
}

/// At most [`ERROR_BODY_EXCERPT`] characters of `text`, control characters
/// (newlines included) replaced by spaces, so an upstream's error page
/// stays one bounded log line.
pub fn sanitise(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(ERROR_BODY_EXCERPT)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(ERROR_BODY_EXCERPT).is_some() {
        out.push('…');
    }
    out
}

/// An error body for the log and `/readyz`: the OCM error's
/// `operation_id` first when it has one (Clusters Service and Maestro
/// answer `{id, kind, href, code, reason, operation_id}`; the id is what
/// their logs are searched by, docs/design/15b-operations.md §15.13), then the body's
/// start, sanitised.
pub fn error_body(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct OcmError {
        operation_id: Option<String>,
    }
    let text = sanitise(&String::from_utf8_lossy(body));
    match serde_json::from_slice::<OcmError>(body)
        .ok()
        .and_then(|e| e.operation_id)
        .filter(|id| !id.is_empty())
    {
        Some(id) => format!("operation_id {}; {text}", sanitise(&id)),
        None => text,
    }
}

/// The body around `line`:`column` (1-based, as serde_json counts), at
/// most [`ERROR_BODY_EXCERPT`] characters, sanitised.
fn excerpt_around(body: &[u8], line: usize, column: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let offset = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>()
        + column.saturating_sub(1);
    let half = ERROR_BODY_EXCERPT / 2;
    let mut start = offset.saturating_sub(half).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let tail = &text[start..];
    let prefix = if start > 0 { "…" } else { "" };
    format!("{prefix}{}", sanitise(tail))
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
    /// The whole request's deadline, body included.
    total: Duration,
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
        // Three deadlines (docs/design/09-reading-the-upstreams.md §9.8): connecting, each read (an
        // upstream that accepted and went silent), and the whole request,
        // body included (a slow drip that never stalls a single read).
        let mut builder = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.connect_timeout.min(cfg.timeout))
            .read_timeout(cfg.timeout)
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
            total: cfg.timeout,
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

    /// GET `url` and decode its JSON body; a 404 is an error here.
    pub async fn get_json<T: DeserializeOwned>(&self, url: Url) -> Result<T, SourceError> {
        self.get_list(url, "", |_: &T| Ok(())).await
    }

    /// GET a list page and prove it is one (`check` says what is wrong with
    /// it, if anything) before anyone reads it: a 200 that is not a
    /// well-formed `expected` fails as `decode`, never as an empty list
    /// (docs/design/09-reading-the-upstreams.md §9.9).
    pub async fn get_list<T: DeserializeOwned>(
        &self,
        url: Url,
        expected: &'static str,
        check: impl FnOnce(&T) -> Result<(), String>,
    ) -> Result<T, SourceError> {
        match self
            .get(url.clone(), false, Some((expected, check)))
            .await?
        {
            Some(value) => Ok(value),
            // `get` turns a 404 into an error when it is not an answer.
            None => Err(SourceError::Status {
                url: url.to_string(),
                status: 404,
                body: String::new(),
            }),
        }
    }

    /// GET `url`; a 404 is an answer ("it is gone"), not an error.
    pub async fn get_json_or_absent<T: DeserializeOwned>(
        &self,
        url: Url,
    ) -> Result<Option<T>, SourceError> {
        self.get(url, true, None::<(&str, fn(&T) -> Result<(), String>)>)
            .await
    }

    /// One request in its own `upstream_request` span, a child of the
    /// caller's poll span (docs/design/07-traces.md §7.6): the traceparent hook runs
    /// inside it, so the upstream sees this request's span id.
    async fn get<T: DeserializeOwned>(
        &self,
        url: Url,
        absent_ok: bool,
        check: Option<(&'static str, impl FnOnce(&T) -> Result<(), String>)>,
    ) -> Result<Option<T>, SourceError> {
        let span = tracing::info_span!(
            "upstream_request",
            source = %self.source,
            http.request.method = "GET",
            url.path = %url.path(),
            http.response.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let result = self
            .get_decoded(&url, absent_ok, check.is_some())
            .instrument(span.clone())
            .await
            .and_then(|value| match (&value, check) {
                (Some(v), Some((expected, check))) => match check(v) {
                    Ok(()) => Ok(value),
                    Err(problem) => Err(SourceError::NotAList {
                        url: url.to_string(),
                        expected,
                        problem,
                    }),
                },
                _ => Ok(value),
            });
        if let Err(err) = &result {
            self.metrics.request_failed(&self.source, err.kind());
            span.record("error", tracing::field::display(cause_chain(err)));
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    async fn get_decoded<T: DeserializeOwned>(
        &self,
        url: &Url,
        absent_ok: bool,
        list: bool,
    ) -> Result<Option<T>, SourceError> {
        let body = match self.get_body(url).await? {
            Answer::Found(body) => body,
            Answer::NotFound(_) if absent_ok => return Ok(None),
            Answer::NotFound(body) => {
                return Err(SourceError::Status {
                    url: url.to_string(),
                    status: 404,
                    body: error_body(&body),
                });
            }
        };
        // Every list envelope is a JSON object; serde would also read a
        // struct from an array (`[[…]]` as a list with no items).
        if list
            && body
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|b| *b != b'{')
        {
            return Err(SourceError::NotAList {
                url: url.to_string(),
                expected: "a JSON object",
                problem: format!("the body starts with {:?}", excerpt_around(&body, 1, 1)),
            });
        }
        let mut de = serde_json::Deserializer::from_slice(&body);
        let value = serde_path_to_error::deserialize(&mut de)
            .map_err(|err| SourceError::decode(url, &body, err))?;
        // Text after the document (two documents, a trailing HTML error):
        // not the answer we asked for.
        de.end().map_err(|source| SourceError::Decode {
            url: url.to_string(),
            path: "(after the document)".to_string(),
            excerpt: excerpt_around(&body, source.line(), source.column()),
            source,
        })?;
        Ok(Some(value))
    }

    async fn get_body(&self, url: &Url) -> Result<Answer, SourceError> {
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token {
            headers.insert(AUTHORIZATION, token.header().await?);
        }
        if let Some(hook) = &self.hook {
            hook.add_headers(&mut headers);
        }
        let started = Instant::now();
        // reqwest's `timeout` already covers the body; this outer deadline
        // makes "no complete answer within `timeout`" hold whatever the
        // HTTP stack does with a slow-drip body (docs/design/09-reading-the-upstreams.md §9.8).
        let result = match tokio::time::timeout(self.total, self.send(url, headers)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(SourceError::Deadline {
                url: url.to_string(),
                after: self.total,
            }),
        };
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.request_done(&self.source, seconds);
        match &result {
            Ok(answer) => {
                let found = matches!(answer, Answer::Found(_));
                tracing::debug!(source = %self.source, %url, seconds, found, "GET")
            }
            Err(err) => {
                tracing::debug!(source = %self.source, %url, seconds, error = %cause_chain(err), "GET failed")
            }
        }
        result
    }

    async fn send(&self, url: &Url, headers: HeaderMap) -> Result<Answer, SourceError> {
        let transport = |source: reqwest::Error| SourceError::Transport {
            url: url.to_string(),
            kind: classify(&source),
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
        tracing::Span::current().record("http.response.status_code", status.as_u16());
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
        // Sized once from the announced length: growing by doubling copies
        // a large page several times and leaves each abandoned size behind
        // in the allocator, among the model's long-lived records.
        let mut body = Vec::with_capacity(
            response
                .content_length()
                .map_or(0, |len| len as usize)
                .min(self.body_limit),
        );
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > self.body_limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Answer::NotFound(body));
        }
        if !status.is_success() {
            return Err(SourceError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                body: error_body(&body),
            });
        }
        Ok(Answer::Found(body))
    }
}

/// A response the client reads on: a body, or a 404 with its body (an
/// answer on a GET by id, an error on a list).
enum Answer {
    Found(Vec<u8>),
    NotFound(Vec<u8>),
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
    fn excerpts_are_one_bounded_line() {
        let text = format!("a\r\nb\t\"c\"{}", "é".repeat(1000));
        let out = sanitise(&text);
        assert!(out.starts_with("a  b \"c\""), "{out}");
        assert_eq!(
            out.chars().count(),
            ERROR_BODY_EXCERPT + 1,
            "cut, marked with …"
        );
        assert!(!out.chars().any(char::is_control));
        assert_eq!(sanitise("short"), "short");
        // An OCM error body names its operation id first, however long
        // its reason.
        let ocm = format!(
            r#"{{"id":"503","kind":"Error","href":"/api/clusters_mgmt/v1/errors/503","code":"CLUSTERS-MGMT-503","reason":"{}","operation_id":"2d1c7f6a-0c1b"}}"#,
            "x".repeat(400)
        );
        let said = error_body(ocm.as_bytes());
        assert!(said.starts_with("operation_id 2d1c7f6a-0c1b; {"), "{said}");
        assert_eq!(error_body(b"<html>down</html>"), "<html>down</html>");
    }

    #[test]
    fn decode_excerpts_centre_on_the_failure() {
        let body = format!("{{\"pad\":\"{}\",\n\"total\": \"many\"}}", "x".repeat(500));
        let err = serde_json::from_str::<serde_json::Value>(&body.replace("\"many\"", "many"))
            .unwrap_err();
        let out = excerpt_around(
            body.replace("\"many\"", "many").as_bytes(),
            err.line(),
            err.column(),
        );
        assert!(out.starts_with('…'), "{out}");
        assert!(out.contains("\"total\": many"), "{out}");
        assert!(out.chars().count() <= ERROR_BODY_EXCERPT + 2);
    }

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
