//! The HTTP client shared by the polled sources, and the plumbing their
//! pollers share: paging, change tracking, backoff, batch delivery.
//!
//! Every request is counted in `hcpflow_source_requests_total` (with its
//! duration) and every failure in `hcpflow_source_request_errors_total{kind}`.
//! Credentials come from a file that is re-read when it changes (token
//! rotation) and never appear in logs or errors.
//!
//! Split by concern: `client` talks HTTP, `pager` walks paged lists,
//! `wire` reads the upstreams' JSON, `tracker` decides what to send. The
//! pollers use them through the re-exports below, as `http::X`.

mod client;
mod pager;
mod tracker;
mod wire;

pub use client::{
    Backoff, BuildError, DEFAULT_BODY_LIMIT, HttpClient, RequestHook, SourceError, after, sanitise,
};
pub use pager::{MAX_PAGES, PAGE_ATTEMPTS, PagedList, Pager, RawItem, decode_item, get_page};
pub use tracker::{
    MASS_DELETION_MIN_KNOWN, MassDeletionGuard, Tracker, UpdateMode, deliver, extend_parsed,
};
pub use wire::{WireCondition, conditions, null_default, parse_time, sql_quote, transition_of};

/// The span of one poll cycle of `source` (docs/design/07-traces.md §7.6); the
/// poller records `poll_kind` once it knows which list it reads.
pub fn poll_span(source: &str) -> tracing::Span {
    tracing::info_span!(
        "poll",
        source,
        poll_kind = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Mark a failed poll's span as an error, so a trace backend shows it.
pub fn poll_done(span: &tracing::Span, ok: bool) {
    if !ok {
        span.record("otel.status_code", "ERROR");
    }
}
