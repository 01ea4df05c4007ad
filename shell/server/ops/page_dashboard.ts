// /dashboard: asks for the admin token (kept in this tab's sessionStorage only),
// then polls GET /admin/stats and GET /admin/workers every second, and
// GET /admin/keys every few seconds (keys change rarely). Rates and the
// throughput chart are differences of the same counters /metrics exports.
// Worker-supplied text is only ever set with textContent.
import { pageHtml } from "./page_style.ts";

export const DASHBOARD_HTML = pageHtml({
  title: "ModelRelay dashboard",
  header:
    `  <nav><a href="/dashboard">Dashboard</a><a href="/setup">Connect a worker</a><a href="/metrics">Metrics</a></nav>
  <span id="conn" class="muted"></span>`,
  main: `  <section id="login" class="panel">
    <h2>Admin token</h2>
    <p class="muted">The dashboard reads the admin API. Enter the server's
      MODELRELAY_ADMIN_TOKEN; it stays in this browser tab only.</p>
    <form id="login-form">
      <input id="token" type="password" autocomplete="current-password"
        placeholder="MODELRELAY_ADMIN_TOKEN" size="40" required>
      <button id="connect" type="submit">Open dashboard</button>
    </form>
    <p id="login-error" class="error"></p>
  </section>

  <section id="dash" class="hidden">
    <div class="cards">
      <div class="card"><div class="label">Workers connected</div><div class="value" id="workers-connected">-</div></div>
      <div class="card"><div class="label">In flight</div><div class="value" id="in-flight">-</div></div>
      <div class="card"><div class="label">Queue depth</div><div class="value" id="queue-depth">-</div></div>
      <div class="card"><div class="label">Requests (total)</div><div class="value" id="requests-total">-</div></div>
      <div class="card"><div class="label">Requests / s</div><div class="value" id="request-rate">-</div></div>
      <div class="card"><div class="label">Stream KiB / s</div><div class="value" id="byte-rate">-</div></div>
      <div class="card"><div class="label">Latency p50 / p95</div><div class="value" id="latency">-</div></div>
      <div class="card"><div class="label">First byte p50 / p95</div><div class="value" id="ttfb">-</div></div>
    </div>

    <section class="panel">
      <h2>Throughput (last 2 minutes)</h2>
      <div class="legend"><span><i class="c-req"></i>requests/s</span><span><i class="c-chunks"></i>stream chunks/s</span></div>
      <canvas id="chart" width="1100" height="180"></canvas>
    </section>

    <section class="panel">
      <h2>Workers</h2>
      <table>
        <thead><tr><th>Name</th><th>Models</th><th>Load</th><th>In flight</th><th>Connected</th><th>Heartbeat</th><th></th></tr></thead>
        <tbody id="workers"></tbody>
      </table>
      <p id="no-workers" class="muted">No worker connected. <a href="/setup">Connect one</a>.</p>
    </section>

    <section class="panel" id="residency-panel">
      <h2>Models &times; workers</h2>
      <table>
        <thead id="residency-head"></thead>
        <tbody id="residency"></tbody>
      </table>
      <p class="muted">What each backend holds (issue 30): <span class="tag res-loaded">loaded</span> in memory, <span class="tag res-loading">loading</span>, <span class="tag res-available">available</span> it can load it; <span class="tag">serves</span> its worker does not report residency; empty: not served there.</p>
    </section>

    <div class="cards three">
      <section class="panel"><h2>Models</h2><table><tbody id="models"></tbody></table></section>
      <section class="panel"><h2>Queues</h2><table><tbody id="queues"></tbody></table></section>
      <section class="panel"><h2>Outcomes</h2><table><tbody id="outcomes"></tbody></table></section>
    </div>
    <section class="panel" id="usage-panel">
      <h2>Usage <select id="usage-period"><option value="3600">last hour</option><option value="86400">last day</option></select></h2>
      <div class="legend"><span><i class="c-tok"></i>tokens/s (prompt + completion)</span></div>
      <canvas id="tok-chart" width="1100" height="120"></canvas>
      <div class="cards three">
        <div><h3>By key</h3><table><thead><tr><th>Key</th><th class="num">Requests</th><th class="num">Prompt</th><th class="num">Completion</th></tr></thead><tbody id="usage-key"></tbody></table></div>
        <div><h3>By tenant</h3><table><thead><tr><th>Tenant</th><th class="num">Requests</th><th class="num">Prompt</th><th class="num">Completion</th></tr></thead><tbody id="usage-tenant"></tbody></table></div>
        <div><h3>By model</h3><table><thead><tr><th>Model</th><th class="num">Requests</th><th class="num">Prompt</th><th class="num">Completion</th></tr></thead><tbody id="usage-model"></tbody></table></div>
      </div>
      <p id="usage-off" class="muted hidden">The usage ledger is off (USAGE_RETENTION_DAYS=0).</p>
    </section>

    <section class="panel" id="log-panel">
      <h2>Request log</h2>
      <form id="log-filter" class="filters">
        <input id="log-key" placeholder="key id" size="18">
        <input id="log-tenant" placeholder="tenant" size="12">
        <input id="log-model" placeholder="model" size="14">
        <input id="log-status" placeholder="status (429, failed)" size="16">
        <button type="submit">Filter</button>
        <button id="log-next" class="secondary" type="button">Older</button>
      </form>
      <table>
        <thead><tr><th>Time</th><th>Key</th><th>Tenant</th><th>Model</th><th>Worker</th><th>Endpoint</th><th>Status</th><th class="num">Prompt</th><th class="num">Completion</th><th class="num">Duration</th></tr></thead>
        <tbody id="log"></tbody>
      </table>
    </section>

    <section class="panel">
      <h2>API keys</h2>
      <table>
        <thead><tr><th>Name</th><th>Tenant</th><th>Max priority</th><th>Created</th><th>Last used</th></tr></thead>
        <tbody id="keys"></tbody>
      </table>
      <p class="muted">A key with a tenant is always counted, limited and queued as that tenant; one without is its own tenant (named by its id), and only a key created with may_name_tenants (a trusted gateway's) may name tenants with X-Tenant-ID. X-Priority above a key's maximum is lowered to it.</p>
    </section>
    <p class="muted">Updated every second from /admin/stats and /admin/workers (the counters behind /metrics). <button id="logout" class="secondary" type="button">Forget token</button></p>
  </section>
`,
  script: "/dashboard.js",
});

export const DASHBOARD_JS = `"use strict";
(function () {
  var KEY = "modelrelay.adminToken";
  var POLL_MS = 1000;
  var KEYS_EVERY = 5;
  var polls = 0;
  var HISTORY = 120;
  var token = sessionStorage.getItem(KEY) || "";
  var timer = null;
  var prev = null;
  var history = [];

  function $(id) { return document.getElementById(id); }
  function text(id, v) { $(id).textContent = String(v); }
  function el(tag, content, cls) {
    var e = document.createElement(tag);
    if (content !== undefined && content !== null) e.textContent = String(content);
    if (cls) e.className = cls;
    return e;
  }
  // A cell naming a row: its name, and under it (muted) its id when it has one.
  function nameCell(name, id) {
    var td = el("td");
    td.appendChild(el("div", name));
    if (id !== null) td.appendChild(el("div", id, "muted"));
    return td;
  }
  // Empties the table body with this id; with no rows to come, one muted row says none.
  function emptyTable(id, rows, none) {
    var body = $(id);
    body.textContent = "";
    if (rows === 0) { var tr0 = el("tr"); tr0.appendChild(el("td", none, "muted")); body.appendChild(tr0); }
    return body;
  }
  function fmtMs(v) { return v === null || v === undefined ? "-" : v < 1000 ? v + " ms" : (v / 1000).toFixed(1) + " s"; }
  function ago(secs) { return secs < 60 ? secs + " s" : secs < 3600 ? Math.round(secs / 60) + " min" : (secs / 3600).toFixed(1) + " h"; }

  function api(path) {
    return fetch(path, { headers: { authorization: "Bearer " + token }, cache: "no-store" })
      .then(function (r) {
        if (r.status === 403 || r.status === 401) {
          return r.json().then(function (b) { var e = new Error(b && b.error ? b.error.message : "forbidden"); e.auth = true; throw e; });
        }
        if (!r.ok) throw new Error(path + ": HTTP " + r.status);
        return r.json();
      });
  }

  function showLogin(message) {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    $("dash").classList.add("hidden");
    $("login").classList.remove("hidden");
    text("login-error", message || "");
    text("conn", "");
  }

  function start() {
    prev = null;
    history = [];
    poll(true);
  }

  function poll(first) {
    Promise.all([api("/admin/stats"), api("/admin/workers")]).then(function (res) {
      if (first) {
        $("login").classList.add("hidden");
        $("dash").classList.remove("hidden");
      }
      render(res[0], res[1].workers);
      if (polls % KEYS_EVERY === 0) api("/admin/keys").then(function (k) { renderKeys(k.keys); }, function () {});
      if (polls % KEYS_EVERY === 0) { loadUsage(); if (logCursor === null) loadLog(); }
      polls++;
      text("conn", "live");
      timer = setTimeout(poll, POLL_MS);
    }).catch(function (e) {
      if (e.auth) { sessionStorage.removeItem(KEY); return showLogin(e.message); }
      if (first) return showLogin(String(e.message || e));
      text("conn", "connection lost, retrying...");
      timer = setTimeout(poll, POLL_MS * 2);
    });
  }

  function render(s, workers) {
    var now = performance.now();
    var reqRate = 0, chunkRate = 0, byteRate = 0, tokRate = 0;
    if (prev !== null) {
      var dt = (now - prev.at) / 1000;
      if (dt > 0) {
        reqRate = Math.max(0, (s.requests_total - prev.s.requests_total) / dt);
        chunkRate = Math.max(0, (s.chunks_streamed_total - prev.s.chunks_streamed_total) / dt);
        byteRate = Math.max(0, (s.bytes_streamed_total - prev.s.bytes_streamed_total) / dt);
        tokRate = Math.max(0, ((s.tokens_total || 0) - (prev.s.tokens_total || 0)) / dt);
      }
      history.push({ req: reqRate, chunks: chunkRate });
      if (history.length > HISTORY) history.shift();
    }
    prev = { at: now, s: s };
    if (history.length > 0) history[history.length - 1].tok = tokRate;
    text("workers-connected", s.workers_connected);
    text("in-flight", s.in_flight);
    text("queue-depth", s.queue_depth_total);
    text("requests-total", s.requests_total);
    text("request-rate", reqRate.toFixed(1));
    text("byte-rate", (byteRate / 1024).toFixed(1));
    text("latency", fmtMs(s.latency_ms.p50) + " / " + fmtMs(s.latency_ms.p95));
    text("ttfb", fmtMs(s.time_to_first_byte_ms.p50) + " / " + fmtMs(s.time_to_first_byte_ms.p95));
    renderWorkers(workers);
    renderModels(workers);
    renderResidency(workers);
    renderPairs("queues", s.queue_depth_by_provider);
    var outcomes = {};
    Object.keys(s.requests_by_outcome).forEach(function (k) { outcomes[k] = s.requests_by_outcome[k]; });
    outcomes.requeues = s.requeues_total;
    renderPairs("outcomes", outcomes);
    drawChart();
    drawTokens();
  }

  // -- usage (issue 26): GET /admin/usage by key, tenant and model; the request log.
  var logCursor = null;
  function loadUsage() {
    var secs = Number($("usage-period").value);
    var to = Date.now() / 1000;
    ["key", "tenant", "model"].forEach(function (g) {
      api("/admin/usage?group_by=" + g + "&from=" + (to - secs).toFixed(3) + "&to=" + to.toFixed(3)).then(function (u) {
        $("usage-off").classList.add("hidden");
        renderUsage("usage-" + g, g, u.groups);
      }, function () { $("usage-off").classList.remove("hidden"); });
    });
  }
  function renderUsage(id, g, groups) {
    var body = emptyTable(id, groups.length, "none");
    groups.forEach(function (x) {
      var tr = el("tr");
      tr.setAttribute("data-group", x[g] === null ? "" : x[g]);
      tr.appendChild(nameCell(x[g] === null ? "(none)" : g === "key" && x.key_name ? x.key_name : x[g], g === "key" ? x[g] : null));
      tr.appendChild(el("td", x.requests, "num"));
      tr.appendChild(el("td", x.prompt_tokens, "num"));
      tr.appendChild(el("td", x.completion_tokens + (x.estimated_requests > 0 ? "*" : ""), "num"));
      body.appendChild(tr);
    });
  }
  function logQuery() {
    var q = ["limit=25"];
    [["key", "log-key"], ["tenant", "log-tenant"], ["model", "log-model"], ["status", "log-status"]].forEach(function (p) {
      var v = $(p[1]).value.trim();
      if (v !== "") q.push(p[0] + "=" + encodeURIComponent(v));
    });
    if (logCursor !== null) q.push("cursor=" + encodeURIComponent(logCursor));
    return "/admin/requests?" + q.join("&");
  }
  function loadLog() {
    api(logQuery()).then(function (r) {
      var body = $("log");
      body.textContent = "";
      if (r.requests.length === 0) { var tr0 = el("tr"); tr0.appendChild(el("td", "no requests", "muted")); body.appendChild(tr0); }
      r.requests.forEach(function (x) {
        var tr = el("tr");
        tr.setAttribute("data-request-id", x.request_id);
        tr.appendChild(el("td", x.at.slice(11, 19)));
        tr.appendChild(el("td", x.key_name === null ? "-" : x.key_name));
        tr.appendChild(el("td", x.tenant));
        tr.appendChild(el("td", x.model));
        tr.appendChild(el("td", x.worker === null ? "-" : x.worker));
        tr.appendChild(el("td", x.endpoint));
        tr.appendChild(el("td", x.status + " " + x.outcome, x.status >= 400 ? "error" : ""));
        tr.appendChild(el("td", x.prompt_tokens === null ? "-" : x.prompt_tokens, "num"));
        tr.appendChild(el("td", x.completion_tokens === null ? "-" : x.completion_tokens + (x.estimated ? "*" : ""), "num"));
        tr.appendChild(el("td", fmtMs(x.duration_ms), "num"));
        body.appendChild(tr);
      });
      $("log-next").disabled = r.next_cursor === null;
      $("log-next").setAttribute("data-cursor", r.next_cursor === null ? "" : r.next_cursor);
    }, function () {});
  }
  function drawTokens() {
    var c = $("tok-chart");
    var ctx = c.getContext("2d");
    var w = c.width, h = c.height;
    ctx.clearRect(0, 0, w, h);
    if (history.length < 2) return;
    var max = 1;
    history.forEach(function (p) { if ((p.tok || 0) > max) max = p.tok; });
    ctx.strokeStyle = "#d29922";
    ctx.lineWidth = 2;
    ctx.beginPath();
    history.forEach(function (p, i) {
      var x = w - (history.length - 1 - i) * (w / (HISTORY - 1));
      var y = h - 4 - (h - 20) * (p.tok || 0) / max;
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
    ctx.fillStyle = "#d29922";
    ctx.fillText("max " + max.toFixed(1), 4, 12);
  }

  function renderWorkers(workers) {
    var body = $("workers");
    body.textContent = "";
    $("no-workers").classList.toggle("hidden", workers.length > 0);
    workers.forEach(function (w) {
      var tr = el("tr");
      tr.setAttribute("data-worker-id", w.id);
      var name = nameCell(w.name, w.id);
      if (w.draining) name.appendChild(el("span", "draining", "tag warn"));
      tr.appendChild(name);
      var models = el("td");
      w.models.forEach(function (m) { models.appendChild(el("span", m, "tag")); });
      tr.appendChild(models);
      var load = el("td", null, "num");
      load.appendChild(el("div", w.load + " / " + w.max_concurrent));
      var bar = el("div", null, "bar");
      var fill = el("div");
      fill.style.width = Math.min(100, Math.round(100 * w.load / Math.max(1, w.max_concurrent))) + "%";
      bar.appendChild(fill);
      load.appendChild(bar);
      tr.appendChild(load);
      tr.appendChild(el("td", w.in_flight, "num"));
      tr.appendChild(el("td", ago(w.connected_secs)));
      tr.appendChild(el("td", ago(w.last_heartbeat_secs_ago) + " ago"));
      var act = el("td");
      if (!w.draining) {
        var b = el("button", "Drain", "secondary");
        b.type = "button";
        b.addEventListener("click", function () {
          if (!confirm("Drain worker " + w.name + "? It finishes its requests, then disconnects.")) return;
          fetch("/admin/workers/" + encodeURIComponent(w.id) + "/drain", { method: "POST", headers: { authorization: "Bearer " + token } });
        });
        act.appendChild(b);
      }
      tr.appendChild(act);
      body.appendChild(tr);
    });
  }

  function renderKeys(keys) {
    var body = emptyTable("keys", keys.length, "none (POST /admin/keys)");
    keys.forEach(function (k) {
      var tr = el("tr");
      tr.setAttribute("data-key-id", k.id);
      tr.appendChild(nameCell(k.name, k.id));
      tr.appendChild(k.tenant !== null ? el("td", k.tenant)
        : k.may_name_tenants ? el("td", "any (X-Tenant-ID)", "muted")
        : el("td", "its own (" + k.id + ")", "muted"));
      tr.appendChild(el("td", k.max_priority));
      tr.appendChild(el("td", k.created_at_iso ? k.created_at_iso.slice(0, 19).replace("T", " ") : "-"));
      tr.appendChild(el("td", k.last_used_at_iso ? k.last_used_at_iso.slice(0, 19).replace("T", " ") : "never"));
      body.appendChild(tr);
    });
  }

  function renderModels(workers) {
    var counts = {};
    workers.forEach(function (w) { w.models.forEach(function (m) { counts[m] = (counts[m] || 0) + 1; }); });
    var out = {};
    Object.keys(counts).sort().forEach(function (m) { out[m] = counts[m] + (counts[m] === 1 ? " worker" : " workers"); });
    renderPairs("models", out);
  }

  // Issue 30: rows are models, columns workers; a cell says where the model
  // stands on that worker's backend (GET /admin/workers "residency").
  function renderResidency(workers) {
    var models = {};
    workers.forEach(function (w) { w.models.forEach(function (m) { if (m !== "*") models[m] = true; }); });
    var names = Object.keys(models).sort();
    var head = $("residency-head");
    head.textContent = "";
    var hr = el("tr");
    hr.appendChild(el("th", "Model"));
    workers.forEach(function (w) {
      var th = el("th", w.name);
      if (w.residency && w.residency.room !== null) th.appendChild(el("div", "room " + w.residency.room, "muted"));
      hr.appendChild(th);
    });
    head.appendChild(hr);
    var body = emptyTable("residency", names.length, "no models");
    names.forEach(function (m) {
      var tr = el("tr");
      tr.setAttribute("data-model", m);
      tr.appendChild(el("td", m));
      workers.forEach(function (w) {
        var td = el("td");
        td.setAttribute("data-worker-id", w.id);
        var state = w.models.indexOf(m) < 0 ? null : w.residency ? w.residency.models[m] : "serves";
        if (state) {
          td.setAttribute("data-state", state);
          td.appendChild(el("span", state, "tag res-" + state));
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  function renderPairs(id, obj) {
    var body = $(id);
    body.textContent = "";
    var keys = Object.keys(obj);
    if (keys.length === 0) { var tr0 = el("tr"); tr0.appendChild(el("td", "none", "muted")); body.appendChild(tr0); }
    keys.forEach(function (k) {
      var tr = el("tr");
      tr.appendChild(el("td", k));
      tr.appendChild(el("td", obj[k], "num"));
      body.appendChild(tr);
    });
  }

  function drawChart() {
    var c = $("chart");
    var ctx = c.getContext("2d");
    var w = c.width, h = c.height;
    ctx.clearRect(0, 0, w, h);
    ctx.strokeStyle = "#2a3642";
    ctx.lineWidth = 1;
    for (var g = 1; g < 4; g++) { ctx.beginPath(); ctx.moveTo(0, h * g / 4); ctx.lineTo(w, h * g / 4); ctx.stroke(); }
    if (history.length < 2) return;
    function series(field, color) {
      var max = 1;
      history.forEach(function (p) { if (p[field] > max) max = p[field]; });
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      ctx.beginPath();
      history.forEach(function (p, i) {
        var x = w - (history.length - 1 - i) * (w / (HISTORY - 1));
        var y = h - 4 - (h - 20) * p[field] / max;
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke();
      ctx.fillStyle = color;
      ctx.fillText("max " + max.toFixed(1), field === "req" ? 4 : 100, 12);
    }
    series("req", "#4fa3ff");
    series("chunks", "#3fb950");
  }

  $("login-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem(KEY, token);
    start();
  });
  $("usage-period").addEventListener("change", loadUsage);
  $("log-filter").addEventListener("submit", function (ev) {
    ev.preventDefault();
    logCursor = null;
    loadLog();
  });
  $("log-next").addEventListener("click", function () {
    var next = $("log-next").getAttribute("data-cursor");
    if (next) { logCursor = next; loadLog(); }
  });
  $("logout").addEventListener("click", function () {
    sessionStorage.removeItem(KEY);
    token = "";
    showLogin("");
  });
  if (token !== "") start();
})();
`;
