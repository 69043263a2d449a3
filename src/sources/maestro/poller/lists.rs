//! The lists the poller makes: the incremental pass (bundles updated since
//! the last), the full relist page by page, and reads by id
//! (docs/design/09-reading-the-upstreams.md §9.5, docs/design/09b-reading-the-upstreams.md §9.10).

use super::*;

impl MaestroSource {
    /// The incremental pass: the bundles updated since the last pass began
    /// (or the newest update seen, when earlier), then, by id, the bundles
    /// being deleted that it did not show. Delivers each page as it is read,
    /// also when a later request fails: the pages read before the failure
    /// already moved the change tracker, and would otherwise count as sent.
    /// Returns the bundles it saw.
    pub(super) async fn incremental_pass(
        &mut self,
        observed_at: Timestamp,
        newest: Timestamp,
    ) -> Result<HashSet<String>, SourceError> {
        let began = Instant::now();
        let search = updated_since_search(self.last_poll_began.map_or(newest, |b| b.min(newest)));
        let params = [("search", search.as_str())];
        let mode = UpdateMode {
            send_all: false,
            partial: false,
        };
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = HashSet::new();
        let mut pager = self.pager(&params);
        let listed = loop {
            match pager.next(&self.client).await {
                Ok(Some(items)) => {
                    self.accept_page(items, mode, &mut seen, &mut out, &mut unknown);
                    // Each page goes out as it is read, as in a relist: when
                    // bundles change faster than Maestro lists them, a pass
                    // grows with every round, and one that delivered at its
                    // end showed nothing new at all (docs/design/09-reading-the-upstreams.md §9.5).
                    self.deliver_so_far(false, &mut out, &mut unknown);
                }
                Ok(None) => break Ok(()),
                Err(err) => break Err(err),
            }
        };
        if listed.is_ok() {
            // Bundles being deleted that this pass did not show: read by id,
            // so a deletion is seen within one fast poll, not at the next
            // full relist. A failed read keeps them for the next pass.
            let deleting: Vec<String> = self
                .deleting
                .iter()
                .filter(|id| !seen.contains(*id))
                .cloned()
                .collect();
            if let Ok(gone) = self
                .read_by_id(deleting, mode, &mut out, &mut unknown)
                .await
            {
                self.forget(&gone, &mut out);
            }
            self.last_poll_began = Some(
                self.last_poll_began
                    .map_or(observed_at, |b| b.max(observed_at)),
            );
            self.incremental_takes = began.elapsed();
            self.incremental_due = http::after(
                Instant::now(),
                next_incremental_wait(self.cfg.http.fast_poll_interval, self.incremental_takes),
            );
        }
        http::deliver(&self.ctx, false, out, &unknown);
        listed.map(|()| seen)
    }

    /// The full relist: every bundle, everything sent; a bundle tracked and
    /// not listed is read by id and gone only when missing there too.
    ///
    /// A relist of a large fleet takes minutes, and a bundle marked for
    /// deletion and removed meanwhile is never seen marked: listed alive on
    /// an early page, it would stay until the next relist. So when an
    /// incremental pass falls due between two pages, it runs there and its
    /// findings are delivered at once (docs/design/09-reading-the-upstreams.md §9.5). Every page is
    /// delivered as it is read, so a failed relist has already delivered
    /// what its pages said (the tracker moved).
    pub(super) async fn full_pass(
        &mut self,
        observed_at: Timestamp,
        scope: Option<String>,
    ) -> Result<(), SourceError> {
        let initial = !self.synced;
        let began = Instant::now();
        self.cold_listing = initial && self.inbox.is_some() && !self.paced;
        // On the stream, events say what changed while a list pages: no
        // incremental pass (docs/design/09b-reading-the-upstreams.md §9.10).
        let interleave = !initial && scope.is_none() && !self.streaming;
        self.incremental_due = http::after(began, self.cfg.http.fast_poll_interval);
        let mut interleaved = false;
        let params: Vec<(&str, &str)> = scope
            .as_deref()
            .map(|s| ("search", s))
            .into_iter()
            .collect();
        let mode = UpdateMode {
            send_all: true,
            partial: false,
        };
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = HashSet::new();
        // What was tracked before this poll: the pages below add to it.
        let known = self.tracker.len();
        // Page by page: each bundle becomes observations (and its nested JSON
        // is dropped) before the next page is fetched.
        let mut pager = match scope {
            Some(_) => http::Pager::new(BUNDLES_PATH, &params, LIST_KIND, self.cfg.http.page_size),
            None => self.pager(&params),
        };
        loop {
            let page_began = Instant::now();
            match pager.next(&self.client).await {
                Ok(Some(items)) => {
                    self.accept_page(items, mode, &mut seen, &mut out, &mut unknown);
                    // Each page is delivered as it is read: a relist never
                    // holds the observations of every bundle at once, a
                    // peak the allocator would keep (docs/design/09-reading-the-upstreams.md §9.5). A first sync's pages are
                    // initial (silent) batches, and what a page says
                    // reaches the model before the pass below reads newer
                    // states of the same bundles.
                    self.deliver_so_far(initial, &mut out, &mut unknown);
                }
                Ok(None) => break,
                Err(err) => return Err(err),
            }
            self.between_pages(page_began.elapsed()).await?;
            if let Some(newest) = self.newest_updated_at
                && interleave
                && Instant::now() >= self.incremental_due
            {
                let pass_seen = self.incremental_pass(self.ctx.clock.now(), newest).await?;
                seen.extend(pass_seen);
                interleaved = true;
            }
        }
        if self.streaming && params.is_empty() {
            // Another shard's bundles this whole list did not show are gone
            // (or relabelled): their ids need not be kept.
            self.ignored.retain(|id| seen.contains(&**id));
        }
        let missing: Vec<String> = self
            .tracker
            .owners()
            .filter(|o| !seen.contains(*o))
            .map(str::to_string)
            .collect();
        // The pages are offsets into a list that changes while it is read:
        // a bundle deleted from an earlier page shifts a live one past a
        // page boundary. Missing is not gone until a read by id agrees. When
        // that read fails (an id the service refuses in a query), the list
        // is believed, as before the check.
        let confirmed = match self.read_by_id(missing, mode, &mut out, &mut unknown).await {
            Ok(absent) | Err(absent) => absent,
        };
        let vanished = self.guard.filter(&self.ctx, KIND, known, confirmed);
        self.forget(&vanished, &mut out);
        let restored = initial
            .then(|| self.ctx.sink.restored(&self.ctx.name, Hop::MaestroBundle))
            .flatten();
        if let Some(restored) = restored {
            // Bundles restored from the last run's readings that this list
            // did not show (docs/design/03-timeline-model.md §3.10): a list by offsets skips a
            // live bundle when one before it goes, so each is read by name
            // (its key in the model) before the store calls it gone. A
            // failed read leaves them to the store's reconciliation.
            if !restored.objects.is_empty() {
                let _ = self
                    .read_by(
                        BundleField::Name,
                        restored.objects,
                        mode,
                        &mut out,
                        &mut unknown,
                    )
                    .await;
            }
            // The list can skip a bundle the restored state does not have
            // either (created while the exporter was down), or show an
            // older reading of one than the stream missed: what changed
            // since the readings were written is read once more, so every
            // change of the downtime shows (a 20,000-cluster restart kept
            // one bundle's downtime change until the next relist).
            self.deliver_so_far(initial, &mut out, &mut unknown);
            // A failed read leaves them to the next relist: the list itself
            // succeeded, and listing again at fleet scale costs far more.
            if let Err(err) = self
                .incremental_pass(observed_at, restored.written_at)
                .await
            {
                tracing::debug!(source = %self.ctx.name, error = %cause_chain(&err), "reading what changed since the readings were written failed");
            }
        }
        if initial && self.streaming {
            // What the last run knew of bundles deleted while it was down:
            // every bundle that still exists is tracked now (listed, read by
            // id or by name, or heard), the rest is gone.
            let tracker = &self.tracker;
            self.known.retain(|id| tracker.contains(id));
        }
        self.synced = true;
        http::deliver(&self.ctx, initial, out, &unknown);
        self.last_poll_began = Some(
            self.last_poll_began
                .map_or(observed_at, |b| b.max(observed_at)),
        );
        if !interleaved {
            // The relist began reading at `observed_at`: the next pass reads
            // from there, an interval after the relist ends at the latest.
            self.incremental_due = http::after(
                Instant::now(),
                next_incremental_wait(self.cfg.http.fast_poll_interval, self.incremental_takes),
            );
        }
        Ok(())
    }

    /// The pager of an unscoped list. On the stream it pages by creation
    /// time: no incremental pass follows a list there, so a live bundle a
    /// list by offsets skipped (one before it deleted between two pages)
    /// and that then never changed stayed unseen until the next relist,
    /// `full_relist_interval` away (docs/design/09b-reading-the-upstreams.md §9.10). Polling keeps
    /// offsets: its incremental passes come within seconds, and what they
    /// miss a missing-then-read-by-id check or the next relist finds.
    fn pager<'p>(&self, params: &'p [(&'p str, &'p str)]) -> http::Pager<'p> {
        let pager = http::Pager::new(BUNDLES_PATH, params, LIST_KIND, self.cfg.http.page_size);
        match self.streaming {
            true => pager.by_creation(),
            false => pager,
        }
    }

    /// Decode one page of bundles and accept each, noting its id in `seen`.
    fn accept_page(
        &mut self,
        items: Vec<http::RawItem>,
        mode: UpdateMode,
        seen: &mut HashSet<String>,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        for item in items {
            let Some(bundle) = http::decode_item::<ResourceBundle>(&item, "items[]", unknown)
            else {
                continue;
            };
            seen.insert(bundle.id.clone());
            self.accept(bundle, mode, out, unknown);
        }
    }

    /// Read these bundles by id, accepting what is found. `Ok`: the ids
    /// Maestro no longer has. `Err`: a read failed, and the ids it did not
    /// find include those of the failed read: the caller decides what
    /// absence means then.
    pub(super) async fn read_by_id(
        &mut self,
        ids: Vec<String>,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<Vec<String>, Vec<String>> {
        self.read_by(BundleField::Id, ids, mode, out, unknown).await
    }

    /// [`read_by_id`](Self::read_by_id), by `field`.
    async fn read_by(
        &mut self,
        field: BundleField,
        mut values: Vec<String>,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<Vec<String>, Vec<String>> {
        values.sort();
        values.dedup();
        let mut absent = Vec::new();
        let mut failed = false;
        for chunk in values.chunks(IDS_PER_QUERY) {
            let search = format!(
                "{} in ({})",
                field.column(),
                chunk
                    .iter()
                    .map(|v| http::sql_quote(v))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let params = [("search", search.as_str())];
            // A query names at most IDS_PER_QUERY bundles: one page holds
            // them whatever the list's page size. Paging it by a small list
            // page cost a request per few bundles and held every bundle of
            // the read back until the last page (docs/design/09b-reading-the-upstreams.md §9.10).
            let page_size = self
                .cfg
                .http
                .page_size
                .max(u32::try_from(chunk.len()).unwrap_or(u32::MAX));
            let mut pager = http::Pager::new(BUNDLES_PATH, &params, LIST_KIND, page_size);
            let mut found = HashSet::new();
            loop {
                match pager.next(&self.client).await {
                    Ok(Some(items)) => {
                        for item in items {
                            if let Some(bundle) =
                                http::decode_item::<ResourceBundle>(&item, "items[]", unknown)
                            {
                                found.insert(field.of(&bundle).to_string());
                                self.accept(bundle, mode, out, unknown);
                            }
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::debug!(source = %self.ctx.name, field = field.column(), error = %cause_chain(&err), "reading bundles by a field failed");
                        failed = true;
                        break;
                    }
                }
            }
            absent.extend(chunk.iter().filter(|v| !found.contains(*v)).cloned());
        }
        if failed { Err(absent) } else { Ok(absent) }
    }
}
