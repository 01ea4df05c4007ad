// /setup: the connect-a-worker wizard. Detects the visitor's platform, builds the
// exact worker command with this server's URL, and polls the public
// GET /setup/status until a new worker registers. The worker secret typed here
// never leaves the browser: it only fills in the command.
import { pageHtml } from "./page_style.ts";

/** The Deno this server runs on: the version the README pins, stated nowhere else. */
const DENO_VERSION = Deno.version.deno;
export const SETUP_HTML = pageHtml({
  title: "ModelRelay: connect a worker",
  header:
    `  <nav><a href="/dashboard">Dashboard</a><a href="/setup">Connect a worker</a></nav>`,
  main: `  <section class="panel step">
    <div class="n">1</div>
    <div class="body">
      <h2>Worker machine</h2>
      <p>Detected platform: <strong id="platform-detected">unknown</strong>.
        <span class="muted">Change it if the worker runs elsewhere:</span>
        <select id="platform">
          <option value="linux">Linux</option>
          <option value="macos">macOS</option>
          <option value="windows">Windows (PowerShell)</option>
        </select></p>
      <p>The worker runs from a copy of the ModelRelay source with Deno ${DENO_VERSION}.
        <select id="runner">
          <option value="deno">Deno is installed (deno task worker)</option>
          <option value="npx">Only Node.js/npm is installed (npx -y deno@${DENO_VERSION} task worker)</option>
        </select></p>
      <p id="install-hint" class="muted"></p>
    </div>
  </section>

  <section class="panel step">
    <div class="n">2</div>
    <div class="body">
      <h2>Model backend on that machine</h2>
      <div class="field"><label for="backend">Backend</label>
        <select id="backend">
          <option value="http://localhost:11434">Ollama (port 11434)</option>
          <option value="http://localhost:8000">vLLM (port 8000)</option>
          <option value="http://localhost:8080">llama.cpp server (port 8080)</option>
          <option value="http://localhost:1234">LM Studio (port 1234)</option>
        </select></div>
      <div class="field"><label for="backend-url">BACKEND_URL</label><input id="backend-url" value="http://localhost:11434"></div>
      <div class="field"><label for="models">MODELS (comma-separated, as the backend names them; empty = every model the backend lists)</label><input id="models" value="llama3.2:3b"></div>
      <p class="muted">Check the backend first: <code id="backend-check"></code></p>
    </div>
  </section>

  <section class="panel step">
    <div class="n">3</div>
    <div class="body">
      <h2>Relay and identity</h2>
      <div class="field"><label for="proxy-url">PROXY_URL (this server, as the worker machine reaches it)</label><input id="proxy-url"></div>
      <p id="proxy-hint" class="muted"></p>
      <div class="field"><label for="secret">WORKER_SECRET (the server's; stays in this page, never sent)</label><input id="secret" type="password" placeholder="your-worker-secret" autocomplete="off"></div>
      <div class="field"><label for="worker-name">WORKER_NAME</label><input id="worker-name" value="gpu-box-1"></div>
    </div>
  </section>

  <section class="panel step">
    <div class="n">4</div>
    <div class="body">
      <h2>Run this on the worker machine</h2>
      <pre id="command"></pre>
      <button id="copy" type="button">Copy command</button> <span id="copied" class="muted"></span>
    </div>
  </section>

  <section class="panel step">
    <div class="n">5</div>
    <div class="body">
      <h2>Live verification</h2>
      <div id="status" class="waiting">Waiting for a new worker to register...</div>
      <p id="status-detail" class="muted"></p>
    </div>
  </section>
`,
  script: "/setup.js",
});

export const SETUP_JS = `"use strict";
(function () {
  function $(id) { return document.getElementById(id); }

  function detectPlatform() {
    var p = ((navigator.userAgentData && navigator.userAgentData.platform) || navigator.platform || navigator.userAgent || "").toLowerCase();
    if (p.indexOf("win") >= 0) return "windows";
    if (p.indexOf("mac") >= 0 || p.indexOf("darwin") >= 0 || p.indexOf("iphone") >= 0 || p.indexOf("ipad") >= 0) return "macos";
    return "linux";
  }
  var NAMES = { linux: "Linux", macos: "macOS", windows: "Windows" };

  function sh(v) { return "'" + String(v).replace(/'/g, "'\\\\''") + "'"; }
  function ps(v) { return "'" + String(v).replace(/'/g, "''") + "'"; }

  function command() {
    var platform = $("platform").value;
    var runner = $("runner").value === "npx" ? "npx -y deno@${DENO_VERSION} task worker" : "deno task worker";
    var env = [
      ["PROXY_URL", $("proxy-url").value.trim()],
      ["WORKER_SECRET", $("secret").value || "your-worker-secret"],
      ["BACKEND_URL", $("backend-url").value.trim()],
      ["MODELS", $("models").value.split(",").map(function (m) { return m.trim(); }).filter(Boolean).join(",")],
      ["WORKER_NAME", $("worker-name").value.trim() || "worker"],
    ].filter(function (kv) { return kv[0] !== "MODELS" || kv[1] !== ""; });
    if (platform === "windows") {
      return env.map(function (kv) { return "$env:" + kv[0] + " = " + ps(kv[1]); }).join("\\n") + "\\n" + runner;
    }
    return env.map(function (kv) { return kv[0] + "=" + sh(kv[1]) + " \\\\"; }).join("\\n") + "\\n  " + runner;
  }

  function installHint() {
    var platform = $("platform").value;
    if ($("runner").value === "npx") return "Needs Node.js 18+ and npm; npx downloads Deno ${DENO_VERSION} the first time.";
    if (platform === "windows") return "Install Deno ${DENO_VERSION}: $v='${DENO_VERSION}'; irm https://deno.land/install.ps1 | iex (or use the npx option).";
    return "Install Deno ${DENO_VERSION}: curl -fsSL https://deno.land/install.sh | sh -s v${DENO_VERSION} (or use the npx option).";
  }

  function update() {
    $("command").textContent = command();
    $("install-hint").textContent = installHint();
    var b = $("backend-url").value.trim().replace(/\\/+$/, "");
    $("backend-check").textContent = "curl " + b + "/v1/models";
    var host = "";
    try { host = new URL($("proxy-url").value).hostname; } catch (_) { host = ""; }
    $("proxy-hint").textContent = (host === "localhost" || host === "127.0.0.1" || host === "[::1]")
      ? "This address only works on this machine. A worker elsewhere needs the server's network address (https:// when TLS terminates in front of it)."
      : "";
  }

  var detected = detectPlatform();
  $("platform-detected").textContent = NAMES[detected];
  $("platform").value = detected;
  $("proxy-url").value = location.origin;
  $("backend").addEventListener("change", function () { $("backend-url").value = $("backend").value; update(); });
  ["platform", "runner", "backend-url", "models", "proxy-url", "secret", "worker-name"].forEach(function (id) {
    $(id).addEventListener("input", update);
    $(id).addEventListener("change", update);
  });
  $("copy").addEventListener("click", function () {
    var done = function () { $("copied").textContent = "copied"; };
    if (navigator.clipboard) navigator.clipboard.writeText(command()).then(done, function () { $("copied").textContent = "select the text and copy it"; });
  });
  update();

  var baseline = null;
  function poll() {
    fetch("/setup/status", { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (s) {
      if (baseline === null) {
        baseline = s.worker_registrations_total;
        $("status-detail").textContent = s.workers_connected > 0
          ? s.workers_connected + " worker(s) already connected; this turns green when another one registers."
          : "Start the worker with the command above; this turns green when it registers.";
      }
      if (s.worker_registrations_total > baseline) {
        var st = $("status");
        st.className = "ok";
        st.textContent = "Worker connected! " + s.workers_connected + " worker(s) " + (s.models === undefined
          ? "now connected (their models: GET /v1/models with a client key)"
          : "now serve: " + (s.models.join(", ") || "(no models yet)"));
        $("status-detail").textContent = "Try it: curl " + location.origin + "/v1/models";
        return;
      }
      setTimeout(poll, 1000);
    }).catch(function () { setTimeout(poll, 2000); });
  }
  poll();
})();
`;
