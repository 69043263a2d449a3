//! The HTTP surface: `/metrics`, `/healthz`, `/readyz`, `/api/v1/clusters`,
//! `/api/v1/clusters/{cluster_id}`, and the web UI's routes (`crate::ui`).

use std::io::Write;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::api::timeline_json;
use crate::config::UiConfig;
use crate::metrics::exposition::{Format, Sink, WriteSink};
use crate::metrics::fleet::{FamilyId, RenderedCluster};
use crate::store::Store;

pub fn router(store: Arc<Store>, ui: UiConfig) -> Router {
    let rows = crate::ui::Rows::new(store.clone());
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/clusters", get(clusters))
        // A wildcard: self-managed ids hold a `/`, provisional ids and ARM
        // resource ids many.
        .route("/api/v1/clusters/{*cluster_id}", get(cluster))
        .with_state(store)
        .layer(Extension(rows.clone()))
        .merge(crate::ui::routes(rows, ui))
}

/// Serve the exporter's routes until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<Store>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_router(listener, router(store, UiConfig::default()), shutdown).await
}

/// Serve `routes` (the exporter's, perhaps with more) until `shutdown` resolves.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    routes: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(crate::tcp::no_delay(listener), routes)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Bytes per chunk of a streamed `/metrics` body.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks assembled ahead of the socket: what a slow scraper can cost.
const CHUNKS_AHEAD: usize = 4;

type Chunk = Result<bytes::Bytes, std::io::Error>;

/// Chunk buffers the socket is done with, kept for the next chunks: a
/// fresh 256 KiB buffer per chunk made the allocator hand pages back and
/// fault them in again, some 2,000 page faults a scrape of a 10,000-cluster
/// fleet on the scrape's core (docs/performance.md). As many as one scrape
/// has in flight (those queued ahead, the one the socket writes, the one
/// being filled), so a steady scrape allocates none; 1.5 MiB at most.
static CHUNK_POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
const CHUNKS_KEPT: usize = CHUNKS_AHEAD + 2;

/// A buffer for the next chunk: a kept one, else a new one.
fn chunk_buffer() -> Vec<u8> {
    let kept = CHUNK_POOL.lock().ok().and_then(|mut pool| pool.pop());
    kept.unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES))
}

/// Give a chunk's buffer back for the next chunks, or to the allocator
/// when enough are kept or it grew past a chunk (a family larger than a
/// chunk is sent on its own).
pub fn recycle_chunk(mut chunk: Vec<u8>) {
    if chunk.capacity() != CHUNK_BYTES {
        return;
    }
    chunk.clear();
    if let Ok(mut pool) = CHUNK_POOL.lock()
        && pool.len() < CHUNKS_KEPT
    {
        pool.push(chunk);
    }
}

/// A chunk in the response body; its buffer goes back to the pool when
/// the socket has written it.
struct PooledChunk(Vec<u8>);

impl AsRef<[u8]> for PooledChunk {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for PooledChunk {
    fn drop(&mut self) {
        recycle_chunk(std::mem::take(&mut self.0));
    }
}

/// `io::Write` that hands the body on in chunks as it is written: `send`
/// is the response's channel, waiting while [`CHUNKS_AHEAD`] are unsent
/// (the bench's drops them, to time the assembly alone).
pub struct ChunkWriter<F> {
    buf: Vec<u8>,
    send: F,
}

impl<F: FnMut(Vec<u8>) -> std::io::Result<()>> ChunkWriter<F> {
    pub fn new(send: F) -> Self {
        ChunkWriter {
            buf: chunk_buffer(),
            send,
        }
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, chunk_buffer());
        (self.send)(chunk)
    }
}

/// The buffer left after the last chunk goes back to the pool too.
impl<F> Drop for ChunkWriter<F> {
    fn drop(&mut self) {
        recycle_chunk(std::mem::take(&mut self.buf));
    }
}

impl<F: FnMut(Vec<u8>) -> std::io::Result<()>> std::io::Write for ChunkWriter<F> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        // Sent before it would outgrow its capacity: a chunk that went just
        // past it would double to twice the memory for the same bytes.
        if self.buf.len() + data.len() > CHUNK_BYTES {
            self.send()?;
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The plain body's sink: each cluster's family is written straight into
/// the chunk, with no copy in between. Its length is known up front, so the
/// chunk is sent first when the family would not fit, and the family goes
/// in whole: the same chunks as through [`std::io::Write`], one copy fewer
/// (docs/design/05-metrics.md §5.5).
impl<F: FnMut(Vec<u8>) -> std::io::Result<()>> Sink for ChunkWriter<F> {
    fn put(&mut self, text: &str) -> std::io::Result<()> {
        self.write_all(text.as_bytes())
    }

    fn put_family(
        &mut self,
        cluster: &RenderedCluster,
        family: FamilyId,
        scratch: &mut String,
    ) -> std::io::Result<()> {
        let len = cluster.family_len(family);
        if len == 0 {
            return Ok(());
        }
        if len > CHUNK_BYTES {
            // Larger than a chunk: `write` sends it on its own.
            return self.put(cluster.family_lines(family, scratch));
        }
        if self.buf.len() + len > CHUNK_BYTES {
            self.send()?;
        }
        self.buf.reserve(len);
        cluster.write_family_bytes(family, &mut self.buf);
        if self.buf.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(())
    }
}

/// The body is streamed as it is assembled (docs/performance.md): the
/// scraper receives the first families while the last are still being
/// copied, and a 50 MB body is never whole in the exporter's memory.
async fn metrics(State(store): State<Arc<Store>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let gzip = accepts_gzip(
        headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Chunk>(CHUNKS_AHEAD);
    let failed = tx.clone();
    // Assembling (and compressing) is CPU work on cached text; keep it off
    // the async workers.
    tokio::task::spawn_blocking(move || {
        let writer = ChunkWriter::new(move |chunk: Vec<u8>| {
            let chunk = bytes::Bytes::from_owner(PooledChunk(chunk));
            tx.blocking_send(Ok(chunk)).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the scraper left")
            })
        });
        let result = if gzip {
            // A cluster's lines arrive in pieces of tens of bytes
            // (docs/design/05-metrics.md §5.5); the encoder is handed them in blocks.
            let encoder = flate2::write::GzEncoder::new(writer, GZIP_LEVEL);
            let mut sink = WriteSink(std::io::BufWriter::with_capacity(GZIP_INPUT_BYTES, encoder));
            store
                .scrape_to(format, &mut sink)
                .and_then(|()| sink.0.into_inner().map_err(|e| e.into_error()))
                .and_then(|encoder| encoder.finish())
                .and_then(|mut writer| writer.flush())
        } else {
            let mut writer = writer;
            store
                .scrape_to(format, &mut writer)
                .and_then(|()| writer.flush())
        };
        match result {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                tracing::debug!("the scraper left before /metrics was sent");
            }
            Err(error) => {
                tracing::error!(%error, "writing /metrics failed");
                // An error in the stream aborts the response: the scraper
                // sees a failed scrape, not a short body read as whole.
                let _ = failed.blocking_send(Err(error));
            }
        }
    });
    let body = axum::body::Body::from_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let mut response = ([(header::CONTENT_TYPE, format.content_type())], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::VARY,
        header::HeaderValue::from_static("accept-encoding"),
    );
    if gzip {
        headers.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    }
    response
}

/// Whether `Accept-Encoding` admits gzip (Prometheus sends `gzip`): listed,
/// or by `*`, with no `q=0`.
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|value| {
        value.split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
    })
}

/// The fastest gzip level: scrapes are frequent and the text repeats itself
/// (label names, cluster ids), so level 1 already shrinks it about tenfold;
/// higher levels cost several times the CPU for a few percent (figures in
/// docs/performance.md).
const GZIP_LEVEL: flate2::Compression = flate2::Compression::fast();
/// How much of the body the gzip encoder is handed at once.
const GZIP_INPUT_BYTES: usize = 64 * 1024;

/// A whole body compressed as `/metrics` compresses it.
pub fn gzip_body(text: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(text.len() / 8), GZIP_LEVEL);
    encoder.write_all(text)?;
    encoder.finish()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(store): State<Arc<Store>>) -> Response {
    let sources = store.source_status();
    // A source serving the last run's readings is ready: it has state to
    // show, and says it is restored (docs/design/03-timeline-model.md §3.10).
    let ready = sources.iter().all(|s| s.synced || s.restored);
    let body = serde_json::json!({
        "ready": ready,
        "clusters": store.len(),
        "sources": sources,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

/// Without a query string every timeline, as it always was; with one, a
/// filtered page of rows for the UI (docs/ui.md).
async fn clusters(
    State(store): State<Arc<Store>>,
    Extension(rows): Extension<Arc<crate::ui::Rows>>,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        return crate::ui::list(rows, &query).await;
    }
    let judge = store.judge();
    // The lock is held only to take the timelines; 10,000 of them take tens
    // of milliseconds to serialise, off the async workers.
    let timelines = store.timelines();
    let body = tokio::task::spawn_blocking(move || {
        let items: Vec<_> = timelines.iter().map(|t| timeline_json(t, &judge)).collect();
        serde_json::to_vec(&serde_json::json!({ "items": items }))
    })
    .await;
    match body {
        Ok(body) => json_response(body),
        Err(error) => {
            tracing::error!(%error, "serialising timelines did not finish");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn cluster(State(store): State<Arc<Store>>, Path(cluster_id): Path<String>) -> Response {
    let judge = store.judge();
    match store
        .resolve_shared(&cluster_id)
        .map(|t| serde_json::to_vec(&timeline_json(&t, &judge)))
    {
        Some(body) => json_response(body),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({
                "error": "cluster not found",
                "cluster_id": cluster_id,
            })),
        )
            .into_response(),
    }
}

fn json_response(body: Result<Vec<u8>, serde_json::Error>) -> Response {
    match body {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(error) => {
            tracing::error!(%error, "serialising timelines failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::{CHUNK_BYTES, CHUNK_POOL, ChunkWriter, PooledChunk, accepts_gzip, recycle_chunk};

    fn kept(ptr: *const u8) -> bool {
        CHUNK_POOL
            .lock()
            .is_ok_and(|pool| pool.iter().any(|b| b.as_ptr() == ptr))
    }

    /// A chunk the socket has written leaves its buffer for the next one;
    /// a buffer that grew past a chunk is not kept.
    #[test]
    fn a_written_chunks_buffer_is_kept_for_the_next() {
        let buffer: Vec<u8> = Vec::with_capacity(CHUNK_BYTES);
        let ptr = buffer.as_ptr();
        let body = bytes::Bytes::from_owner(PooledChunk(buffer));
        assert!(!kept(ptr));
        drop(body);
        assert!(kept(ptr), "the written chunk's buffer was not kept");

        let grown: Vec<u8> = Vec::with_capacity(2 * CHUNK_BYTES);
        let ptr = grown.as_ptr();
        recycle_chunk(grown);
        assert!(!kept(ptr));
    }
    use crate::metrics::exposition::{Format, WriteSink, render, render_to};
    use crate::metrics::fleet::{RenderConfig, RenderedCluster, all_families, render_cluster};
    use crate::model::testing::{batch, obs};
    use crate::model::{ConditionStatus, Fleet, Hop, ModelConfig, Phase};

    /// Enough clusters for several chunks (built here: the bench's fixtures
    /// would make the server depend on the bench), and one with a failed hop so
    /// families empty for most clusters are not empty for all.
    fn clusters() -> Vec<Arc<RenderedCluster>> {
        let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut observations: Vec<_> = (0..1500)
            .flat_map(|i| {
                let id = format!("2c4f{i:028x}");
                [
                    obs(&id, Hop::ClustersService)
                        .state("installing", Phase::Progressing)
                        .name(&format!("cluster-{i}"))
                        .created(at),
                    obs(&id, Hop::MaestroBundle)
                        .object("b")
                        .state("Applied", Phase::Ready)
                        .created(at),
                    obs(&id, Hop::HostedCluster)
                        .state("Available", Phase::Ready)
                        .condition("Available", ConditionStatus::True, "AsExpected", at)
                        .condition("Degraded", ConditionStatus::False, "AsExpected", at)
                        .since(at),
                ]
            })
            .collect();
        observations.push(
            obs("failed", Hop::MaestroBundle)
                .object("b")
                .state("x", Phase::Failed)
                .created(at)
                .error("AppliedManifestWorkFailed", "apply failed"),
        );
        let mut fleet = Fleet::new(ModelConfig::default());
        fleet.apply(batch(false, at, observations), at);
        fleet
            .iter()
            .map(|t| Arc::new(render_cluster(t, &RenderConfig::default())))
            .collect()
    }

    /// The chunks of a plain body, with each family written straight into
    /// the chunk (`direct`) or put together in scratch first.
    fn chunks(clusters: &[Arc<RenderedCluster>], direct: bool) -> Vec<Vec<u8>> {
        let registry = prometheus_client::registry::Registry::default();
        let mut chunks = Vec::new();
        let mut writer = ChunkWriter::new(|chunk: Vec<u8>| {
            chunks.push(chunk);
            Ok(())
        });
        if direct {
            render_to(Format::OpenMetrics, clusters, &registry, &mut writer).unwrap();
        } else {
            let mut sink = WriteSink(&mut writer);
            render_to(Format::OpenMetrics, clusters, &registry, &mut sink).unwrap();
        }
        std::io::Write::flush(&mut writer).unwrap();
        drop(writer);
        chunks
    }

    #[test]
    fn families_written_straight_into_chunks_are_the_same_bytes_in_the_same_chunks() {
        let clusters = clusters();
        let families = || all_families().iter().map(|f| f.id);
        assert!(families().any(|i| clusters.iter().all(|c| c.family_len(i) > 0)));
        assert!(families().any(|i| clusters.iter().any(|c| c.family_len(i) == 0)));
        let direct = chunks(&clusters, true);
        let scratch = chunks(&clusters, false);
        assert!(direct.len() > 2, "{} chunks", direct.len());
        assert!(direct.iter().all(|c| c.len() <= CHUNK_BYTES));
        // A family that did not fit in the room left went whole into the
        // next chunk.
        assert!(
            direct[..direct.len() - 1]
                .iter()
                .any(|c| c.len() < CHUNK_BYTES)
        );
        assert_eq!(direct, scratch);
        let registry = prometheus_client::registry::Registry::default();
        let whole = render(Format::OpenMetrics, &clusters, &registry);
        assert_eq!(direct.concat(), whole.as_bytes());
        // The String body, written directly, against the scratch path.
        let mut through_scratch = WriteSink(Vec::new());
        render_to(
            Format::OpenMetrics,
            &clusters,
            &registry,
            &mut through_scratch,
        )
        .unwrap();
        assert_eq!(through_scratch.0, whole.as_bytes());
    }

    #[test]
    fn gzip_is_used_only_when_asked_for() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip;q=1.0, *;q=0.5")));
        assert!(accepts_gzip(Some("*")));
        assert!(accepts_gzip(Some("GZIP")));
        assert!(!accepts_gzip(None));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("br, zstd")));
    }
}
