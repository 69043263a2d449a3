// Helpers shared by the fleet and cluster pages. Everything is built with DOM
// calls and textContent, never innerHTML: names, reasons and messages come
// from upstream APIs and must never be read as markup.
"use strict";

const HCP = (() => {
  const settings = JSON.parse(document.getElementById("settings").textContent || "{}");

  // h("td", {class: "num", "data-hop": "x"}, "text", childNode, ...)
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "onclick") el.addEventListener("click", v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function replace(id, ...children) {
    const el = document.getElementById(id);
    el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
    return el;
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "–";
    const s = Math.max(0, seconds);
    if (s < 10) return s.toFixed(1) + "s";
    if (s < 60) return Math.round(s) + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m " + String(Math.round(s % 60)).padStart(2, "0") + "s";
    const hrs = Math.floor(m / 60);
    if (hrs < 48) return hrs + "h " + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(hrs / 24) + "d " + (hrs % 24) + "h";
  }

  function time(iso) {
    if (!iso) return "–";
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }

  // Cluster ids hold "/" and ":": each path segment is encoded on its own.
  function clusterPath(id) {
    return id.split("/").map(encodeURIComponent).join("/");
  }

  function clusterLink(id, text) {
    return h("a", { href: "/ui/clusters/" + clusterPath(id), "data-cluster-link": id }, text || id);
  }

  function badge(kind, value) {
    return h("span", { class: "badge " + kind + "-" + value }, String(value).replace("_", " "));
  }

  async function json(url) {
    const r = await fetch(url, { headers: { accept: "application/json" } });
    if (!r.ok) {
      let detail = "";
      try { detail = (await r.json()).error || ""; } catch (_) { /* not JSON */ }
      const e = new Error(url + ": HTTP " + r.status + (detail ? " – " + detail : ""));
      e.status = r.status;
      throw e;
    }
    return r.json();
  }

  // Runs `refresh` now and then every `ms` after each run ends (so a slow
  // exporter is never asked twice at once), pausing while the tab is hidden.
  function poll(ms, refresh) {
    let timer = null;
    let running = false;
    const run = async () => {
      if (running) return;
      running = true;
      clearTimeout(timer);
      const error = document.getElementById("load-error");
      try {
        await refresh();
        error.hidden = true;
        document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      } catch (e) {
        error.hidden = false;
        error.textContent = "Could not refresh: " + e.message;
      }
      running = false;
      timer = setTimeout(run, ms);
    };
    document.addEventListener("visibilitychange", () => { if (!document.hidden) run(); });
    run();
  }

  return { settings, h, replace, duration, time, clusterPath, clusterLink, badge, json, poll };
})();
