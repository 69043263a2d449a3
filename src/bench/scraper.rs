//! The scraper the benches time: it reads `/metrics` as Prometheus's own
//! HTTP client does, so a figure is the exporter's and the wire's, not a
//! client's (docs/performance.md, "How a scrape is timed").
//!
//! Prometheus copies the response body into a buffer kept from scrape to
//! scrape (`io.Copy` into a pooled `bytes.Buffer`), and Go's chunked reader
//! reads a large chunk from the socket straight into it: one copy on the
//! scraper's side. A client library that hands the body on in buffers of
//! its own (reqwest, hyper) makes it two, and on a two-core machine that
//! second copy of a 50 MB body is on the critical path: the scraper's core,
//! not the exporter's, was the slower of the two. So the timed scrape is a
//! small HTTP/1.1 client of its own; the same scrapes through reqwest are
//! kept beside it in the report, for comparison with earlier runs.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::BenchError;
use super::figures::Latency;

/// The `Accept` header Prometheus sends.
const ACCEPT: &str = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";

/// The connection's read buffer: Go's default for an HTTP connection.
/// Reads larger than it bypass it, straight into the body.
const READ_BUFFER: usize = 4096;

/// Longest status or header line accepted.
const LINE_LIMIT: usize = 16 * 1024;

/// How a timed scrape is read.
#[derive(Clone, Copy)]
enum Via {
    /// Plain text, by the scraper's own client.
    Plain,
    /// Asking for gzip, by the scraper's own client; not decoded.
    Gzip,
    /// Plain text, through reqwest.
    Reqwest,
}

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("{0} is not an http://host:port/path URL")]
    Url(String),
    #[error("connecting to {address}")]
    Connect {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("sending the request or reading the response")]
    Io(#[source] std::io::Error),
    #[error("the exporter answered {0}")]
    Status(String),
    #[error("the response is not the HTTP/1.1 expected: {0}")]
    Malformed(String),
    #[error("scraping through reqwest")]
    Client(#[source] reqwest::Error),
}

/// A scraper that reads as Prometheus does: with Prometheus's `Accept`
/// header, over one kept connection, the whole body into one buffer kept
/// from scrape to scrape (Prometheus takes it from a pool sized by its last
/// scrape of the target). The clock stops when the last byte has arrived;
/// reading the text comes after it, as the scraper's own parsing is not the
/// exporter's cost. A buffer new to every scrape cost the scraping core a
/// tenth or more of its time in page faults on 48 MiB (docs/performance.md).
pub struct Scraper {
    client: reqwest::Client,
    url: String,
    /// `host:port`.
    address: String,
    path: String,
    connection: Option<BufReader<TcpStream>>,
    body: Vec<u8>,
}

impl Scraper {
    /// A scraper of `url` (`http://host:port/path`); `client` reads the
    /// comparison scrapes.
    pub fn new(client: reqwest::Client, url: String) -> Result<Scraper, BenchError> {
        let (address, path) =
            address_and_path(&url).ok_or_else(|| ScrapeError::Url(url.clone()))?;
        Ok(Scraper {
            client,
            address,
            path,
            url,
            connection: None,
            body: Vec::new(),
        })
    }

    /// One scrape of the plain text, timed until its last byte; its text is
    /// then [`Scraper::text`].
    pub async fn scrape(&mut self) -> Result<Duration, BenchError> {
        Ok(self.read(None).await?)
    }

    /// The last scrape's body as text.
    pub fn text(&self) -> Result<&str, BenchError> {
        std::str::from_utf8(&self.body).map_err(BenchError::NotText)
    }

    /// `scrapes` plain scrapes in a row: their times; the last one's body
    /// stays in [`Scraper::text`].
    pub async fn timed(&mut self, scrapes: usize) -> Result<Latency, BenchError> {
        Ok(self.repeat(scrapes, Via::Plain).await?)
    }

    /// Scrapes as Prometheus makes them by default, asking for gzip: the
    /// time until the compressed body has arrived, and its size. Undecoded,
    /// as a scraper on another host would receive it.
    pub async fn gzip(&mut self, scrapes: usize) -> Result<(Latency, usize), BenchError> {
        let latency = self.repeat(scrapes, Via::Gzip).await?;
        Ok((latency, self.body.len()))
    }

    /// `scrapes` plain scrapes through reqwest, each chunk it hands on
    /// copied into the kept buffer: the way earlier runs were timed.
    pub async fn timed_reqwest(&mut self, scrapes: usize) -> Result<Latency, BenchError> {
        Ok(self.repeat(scrapes, Via::Reqwest).await?)
    }

    /// `scrapes` scrapes (at least one) read `via`, in a row.
    async fn repeat(&mut self, scrapes: usize, via: Via) -> Result<Latency, ScrapeError> {
        let mut samples = Vec::with_capacity(scrapes);
        for _ in 0..scrapes.max(1) {
            samples.push(match via {
                Via::Plain => self.read(None).await?,
                Via::Gzip => self.read(Some("gzip")).await?,
                Via::Reqwest => self.read_reqwest().await?,
            });
        }
        Ok(Latency::from_samples(samples))
    }

    /// One plain scrape through reqwest, timed until its last chunk.
    async fn read_reqwest(&mut self) -> Result<Duration, ScrapeError> {
        let request = self
            .client
            .get(&self.url)
            .header(reqwest::header::ACCEPT, ACCEPT);
        self.body.clear();
        let start = Instant::now();
        let mut response = request.send().await.map_err(ScrapeError::Client)?;
        while let Some(chunk) = response.chunk().await.map_err(ScrapeError::Client)? {
            self.body.extend_from_slice(&chunk);
        }
        Ok(start.elapsed())
    }

    /// One request and its response, timed. A kept connection the server
    /// closed meanwhile fails before any answer: the request is made once
    /// more on a new one, timed afresh.
    async fn read(&mut self, encoding: Option<&str>) -> Result<Duration, ScrapeError> {
        let mut retried = false;
        loop {
            let reused = self.connection.is_some();
            self.body.clear();
            let start = Instant::now();
            match self.exchange(encoding).await {
                Ok(keep) => {
                    let took = start.elapsed();
                    if !keep {
                        self.connection = None;
                    }
                    return Ok(took);
                }
                Err(error) => {
                    self.connection = None;
                    let stale = matches!(error, ScrapeError::Io(_) | ScrapeError::Malformed(_));
                    if !(reused && stale && !retried) {
                        return Err(error);
                    }
                    retried = true;
                }
            }
        }
    }

    /// Send the request and read the whole response; whether the
    /// connection may be kept.
    async fn exchange(&mut self, encoding: Option<&str>) -> Result<bool, ScrapeError> {
        let connection = match self.connection.take() {
            Some(connection) => connection,
            None => {
                let stream = TcpStream::connect(&self.address).await.map_err(|source| {
                    ScrapeError::Connect {
                        address: self.address.clone(),
                        source,
                    }
                })?;
                stream.set_nodelay(true).map_err(ScrapeError::Io)?;
                BufReader::with_capacity(READ_BUFFER, stream)
            }
        };
        let connection = self.connection.insert(connection);
        let mut request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: {ACCEPT}\r\nUser-Agent: hcp-flow-bench\r\n",
            self.path, self.address
        );
        if let Some(encoding) = encoding {
            request.push_str(&format!("Accept-Encoding: {encoding}\r\n"));
        }
        request.push_str("\r\n");
        connection
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .map_err(ScrapeError::Io)?;

        let mut line = String::new();
        read_line(connection, &mut line).await?;
        let status = line.trim_end();
        if !status.starts_with("HTTP/1.1 ") {
            return Err(ScrapeError::Malformed(format!("status line {status:?}")));
        }
        if status.split(' ').nth(1) != Some("200") {
            return Err(ScrapeError::Status(status.to_string()));
        }
        let mut chunked = false;
        let mut length = None;
        let mut keep = true;
        loop {
            read_line(connection, &mut line).await?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else {
                return Err(ScrapeError::Malformed(format!("header {header:?}")));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("content-length") {
                let n = value
                    .parse::<usize>()
                    .map_err(|_| ScrapeError::Malformed(format!("Content-Length {value:?}")))?;
                length = Some(n);
            } else if name.eq_ignore_ascii_case("connection") {
                keep = !value.eq_ignore_ascii_case("close");
            }
        }
        if chunked {
            loop {
                read_line(connection, &mut line).await?;
                let size = line.trim_end().split(';').next().unwrap_or_default().trim();
                let size = usize::from_str_radix(size, 16)
                    .map_err(|_| ScrapeError::Malformed(format!("chunk size {size:?}")))?;
                if size == 0 {
                    // Trailers, if any, up to the empty line.
                    loop {
                        read_line(connection, &mut line).await?;
                        if line.trim_end().is_empty() {
                            break;
                        }
                    }
                    return Ok(keep);
                }
                read_into(connection, &mut self.body, size).await?;
                read_line(connection, &mut line).await?;
                if !line.trim_end().is_empty() {
                    return Err(ScrapeError::Malformed("no line end after a chunk".into()));
                }
            }
        }
        match length {
            Some(n) => {
                read_into(connection, &mut self.body, n).await?;
                Ok(keep)
            }
            None => {
                // Neither: the body ends with the connection.
                connection
                    .read_to_end(&mut self.body)
                    .await
                    .map_err(ScrapeError::Io)?;
                Ok(false)
            }
        }
    }
}

/// `http://host[:port]/path?query` → (`host:port`, `/path?query`).
fn address_and_path(url: &str) -> Option<(String, String)> {
    let url = reqwest::Url::parse(url).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let address = format!("{}:{}", url.host_str()?, url.port_or_known_default()?);
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    Some((address, path))
}

/// One line (with its line end) into `line`, replacing what it held.
async fn read_line(
    connection: &mut BufReader<TcpStream>,
    line: &mut String,
) -> Result<(), ScrapeError> {
    line.clear();
    let mut limited = (&mut *connection).take(LINE_LIMIT as u64);
    let n = limited.read_line(line).await.map_err(ScrapeError::Io)?;
    if n == 0 {
        return Err(ScrapeError::Malformed("the connection closed".into()));
    }
    if !line.ends_with('\n') {
        return Err(ScrapeError::Malformed(format!(
            "a line longer than {LINE_LIMIT} bytes"
        )));
    }
    Ok(())
}

/// Exactly `n` bytes of the body appended to `body`: what the connection's
/// buffer holds, the rest read from the socket straight into `body`.
async fn read_into(
    connection: &mut BufReader<TcpStream>,
    body: &mut Vec<u8>,
    n: usize,
) -> Result<(), ScrapeError> {
    body.reserve(n);
    let mut part = (&mut *connection).take(n as u64);
    while part.limit() > 0 {
        if part.read_buf(body).await.map_err(ScrapeError::Io)? == 0 {
            return Err(ScrapeError::Malformed(
                "the connection closed inside the body".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[test]
    fn only_a_plain_http_url_is_scraped() {
        for url in [
            "https://host:1/metrics",
            "http://:9464/metrics",
            "host:1/metrics",
        ] {
            assert!(
                matches!(
                    Scraper::new(client(), url.to_string()),
                    Err(BenchError::Scrape(ScrapeError::Url(_)))
                ),
                "{url}"
            );
        }
        assert_eq!(
            address_and_path("http://[::1]:9464/metrics?x=1"),
            Some(("[::1]:9464".to_string(), "/metrics?x=1".to_string()))
        );
        assert_eq!(
            address_and_path("http://host"),
            Some(("host:80".to_string(), "/".to_string()))
        );
    }

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    /// A server that answers each request on one connection with the next
    /// of `answers`, written in the pieces given, then closes.
    async fn serve(answers: Vec<Vec<&'static [u8]>>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut reader = BufReader::new(&mut socket);
            for pieces in answers {
                let mut line = String::new();
                loop {
                    line.clear();
                    reader.read_line(&mut line).await.unwrap();
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                }
                for piece in pieces {
                    reader.get_mut().write_all(piece).await.unwrap();
                    reader.get_mut().flush().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
        format!("http://{address}/metrics")
    }

    #[tokio::test]
    async fn a_chunked_body_split_anywhere_reads_whole_and_the_connection_is_kept() {
        let url = serve(vec![
            vec![
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
                b"lo\r\n7;ext=1\r\n, world\r\n0\r\n",
                b"\r\n",
            ],
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"],
        ])
        .await;
        let mut scraper = Scraper::new(client(), url).unwrap();
        scraper.scrape().await.unwrap();
        assert_eq!(scraper.text().unwrap(), "hello, world");
        // The second answer comes on the same connection: the server
        // accepts only one, and a new connection would wait forever.
        tokio::time::timeout(Duration::from_secs(10), scraper.scrape())
            .await
            .expect("the second scrape did not use the kept connection")
            .unwrap();
        assert_eq!(scraper.text().unwrap(), "abc");
    }

    /// What the first scrape of a server giving `answer` returns.
    async fn first_read(answer: Vec<&'static [u8]>) -> Result<Duration, ScrapeError> {
        let url = serve(vec![answer]).await;
        Scraper::new(client(), url).unwrap().read(None).await
    }

    #[tokio::test]
    async fn an_error_status_and_a_cut_body_are_errors() {
        let unavailable = first_read(vec![
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
        ]);
        assert!(matches!(
            unavailable.await,
            Err(ScrapeError::Status(s)) if s.contains("503")
        ));
        let cut = first_read(vec![
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\na\r\nshort",
        ]);
        assert!(matches!(cut.await, Err(ScrapeError::Malformed(_))));
    }
}
