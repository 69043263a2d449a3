// The cluster page: the hops as a flowchart coloured by phase, the time on
// each edge against its budget, the verdict, node pools, control-plane pods,
// conditions, and links to the trace and the Grafana dashboard.
"use strict";

(() => {
  const { settings, h, replace, duration, time, clusterPath, badge, json, poll } = HCP;
  const REFRESH_MS = 3000;
  const id = settings.cluster_id || "";
  const url = "/api/v1/clusters/" + clusterPath(id);
  document.getElementById("json-link").href = url;
  document.getElementById("title").textContent = id;
  document.title = "hcp-flow · " + id;

  const seconds = (from, to) => (from && to ? (new Date(to) - new Date(from)) / 1000 : null);

  function verdict(t) {
    const v = t.verdict;
    if (v) {
      const facts = [];
      if (v.hop) facts.push("at " + v.hop);
      if (v.elapsed_seconds !== null && v.elapsed_seconds !== undefined) facts.push("for " + duration(v.elapsed_seconds));
      if (v.budget_seconds) facts.push("budget " + duration(v.budget_seconds));
      if (v.p95_seconds) facts.push("fleet p95 " + duration(v.p95_seconds));
      replace("verdict", h("div", { class: "verdict " + v.status, "data-verdict": v.status, "data-verdict-hop": v.hop || "" },
        badge("status", v.status), " ", h("strong", {}, v.reason || ""), " ", h("span", { class: "muted" }, facts.join(" · "))));
    } else {
      const text = { in_flight: "in flight", succeeded: "succeeded", failed: "failed", deleted: "deleted while in flight" }[t.outcome] || t.outcome;
      replace("verdict", h("div", { class: "verdict", "data-outcome": t.outcome }, "Creation ", h("strong", {}, text),
        t.slo ? " · SLO " + t.slo : ""));
    }
  }

  function identity(t) {
    const card = (label, value, attrs) => h("div", Object.assign({ class: "card" }, attrs || {}), h("div", { class: "l" }, label), h("div", { class: "mono" }, value || "–"));
    const trace = settings.trace_url
      ? h("a", { href: settings.trace_url, "data-trace-link": "true", target: "_blank", rel: "noopener" }, t.trace_id)
      : t.trace_id;
    const grafana = settings.grafana_url
      ? h("a", { href: settings.grafana_url, "data-grafana-link": "true", target: "_blank", rel: "noopener" }, "cluster dashboard")
      : h("span", { class: "muted" }, "set ui.grafana_url");
    const created = time(t.created_at.at) + (t.created_at.observed ? " (observed)" : "");
    replace("identity",
      card("name", t.name),
      card("outcome", t.outcome, { "data-outcome": t.outcome }),
      card("SLO", t.slo || "not judged yet"),
      card("created", created),
      card(t.failed_at ? "failed" : "completed", time(t.failed_at || t.completed_at)),
      card("age", duration(seconds(t.created_at.at, t.completed_at || t.failed_at || new Date().toISOString()))),
      card("management cluster", t.mgmt_cluster),
      card("namespace", t.namespace),
      card("version", t.version),
      card("join", t.join),
      card("resource id", t.resource_id),
      card("trace id", trace),
      card("Grafana", grafana),
      // The ids the upstreams gave its operations, to search their logs by.
      ...(t.upstream_ids || []).map((u) => card(u.name + " (" + u.hop + ")", u.value, { "data-upstream-id": u.name })));
  }

  function flow(t) {
    const now = new Date().toISOString();
    const current = t.verdict && t.verdict.hop;
    const boxes = [];
    settings.hops.forEach((hop, i) => {
      const hj = t.hops[hop];
      if (i > 0) boxes.push(h("div", { class: "arrow" }, "→"));
      if (!hj) {
        boxes.push(h("div", { class: "hop", "data-hop": hop, "data-phase": "none" },
          h("div", { class: "name" }, hop), h("div", { class: "phase" }, "not seen")));
        return;
      }
      const start = hj.started_at || hj.since.at;
      const end = hj.ready_at || (t.outcome === "in_flight" ? now : (t.failed_at || t.completed_at || now));
      const took = seconds(start, end);
      const budget = settings.hop_budgets_seconds[hop];
      const over = budget && took !== null && took > budget;
      const pct = budget && took !== null ? Math.min(100, Math.round(100 * took / budget)) : 0;
      const label = hj.ready_at ? "ready after " : (t.outcome === "in_flight" ? "waiting " : "ended after ");
      boxes.push(h("div", {
        class: "hop phase-" + hj.phase + (current === hop ? " current" : ""),
        "data-hop": hop, "data-phase": hj.phase, "data-via": hj.via,
        title: hop + ": " + hj.phase + (hj.state ? " (" + hj.state + ")" : "") + (hj.error ? " – " + hj.error.code + ": " + hj.error.message : ""),
      },
        h("div", { class: "name" }, hop),
        h("div", { class: "phase" }, hj.phase, hj.via === "maestro" ? " · via maestro" : ""),
        h("div", { class: "state" }, hj.state || ""),
        hj.error ? h("div", { class: "state", "data-error-code": hj.error.code }, hj.error.code) : null,
        h("div", { class: "edge" + (over ? " over" : ""), "data-edge": hop, "data-elapsed-seconds": took === null ? "" : took.toFixed(1), "data-budget-seconds": budget },
          label + duration(took) + " / " + duration(budget),
          h("div", { class: "meter" }, h("span", { style: "width:" + pct + "%" })))));
    });
    replace("flow", boxes);
  }

  // The cluster's operations, and a deletion's flow: each hop in the order
  // the deletion takes it, gone (and after how long), deleting against its
  // budget, or not deleting yet.
  // The cluster's ended operations on one time line: a row each, its hops
  // as bars placed by their start and end between the oldest start and the
  // newest end.
  function history(t) {
    const ended = t.history || [];
    if (!ended.length) {
      replace("history", h("p", { class: "muted", "data-history": 0 }, "No operation ended yet (or none within the retention)."));
      return;
    }
    const ms = (at) => new Date(at).getTime();
    const from = Math.min(...ended.map((e) => ms(e.started_at)));
    const to = Math.max(...ended.map((e) => ms(e.ended_at)), from + 1);
    const pct = (at) => (100 * (ms(at) - from) / (to - from)).toFixed(2);
    const what = (e) => e.operation + (e.subject ? " " + e.subject : "");
    const head = h("tr", {}, ["operation", "started", "took", "outcome", "SLO", "hops", "trace id"].map((c) => h("th", {}, c)));
    const rows = ended.map((e) => {
      const bars = (e.hops || []).map((hp) => {
        const end = hp.ended_at || e.ended_at;
        const took = (ms(end) - ms(hp.started_at)) / 1000;
        return h("div", { class: "lane", "data-hop": hp.hop, title: hp.hop + ": " + duration(took) },
          h("span", { class: "lane-label" }, hp.hop + " " + duration(took)),
          h("span", { class: "bar " + (hp.ended_at ? "done" : "open"), style: "left:" + pct(hp.started_at) + "%;width:" + Math.max(0.5, pct(end) - pct(hp.started_at)) + "%" }));
      });
      return h("tr", { "data-operation": e.operation, "data-subject": e.subject || "", "data-outcome": e.outcome, "data-hops": (e.hops || []).length },
        h("td", {}, what(e)), h("td", {}, time(e.started_at)), h("td", {}, duration(e.duration_seconds)),
        h("td", {}, badge("phase", e.outcome === "succeeded" ? "ready" : "failed")), h("td", {}, e.slo || "–"),
        h("td", { class: "lanes" }, bars), h("td", { class: "mono" }, e.trace_id));
    });
    replace("history", h("table", { "data-history": ended.length }, h("thead", {}, head), h("tbody", {}, rows)));
  }

  function operations(t) {
    const ops = t.operations || [];
    const head = h("tr", {}, ["operation", "started", "ended", "outcome", "SLO", "verdict", "why", "trace id"].map((c) => h("th", {}, c)));
    // A node pool's operation names its pool, an upgrade its target version.
    const what = (o) => o.operation + (o.node_pool ? " " + o.node_pool : "") + (o.target_version ? " → " + o.target_version : "");
    const rows = ops.map((o) => h("tr", { "data-operation": o.operation, "data-outcome": o.outcome, "data-node-pool": o.node_pool || "", "data-target-version": o.target_version || "" },
      h("td", {}, what(o)), h("td", {}, time(o.started_at.at) + (o.started_at.observed ? " (observed)" : "")),
      h("td", {}, time(o.ended_at)), h("td", {}, o.outcome), h("td", {}, o.slo || "–"),
      h("td", {}, o.verdict ? badge("status", o.verdict) : "–"), h("td", { class: "why" }, o.reason || ""), h("td", { class: "mono" }, o.trace_id)));
    const parts = [h("table", { "data-operations": ops.length }, h("thead", {}, head), h("tbody", {}, rows))];
    const deletion = ops.find((o) => o.operation === "delete");
    if (deletion) {
      const now = new Date().toISOString();
      const boxes = [];
      settings.delete_hops.forEach((hop, i) => {
        const done = (deletion.hops || []).find((x) => x.hop === hop);
        const hj = t.hops[hop];
        if (i > 0) boxes.push(h("div", { class: "arrow" }, "→"));
        const budget = settings.delete_budgets_seconds[hop];
        let phase = "none";
        let text = "not seen";
        if (done && done.done_at) {
          phase = "ready";
          text = "gone after " + duration(seconds(done.started_at, done.done_at));
        } else if (hj && hj.phase === "deleting") {
          phase = "deleting";
          const took = seconds(hj.since.at, now);
          text = "deleting " + duration(took) + " / " + duration(budget);
        } else if (hj) {
          phase = hj.phase;
          text = "not deleting yet";
        }
        boxes.push(h("div", { class: "hop phase-" + phase + (t.verdict && t.verdict.operation === "delete" && t.verdict.hop === hop ? " current" : ""), "data-delete-hop": hop, "data-phase": phase },
          h("div", { class: "name" }, hop), h("div", { class: "phase" }, text)));
      });
      parts.push(h("h3", {}, "Deletion"), h("div", { class: "flow", "data-deletion-flow": deletion.outcome }, boxes));
    }
    replace("operations", parts);
  }

  function nodePools(t) {
    const np = t.hops.node_pool;
    const objects = np ? (np.objects || []) : [];
    if (!objects.length) {
      replace("node-pools", h("p", { class: "muted" }, np ? "one pool, phase " + np.phase : "No node pool seen yet."));
      return;
    }
    const head = h("tr", {}, ["pool", "phase", "state", "desired", "current", "ready", "since"].map((c) => h("th", {}, c)));
    const rows = objects.map((o) => h("tr", { "data-node-pool": o.name, "data-phase": o.phase },
      h("td", { class: "mono" }, o.name), h("td", {}, badge("phase", o.phase)), h("td", {}, o.state),
      h("td", { class: "num" }, o.replicas ? o.replicas.desired : "–"),
      h("td", { class: "num" }, o.replicas ? o.replicas.current : "–"),
      h("td", { class: "num" }, o.replicas ? o.replicas.ready : "–"),
      h("td", {}, time(o.since && o.since.at))));
    replace("node-pools", h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
  }

  function pods(t) {
    const cp = t.hops.control_plane;
    if (!cp || !cp.pods) {
      replace("pods", h("p", { class: "muted" }, cp ? "No pod counts (the control plane is seen without its namespace's pods)." : "No control plane seen yet."));
      return;
    }
    replace("pods", h("table", { "data-pods": "true" },
      h("tr", {}, h("th", {}, "ready"), h("td", { class: "num", "data-pods-ready": cp.pods.ready }, cp.pods.ready)),
      h("tr", {}, h("th", {}, "not ready"), h("td", { class: "num", "data-pods-not-ready": cp.pods.not_ready }, cp.pods.not_ready))));
  }

  function conditions(t) {
    const rows = [];
    for (const hop of settings.hops) {
      const hj = t.hops[hop];
      if (!hj) continue;
      if (hj.error) {
        rows.push(h("tr", { "data-hop": hop, "data-error": hj.error.code },
          h("td", {}, hop), h("td", {}, ""), h("td", {}, "error"), h("td", {}, badge("phase", "failed")),
          h("td", { class: "mono" }, hj.error.code), h("td", {}, hj.error.message), h("td", {}, time(hj.since.at))));
      }
      for (const c of hj.conditions || []) {
        // Coloured by what the status means (the server says: a Degraded
        // condition is good when false), not by true or false.
        const st = c.meaning === "good" ? "ready" : (c.meaning === "bad" ? "failed" : "unknown");
        rows.push(h("tr", { "data-hop": hop, "data-condition": c.type, "data-status": c.status, "data-meaning": c.meaning },
          h("td", {}, hop), h("td", { class: "mono" }, c.object || ""), h("td", {}, c.type),
          h("td", {}, h("span", { class: "badge phase-" + st }, c.status)),
          h("td", {}, c.reason), h("td", {}, c.message), h("td", {}, time(c.last_transition))));
      }
    }
    if (!rows.length) {
      replace("conditions", h("p", { class: "muted" }, "No condition reported."));
      return;
    }
    const head = h("tr", {}, ["hop", "object", "type", "status", "reason", "message", "last transition"].map((c) => h("th", {}, c)));
    replace("conditions", h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
  }

  async function refresh() {
    const main = document.getElementById("cluster");
    let t;
    try {
      t = await json(url);
    } catch (e) {
      if (e.status !== 404) throw e;
      replace("verdict", h("div", { class: "verdict failed", "data-found": "false" },
        "Cluster ", h("code", {}, id), " is not tracked: deleted, never seen, or followed by another shard."));
      for (const region of ["identity", "flow", "operations", "history", "node-pools", "pods", "conditions"]) replace(region);
      main.dataset.found = "false";
      main.dataset.rendered = "true";
      return;
    }
    verdict(t);
    identity(t);
    flow(t);
    operations(t);
    history(t);
    nodePools(t);
    pods(t);
    conditions(t);
    main.dataset.found = "true";
    main.dataset.rendered = "true";
  }

  poll(REFRESH_MS, refresh);
})();
