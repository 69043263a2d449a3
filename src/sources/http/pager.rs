//! Reading OCM-style paged lists one page at a time, each item decoded on
//! its own.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::client::{HttpClient, SourceError};
use crate::metrics::exporter::RequestErrorKind;
use crate::sources::UnknownValue;

/// A paged list never has this many pages; stop rather than loop forever on
/// an upstream that keeps answering.
pub const MAX_PAGES: u64 = 100_000;

/// Attempts at one page after the first (docs/design/09-reading-the-upstreams.md §9.8): a failed
/// page 37 would throw away 36 pages of work, and on a full relist the
/// only evidence of deletions, so it is asked again. Four attempts outlast
/// the short 5xx bursts a busy upstream gives (one to three answers).
pub const PAGE_ATTEMPTS: u32 = 4;
/// The pause before the second attempt; each later one waits this much
/// longer than the one before (200, 400, 600 ms).
pub const PAGE_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// A failure the next attempt may not repeat: no answer, a 5xx or 429,
/// or a body cut short. A 4xx or a well-formed answer that is not the list
/// will be the same next time.
fn worth_retrying(err: &SourceError) -> bool {
    match err {
        SourceError::Status { status: 429, .. } => true,
        _ => {
            matches!(
                err.kind(),
                RequestErrorKind::timeout
                    | RequestErrorKind::connect
                    | RequestErrorKind::connect_refused
                    | RequestErrorKind::status_5xx
                    | RequestErrorKind::decode
            ) && !matches!(err, SourceError::NotAList { .. })
        }
    }
}

/// GET one page of a list. A page after the first is asked again
/// ([`PAGE_ATTEMPTS`] in all) when its failure may not repeat: every attempt is counted like any request, only the poll's result
/// changes. A first page is not retried: failing it loses no work, and a
/// source that fails its first request is down at once.
pub async fn get_page<T: DeserializeOwned>(
    client: &HttpClient,
    url: url::Url,
    expected: &'static str,
    later_page: bool,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<T, SourceError> {
    let mut attempt = 1;
    loop {
        match client.get_list(url.clone(), expected, &check).await {
            Ok(list) => return Ok(list),
            Err(err) if later_page && attempt < PAGE_ATTEMPTS && worth_retrying(&err) => {
                tracing::debug!(%url, attempt, error = %err, "page failed; asking again");
                tokio::time::sleep(PAGE_RETRY_DELAY * attempt).await;
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

/// One item of a list, still as raw JSON text: decoding it later keeps one
/// malformed item from failing its page, and costs about the size of the
/// text, where a `serde_json::Value` tree costs several times that.
pub type RawItem = Box<serde_json::value::RawValue>;

/// The OCM-style paged list envelope (Clusters Service and Maestro):
/// `{kind, page, size, total, items}`. Every field is optional here so that
/// [`PagedList::check`] can say which one is missing or wrong.
#[derive(Debug, Deserialize)]
pub struct PagedList {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub page: Option<u64>,
    /// The number of items in this page (OCM's meaning, not the one asked).
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub total: Option<u64>,
    /// `None`: the key is absent (not a list); `null` reads as empty and is
    /// then held to `total`.
    #[serde(default, deserialize_with = "present_or_null")]
    pub items: Option<Vec<RawItem>>,
}

fn present_or_null<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<Vec<RawItem>>, D::Error> {
    Ok(Some(
        Option::<Vec<RawItem>>::deserialize(de)?.unwrap_or_default(),
    ))
}

impl PagedList {
    /// What is wrong with this page as page `page` of a `kind` list of which
    /// `seen` items came on earlier pages (docs/design/09-reading-the-upstreams.md §9.9). An answer
    /// that fails here proves nothing: read as an empty list it would
    /// declare every cluster gone.
    pub fn check(&self, kind: &str, page: u64, seen: u64) -> Result<(), String> {
        let Some(items) = &self.items else {
            return Err("no `items`".to_string());
        };
        // Clusters Service and Maestro always send the envelope; `items`
        // alone (and null, which reads as empty) is no answer of theirs.
        if self.kind.is_none() && self.total.is_none() {
            return Err("no `kind` and no `total`: not a list envelope".to_string());
        }
        let count = items.len() as u64;
        if let Some(got) = self.kind.as_deref()
            && got != kind
        {
            return Err(format!("`kind` is {got:?}, expected {kind:?}"));
        }
        if let Some(got) = self.page
            && got != page
        {
            return Err(format!("`page` is {got}, page {page} was asked for"));
        }
        if let Some(size) = self.size
            && size != count
        {
            return Err(format!("`size` is {size} but {count} items came"));
        }
        if let Some(total) = self.total
            && count == 0
            && total > seen
        {
            return Err(format!(
                "page {page} has no items but `total` is {total} and {seen} came before it"
            ));
        }
        Ok(())
    }
}

/// Walks an OCM-style paged list (`page` is 1-based) one request, one page at
/// a time, so a caller turns each page into observations before the next is
/// fetched: a full relist of 10,000 Maestro bundles (over 100 MB of JSON)
/// never sits in memory at once.
pub struct Pager<'a> {
    path: &'a str,
    params: &'a [(&'a str, &'a str)],
    /// The list's `kind` (`ClusterList`, `ResourceBundleList`).
    kind: &'static str,
    page_size: u32,
    page: u64,
    seen: u64,
    done: bool,
    /// Paging by creation time instead of by offset ([`Pager::by_creation`]).
    keyset: Option<Keyset>,
}

/// Where a list paged by creation time stands: the `created_at` of the
/// last item read, and the page within the items created at that instant.
#[derive(Debug, Default)]
struct Keyset {
    after: Option<String>,
}

/// The one field a page's last item is read for when paging by creation.
#[derive(Deserialize)]
struct CreatedAt {
    #[serde(default)]
    created_at: Option<String>,
}

impl<'a> Pager<'a> {
    pub fn new(
        path: &'a str,
        params: &'a [(&'a str, &'a str)],
        kind: &'static str,
        page_size: u32,
    ) -> Pager<'a> {
        Pager {
            path,
            params,
            kind,
            page_size: page_size.max(1),
            page: 1,
            seen: 0,
            done: false,
            keyset: None,
        }
    }

    /// Page by creation time (Maestro: `created_at >= '<last read>'`,
    /// ordered by `created_at`, each query's first page) instead of by
    /// offset, ANDed with the `search` in the params. A list by offsets
    /// skips a live item whenever one before it is deleted between two
    /// pages; by creation time a deletion moves nothing that is still to
    /// come. Items created at the instant a page ends come again at the
    /// start of the next (the caller's `seen` drops them); a page that is
    /// all one instant goes on by offset within it (docs/design/09b-reading-the-upstreams.md §9.10).
    pub fn by_creation(mut self) -> Pager<'a> {
        self.keyset = Some(Keyset::default());
        self
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
            let search = self
                .params
                .iter()
                .find(|(key, _)| *key == "search")
                .map(|(_, value)| *value);
            for (key, value) in self.params {
                if self.keyset.is_none() || *key != "search" {
                    query.append_pair(key, value);
                }
            }
            if let Some(keyset) = &self.keyset {
                let from = keyset
                    .after
                    .as_deref()
                    .map(|t| format!("created_at >= {}", super::sql_quote(t)));
                let combined = match (search, from) {
                    (Some(search), Some(from)) => Some(format!("{search} and {from}")),
                    (Some(search), None) => Some(search.to_string()),
                    (None, from) => from,
                };
                if let Some(combined) = combined {
                    query.append_pair("search", &combined);
                }
                query.append_pair("orderBy", "created_at");
            }
        }
        let (kind, page, seen) = (self.kind, self.page, self.seen);
        let list: PagedList = get_page(
            client,
            url,
            kind,
            page > 1 || self.keyset.as_ref().is_some_and(|k| k.after.is_some()),
            |list: &PagedList| list.check(kind, page, seen),
        )
        .await?;
        let items = list.items.unwrap_or_default();
        let count = items.len() as u64;
        self.seen += count;
        let full = count >= u64::from(self.page_size);
        self.done = match (&self.keyset, list.total) {
            // Each query's answer is what remains: a short page is the last.
            (Some(_), _) => !full,
            (None, Some(total)) => self.seen >= total,
            (None, None) => !full,
        } || count == 0
            || self.page >= MAX_PAGES;
        match (&mut self.keyset, items.last()) {
            (Some(keyset), Some(last)) if !self.done => {
                let last: Option<String> = serde_json::from_str::<CreatedAt>(last.get())
                    .ok()
                    .and_then(|c| c.created_at);
                match last {
                    // A page that ends where it began is all one instant:
                    // the next page of the same query.
                    Some(last) if keyset.after.as_deref() == Some(last.as_str()) => self.page += 1,
                    Some(last) => {
                        keyset.after = Some(last);
                        self.page = 1;
                        self.seen = 0;
                    }
                    // An item without a creation time: on by offset
                    // within the same query.
                    None => self.page += 1,
                }
            }
            _ => self.page += 1,
        }
        Ok(Some(items))
    }
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
