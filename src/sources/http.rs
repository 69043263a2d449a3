//! The HTTP client shared by the polled sources, and the plumbing their
//! pollers share: paging, change tracking, backoff, batch delivery.
//!
//! Every request is counted in `hcpflow_source_requests_total` (with its
//! duration) and every failure in `hcpflow_source_request_errors_total{kind}`.
//! Credentials come from a file that is re-read when it changes (token
//! rotation) and never appear in logs or errors.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use jiff::Timestamp;
use parking_lot::Mutex;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use url::Url;

use crate::config::{Auth, HttpSourceConfig};
use crate::metrics::exporter::{ExporterMetrics, RequestErrorKind};
use crate::model::{
    Batch, Change, ClusterKey, Condition, ConditionStatus, Hop, HopView, Observation, Via,
};
use crate::sources::{Parsed, SourceContext, UnknownValue};

/// Largest response body read. Maestro pages of 100 bundles with nested
/// feedback stay far below; a body this large is an upstream bug.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// Longest part of an error body kept in an error message.
const ERROR_BODY_EXCERPT: usize = 256;

/// A paged list never has this many pages; stop rather than loop forever on
/// an upstream that keeps answering.
pub const MAX_PAGES: u64 = 100_000;

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

/// One item of a list, still as raw JSON text: decoding it later keeps one
/// malformed item from failing its page, and costs about the size of the
/// text, where a `serde_json::Value` tree costs several times that.
pub type RawItem = Box<serde_json::value::RawValue>;

/// The OCM-style paged list envelope (Clusters Service and Maestro):
/// `{kind, page, size, total, items}`.
#[derive(Debug, Deserialize)]
pub struct PagedList {
    #[serde(default)]
    pub total: Option<u64>,
    #[serde(default, deserialize_with = "null_default")]
    pub items: Vec<RawItem>,
}

/// Walks an OCM-style paged list (`page` is 1-based) one request, one page at
/// a time, so a caller turns each page into observations before the next is
/// fetched: a full relist of 10,000 Maestro bundles (over 100 MB of JSON)
/// never sits in memory at once.
pub struct Pager<'a> {
    path: &'a str,
    params: &'a [(&'a str, &'a str)],
    page_size: u32,
    page: u64,
    seen: u64,
    done: bool,
}

impl<'a> Pager<'a> {
    pub fn new(path: &'a str, params: &'a [(&'a str, &'a str)], page_size: u32) -> Pager<'a> {
        Pager {
            path,
            params,
            page_size: page_size.max(1),
            page: 1,
            seen: 0,
            done: false,
        }
    }

    /// The next page's items, or `None` when the list is complete.
    pub async fn next(&mut self, client: &HttpClient) -> Result<Option<Vec<RawItem>>, SourceError> {
        if self.done {
            return Ok(None);
        }
        let mut url = client.url(self.path)?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("page", &self.page.to_string())
                .append_pair("size", &self.page_size.to_string());
            for (key, value) in self.params {
                query.append_pair(key, value);
            }
        }
        let list: PagedList = client.get_json(url).await?;
        let count = list.items.len() as u64;
        self.seen += count;
        self.done = match list.total {
            Some(total) => self.seen >= total,
            None => count < u64::from(self.page_size),
        } || count == 0
            || self.page >= MAX_PAGES;
        self.page += 1;
        Ok(Some(list.items))
    }
}

/// Every page of a list, decoded item by item into `T` (malformed items are
/// skipped and counted under `field`). For lists whose typed items are small.
pub async fn list_all<T: DeserializeOwned>(
    client: &HttpClient,
    path: &str,
    params: &[(&str, &str)],
    page_size: u32,
    field: &'static str,
    unknown: &mut Vec<UnknownValue>,
) -> Result<Vec<T>, SourceError> {
    let mut pager = Pager::new(path, params, page_size);
    let mut out = Vec::new();
    while let Some(items) = pager.next(client).await? {
        out.extend(
            items
                .iter()
                .filter_map(|item| decode_item(item, field, unknown)),
        );
    }
    Ok(out)
}

/// Decode one list item, counting it under `field` when it is not the shape
/// we read (e.g. it lacks its id).
pub fn decode_item<T: DeserializeOwned>(
    item: &serde_json::value::RawValue,
    field: &'static str,
    unknown: &mut Vec<UnknownValue>,
) -> Option<T> {
    match serde_json::from_str(item.get()) {
        Ok(value) => Some(value),
        Err(err) => {
            unknown.push(UnknownValue {
                field,
                value: err.to_string(),
            });
            None
        }
    }
}

/// Deserialize `null` as the type's default (upstreams write `"items": null`
/// and `"conditions": null`).
pub fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Parse an upstream RFC 3339 time; a malformed one is counted under
/// `field` and read as absent (the model falls back to its own clock).
pub fn parse_time(
    raw: Option<&str>,
    field: &'static str,
    unknown: &mut Vec<UnknownValue>,
) -> Option<Timestamp> {
    let raw = raw.filter(|s| !s.is_empty())?;
    match raw.parse::<Timestamp>() {
        Ok(t) => Some(t),
        Err(_) => {
            unknown.push(UnknownValue {
                field,
                value: raw.to_string(),
            });
            None
        }
    }
}

/// A Kubernetes/ARM condition as it appears on the wire.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireCondition {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, deserialize_with = "null_default")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: Option<String>,
}

/// Turn wire conditions into model conditions. Conditions without a type
/// carry nothing and are dropped.
pub fn conditions(wire: &[WireCondition], unknown: &mut Vec<UnknownValue>) -> Vec<Condition> {
    wire.iter()
        .filter(|c| !c.kind.is_empty())
        .map(|c| Condition {
            kind: c.kind.clone(),
            status: ConditionStatus::from_upstream(&c.status),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition: parse_time(
                c.last_transition_time.as_deref(),
                "conditions.lastTransitionTime",
                unknown,
            ),
        })
        .collect()
}

/// The last transition time of the first present condition of `kinds`.
pub fn transition_of(conditions: &[Condition], kinds: &[&str]) -> Option<Timestamp> {
    kinds.iter().find_map(|kind| {
        conditions
            .iter()
            .find(|c| c.kind == *kind)
            .and_then(|c| c.last_transition)
    })
}

/// A hash of everything an observation says, to send only what changed.
/// Destructured field by field so a new `HopView` field cannot be forgotten.
pub fn fingerprint(view: &HopView) -> u64 {
    let HopView {
        state,
        phase,
        since,
        created_at,
        updated_at,
        conditions,
        identity,
        error,
        replicas,
        pods,
        fails_after_budget,
    } = view;
    let mut h = DefaultHasher::new();
    if let Some(f) = fails_after_budget {
        (f.since, &f.error.code, &f.error.message).hash(&mut h);
    }
    state.hash(&mut h);
    phase.hash(&mut h);
    since.hash(&mut h);
    created_at.hash(&mut h);
    updated_at.hash(&mut h);
    for c in conditions {
        let Condition {
            kind,
            status,
            reason,
            message,
            last_transition,
        } = c;
        (kind, status, reason, message, last_transition).hash(&mut h);
    }
    let crate::model::IdentityPatch {
        name,
        resource_id,
        subscription_id,
        resource_group,
        mgmt_cluster,
        namespace,
        platform,
        version,
    } = identity;
    (
        name,
        resource_id,
        subscription_id,
        resource_group,
        mgmt_cluster,
        namespace,
        platform,
        version,
    )
        .hash(&mut h);
    if let Some(e) = error {
        (&e.code, &e.message).hash(&mut h);
    }
    replicas
        .map(|r| (r.desired, r.current, r.ready))
        .hash(&mut h);
    pods.map(|p| (p.ready, p.not_ready)).hash(&mut h);
    h.finish()
}

/// Identifies one object of one hop, as the model keys it.
pub type ObjectKey = (ClusterKey, Hop, Via, String);

fn object_key(o: &Observation) -> ObjectKey {
    (o.key.clone(), o.hop, o.via, o.object.clone())
}

fn gone(key: ObjectKey) -> Observation {
    let (key, hop, via, object) = key;
    Observation {
        key,
        hop,
        via,
        object,
        change: Change::Gone,
    }
}

/// What a poller has sent, grouped by *owner* (the upstream object the
/// observations were read from: an ARM resource, a CS cluster, a bundle,
/// which may carry nested hops). It decides what to send next: objects whose
/// view changed, and `Gone` for objects an owner no longer shows.
#[derive(Debug, Default)]
pub struct Tracker {
    owners: HashMap<String, Vec<(ObjectKey, u64)>>,
}

/// How [`Tracker::update`] treats one owner's new observations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateMode {
    /// Send every observation, changed or not (relists, first sync).
    pub send_all: bool,
    /// The owner was only partly readable (e.g. unparsable feedback): keep
    /// the objects it did not show instead of declaring them gone.
    pub partial: bool,
}

impl Tracker {
    /// Record what `owner` shows now (`observations` are upserts) and push
    /// what must be sent to `out`.
    pub fn update(
        &mut self,
        owner: &str,
        observations: Vec<Observation>,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
    ) {
        let previous = self.owners.remove(owner).unwrap_or_default();
        let mut current: Vec<(ObjectKey, u64)> = Vec::with_capacity(observations.len());
        for obs in observations {
            let Change::Upsert(view) = &obs.change else {
                out.push(obs);
                continue;
            };
            let key = object_key(&obs);
            let print = fingerprint(view);
            let unchanged = previous.iter().any(|(k, p)| *k == key && *p == print);
            current.push((key, print));
            if mode.send_all || !unchanged {
                out.push(obs);
            }
        }
        for (key, print) in previous {
            if current.iter().any(|(k, _)| *k == key) {
                continue;
            }
            if mode.partial {
                current.push((key, print));
            } else {
                out.push(gone(key));
            }
        }
        if !current.is_empty() {
            self.owners.insert(owner.to_string(), current);
        }
    }

    /// The owner is gone upstream: `Gone` for everything it showed.
    pub fn remove(&mut self, owner: &str, out: &mut Vec<Observation>) {
        if let Some(objects) = self.owners.remove(owner) {
            out.extend(objects.into_iter().map(|(key, _)| gone(key)));
        }
    }

    pub fn contains(&self, owner: &str) -> bool {
        self.owners.contains_key(owner)
    }

    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.owners.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.owners.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
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

/// Count unknown values and deliver a batch. An empty batch is still sent
/// when `initial`, so the model knows the source completed its first sync.
pub fn deliver(
    ctx: &SourceContext,
    initial: bool,
    observed_at: Timestamp,
    observations: Vec<Observation>,
    unknown: &[UnknownValue],
) {
    for u in unknown {
        tracing::debug!(source = %ctx.name, field = u.field, value = %u.value, "unknown upstream value");
        ctx.metrics.unknown_value(&ctx.name, u.field);
    }
    if observations.is_empty() && !initial {
        return;
    }
    ctx.sink.apply(Batch {
        source: ctx.name.clone(),
        initial,
        observed_at,
        observations,
    });
}

/// Merge a parsed page into an accumulator.
pub fn extend_parsed(acc: &mut Parsed, more: Parsed) {
    acc.observations.extend(more.observations);
    acc.unknown.extend(more.unknown);
}

/// Quote a value for an OCM/Maestro `search` expression.
pub fn sql_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{HopView, Phase};

    fn upsert(id: &str, hop: Hop, object: &str, state: &str) -> Observation {
        Observation {
            key: ClusterKey::Id(id.to_string()),
            hop,
            via: Via::Maestro,
            object: object.to_string(),
            change: Change::Upsert(Box::new(HopView::new(state, Phase::Progressing))),
        }
    }

    fn summary(out: &[Observation]) -> Vec<(String, bool)> {
        out.iter()
            .map(|o| (o.object.clone(), matches!(o.change, Change::Gone)))
            .collect()
    }

    #[test]
    fn tracker_sends_changes_and_gone() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let first = vec![
            upsert("c", Hop::NodePool, "a", "x"),
            upsert("c", Hop::NodePool, "b", "x"),
        ];
        t.update("bundle", first.clone(), UpdateMode::default(), &mut out);
        assert_eq!(out.len(), 2);

        out.clear();
        t.update("bundle", first.clone(), UpdateMode::default(), &mut out);
        assert!(out.is_empty(), "nothing changed, nothing sent");

        t.update(
            "bundle",
            first.clone(),
            UpdateMode {
                send_all: true,
                partial: false,
            },
            &mut out,
        );
        assert_eq!(out.len(), 2, "relists send everything");

        out.clear();
        t.update(
            "bundle",
            vec![upsert("c", Hop::NodePool, "a", "y")],
            UpdateMode::default(),
            &mut out,
        );
        assert_eq!(
            summary(&out),
            vec![("a".to_string(), false), ("b".to_string(), true)]
        );

        out.clear();
        t.update(
            "bundle",
            vec![],
            UpdateMode {
                send_all: false,
                partial: true,
            },
            &mut out,
        );
        assert!(out.is_empty(), "a partial read keeps what it did not show");
        t.remove("bundle", &mut out);
        assert_eq!(summary(&out), vec![("a".to_string(), true)]);
        assert!(t.is_empty());
    }

    #[test]
    fn fingerprint_sees_every_change() {
        let base = HopView::new("installing", Phase::Progressing);
        let mut other = base.clone();
        other.identity.mgmt_cluster = Some("mgmt-1".into());
        assert_ne!(fingerprint(&base), fingerprint(&other));
        assert_eq!(fingerprint(&base), fingerprint(&base.clone()));
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

    #[test]
    fn quoting_doubles_single_quotes() {
        assert_eq!(sql_quote("a'b"), "'a''b'");
    }
}
