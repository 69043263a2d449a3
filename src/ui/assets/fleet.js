// The fleet page: summary counts, the funnel and the in-flight list of one
// operation (creations or deletions, a selector), failures, SLO and sources. The server filters and pages; this page
// asks for one page at a time and never for the whole fleet.
"use strict";

(() => {
  const { h, replace, duration, time, clusterLink, badge, json, poll } = HCP;
  const PAGE = 25;
  const REFRESH_MS = 5000;
  const params = new URLSearchParams(location.search);
  const filters = { operation: params.get("operation") || "create", q: params.get("q") || "", hop: params.get("hop") || "", phase: params.get("phase") || "", status: params.get("status") || "" };
  let inFlightOffset = 0;
  let failedOffset = 0;
  let optionsFilled = false;

  function query(extra) {
    const q = new URLSearchParams(extra);
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    return q.toString();
  }

  function setFilters(next) {
    Object.assign(filters, { operation: filters.operation, q: "", hop: "", phase: "", status: "" }, next);
    inFlightOffset = 0;
    const form = document.getElementById("filters");
    for (const k of Object.keys(filters)) form.elements[k].value = filters[k];
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    history.replaceState(null, "", q.toString() ? "?" + q : location.pathname);
    refreshNow();
  }

  function fillOptions(summary) {
    if (optionsFilled) return;
    const form = document.getElementById("filters");
    const add = (name, values) => {
      for (const v of values) form.elements[name].append(h("option", { value: v }, v));
      form.elements[name].value = filters[name];
    };
    form.elements.operation.value = filters.operation;
    add("hop", summary.hops);
    add("phase", summary.phases);
    add("status", Object.keys(summary.status));
    form.elements.q.value = filters.q;
    optionsFilled = true;
  }

  const OPERATION_NAMES = { create: "creation", delete: "deletion", node_pool_create: "node pool creation", node_pool_delete: "node pool removal", upgrade: "upgrade", node_pool_upgrade: "node pool upgrade" };

  function cards(s) {
    const card = (n, label, key) => h("div", { class: "card", "data-card": key }, h("div", { class: "n" }, n), h("div", { class: "l" }, label));
    replace("cards",
      card(s.clusters, "clusters tracked", "clusters"),
      card(s.outcomes.in_flight, "in flight", "in_flight"),
      card((s.in_flight || {}).delete || 0, "being deleted", "deleting"),
      card(s.status.at_risk, "at risk", "at_risk"),
      card(s.status.stuck, "stuck", "stuck"),
      card(s.status.degraded || 0, "degraded", "degraded"),
      card(Object.values(s.stuck_operations || {}).reduce((a, b) => a + b, 0), "node pool / upgrade operations stuck", "day2_stuck"),
      card(s.outcomes.failed, "failed", "failed"),
      card(s.outcomes.succeeded, "succeeded", "succeeded"),
      card(s.ready ? "yes" : "no", "every source synced", "ready"));
  }

  function funnel(s) {
    // The selected operation's funnel: each cluster with that operation in
    // flight, counted at the hop it stands at.
    const counts = (s.funnels && s.funnels[filters.operation]) || s.funnel;
    document.getElementById("funnel").dataset.operation = filters.operation;
    let max = 1;
    const totals = {};
    for (const hop of s.hops) {
      totals[hop] = s.phases.reduce((n, p) => n + (counts[hop][p] || 0), 0);
      max = Math.max(max, totals[hop]);
    }
    const head = h("tr", {}, h("th", {}, "hop"), s.phases.map((p) => h("th", { class: "num" }, badge("phase", p))), h("th", {}, "in flight here"));
    const rows = s.hops.map((hop) => h("tr", { "data-hop": hop },
      h("th", {}, hop, h("div", { class: "muted" }, "budget " + duration(s.hop_budgets_seconds[hop]))),
      s.phases.map((phase) => {
        const n = counts[hop][phase] || 0;
        return h("td", { class: "num" + (n ? "" : " zero"), "data-hop": hop, "data-phase": phase, "data-count": n },
          n ? h("a", { href: "#in-flight", onclick: () => setFilters({ hop, phase }) }, n) : "0");
      }),
      h("td", { class: "num", "data-hop-total": hop }, totals[hop],
        h("span", { class: "bar", style: "width:" + Math.round(160 * totals[hop] / max) + "px" }))));
    replace("funnel", h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
  }

  function pager(page, offset, onMove) {
    const last = Math.min(page.total, offset + page.items.length);
    return h("div", { class: "pager" },
      h("button", { type: "button", disabled: offset === 0, onclick: () => onMove(Math.max(0, offset - PAGE)) }, "◀ newer"),
      h("span", { class: "muted", "data-total": page.total }, page.total ? (offset + 1) + "–" + last + " of " + page.total : "none"),
      h("button", { type: "button", disabled: last >= page.total, onclick: () => onMove(offset + PAGE) }, "older ▶"));
  }

  function reasonOf(row) {
    if (row.verdict && row.verdict.reason) return row.verdict.reason;
    if (row.error) return row.error.code + ": " + row.error.message;
    return "";
  }

  function inFlight(page) {
    if (!page.items.length) {
      replace("in-flight", h("p", { class: "muted", "data-empty": "true" }, "No " + (OPERATION_NAMES[filters.operation] || "creation") + " in flight matches."), pager(page, inFlightOffset, moveInFlight));
      return;
    }
    const head = h("tr", {}, ["cluster", "name", "mgmt cluster", "status", "at hop", "phase", "at hop for", "budget", "age", "why"].map((c) => h("th", {}, c)));
    const rows = page.items.map((r) => h("tr", { "data-cluster-id": r.cluster_id, "data-status": r.status, "data-hop": r.hop || "", "data-phase": r.phase || "" },
      h("td", { class: "mono" }, clusterLink(r.cluster_id)),
      h("td", {}, r.name),
      h("td", {}, r.mgmt_cluster),
      h("td", {}, badge("status", r.status)),
      h("td", {}, r.hop || "–"),
      h("td", {}, r.phase ? badge("phase", r.phase) : "–"),
      h("td", { class: "num" }, duration(r.at_hop_seconds)),
      h("td", { class: "num" }, duration(r.budget_seconds)),
      h("td", { class: "num" }, duration(r.age_seconds)),
      h("td", {}, reasonOf(r))));
    replace("in-flight", h("table", {}, h("thead", {}, head), h("tbody", {}, rows)), pager(page, inFlightOffset, moveInFlight));
  }

  function failed(page) {
    if (!page.items.length) {
      replace("failed", h("p", { class: "muted", "data-empty": "true" }, "No failed creation is tracked."));
      return;
    }
    const head = h("tr", {}, ["cluster", "name", "failed hop", "code", "reason", "failed at", "age"].map((c) => h("th", {}, c)));
    const rows = page.items.map((r) => h("tr", { "data-cluster-id": r.cluster_id, "data-status": r.status, "data-hop": r.hop || "" },
      h("td", { class: "mono" }, clusterLink(r.cluster_id)),
      h("td", {}, r.name),
      h("td", { "data-failed-hop": r.hop || "" }, r.hop || "–"),
      h("td", { class: "mono" }, r.error ? r.error.code : "–"),
      h("td", {}, r.verdict && r.verdict.reason ? r.verdict.reason : (r.error ? r.error.message : "")),
      h("td", {}, time(r.failed_at)),
      h("td", { class: "num" }, duration(r.age_seconds))));
    replace("failed", h("table", {}, h("thead", {}, head), h("tbody", {}, rows)), pager(page, failedOffset, moveFailed));
  }

  function slo(s) {
    const o = s.slo;
    const judged = o.good + o.late + o.failed;
    const pct = judged ? (100 * o.good / judged).toFixed(1) + " % good" : "no verdict yet";
    replace("slo", h("table", { "data-slo": "true" },
      h("tr", {}, h("th", {}, "target"), h("td", { class: "num", "data-target-seconds": o.target_seconds }, duration(o.target_seconds))),
      h("tr", {}, h("th", {}, "good"), h("td", { class: "num", "data-slo-good": o.good }, o.good)),
      h("tr", {}, h("th", {}, "late"), h("td", { class: "num", "data-slo-late": o.late }, o.late)),
      h("tr", {}, h("th", {}, "failed"), h("td", { class: "num", "data-slo-failed": o.failed }, o.failed)),
      h("tr", {}, h("th", {}, "in flight, not judged yet"), h("td", { class: "num" }, o.pending)),
      h("tr", {}, h("th", {}, "of the creations tracked now"), h("td", { class: "num" }, pct))));
  }

  function sources(s) {
    const head = h("tr", {}, ["source", "synced", "up", "pending kinds", "failing kinds", "down since", "last error"].map((c) => h("th", {}, c)));
    const rows = s.sources.map((src) => h("tr", { "data-source": src.source, "data-synced": src.synced, "data-up": src.up },
      h("td", { class: "mono" }, src.source),
      h("td", {}, badge("phase", src.synced ? "ready" : "pending")),
      h("td", {}, badge("phase", src.up ? "ready" : "failed")),
      h("td", {}, (src.pending || []).join(", ")),
      h("td", {}, (src.failing || []).join(", ")),
      h("td", {}, time(src.down_since)),
      h("td", {}, src.last_error ? (src.last_error.message || JSON.stringify(src.last_error)) : "")));
    replace("sources", h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
  }

  async function refresh() {
    const [summary, flying, failures] = await Promise.all([
      json("/api/v1/fleet"),
      json("/api/v1/clusters?" + query({ sort: "age", limit: PAGE, offset: inFlightOffset })),
      json("/api/v1/clusters?" + new URLSearchParams({ outcome: "failed", sort: "-age", limit: PAGE, offset: failedOffset })),
    ]);
    fillOptions(summary);
    cards(summary);
    funnel(summary);
    inFlight(flying);
    failed(failures);
    slo(summary);
    sources(summary);
    const main = document.getElementById("fleet");
    main.dataset.at = summary.at;
    main.dataset.rendered = "true";
  }

  let refreshNow = () => {};
  function moveInFlight(offset) { inFlightOffset = offset; refreshNow(); }
  function moveFailed(offset) { failedOffset = offset; refreshNow(); }

  document.getElementById("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    const f = e.target.elements;
    setFilters({ operation: f.operation.value, q: f.q.value.trim(), hop: f.hop.value, phase: f.phase.value, status: f.status.value });
  });
  document.getElementById("clear-filters").addEventListener("click", () => setFilters({}));
  document.getElementById("filters").elements.operation.addEventListener("change", (e) => setFilters({ operation: e.target.value }));
  refreshNow = () => refresh().catch((e) => {
    const error = document.getElementById("load-error");
    error.hidden = false;
    error.textContent = "Could not refresh: " + e.message;
  });
  poll(REFRESH_MS, refresh);
})();
