//! Reading OCM-style paged lists one page at a time, each item decoded on
//! its own.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::client::{HttpClient, SourceError};
use super::wire::null_default;
use crate::sources::UnknownValue;

/// A paged list never has this many pages; stop rather than loop forever on
/// an upstream that keeps answering.
pub const MAX_PAGES: u64 = 100_000;

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
