import assert from "node:assert/strict";
import { findOrInstallNginx, nginxConfig, type NginxSystem } from "./nginx.ts";

const CONF = nginxConfig("/tmp/n", [
  { name: "backend", listenPort: 1001, backend: "127.0.0.1:2001" },
  { name: "stamp", listenPort: 1002, backend: "127.0.0.1:2002" },
]);

Deno.test("nginx config: everything nginx writes stays under the prefix", () => {
  assert.match(CONF, /^pid \/tmp\/n\/nginx\.pid;$/m);
  assert.match(CONF, /^error_log \/tmp\/n\/error\.log warn;$/m);
  assert.match(CONF, /^\s+access_log off;$/m);
  assert.match(CONF, /^worker_processes auto;$/m);
  assert.doesNotMatch(CONF, /daemon/); // given on the command line
});

Deno.test("nginx config: one upstream with keepalive and one server per route", () => {
  for (
    const [name, port, backend] of [["backend", 1001, 2001], [
      "stamp",
      1002,
      2002,
    ]]
  ) {
    assert.match(
      CONF,
      new RegExp(
        `upstream ${name} \\{\\n\\s+server 127\\.0\\.0\\.1:${backend};\\n\\s+keepalive 64;`,
      ),
    );
    assert.match(CONF, new RegExp(`listen 127\\.0\\.0\\.1:${port};`));
    assert.match(CONF, new RegExp(`proxy_pass http://${name};`));
  }
});

Deno.test("nginx config: streams pass through unbuffered on reused HTTP/1.1 connections", () => {
  for (
    const d of [
      "proxy_http_version 1.1;",
      'proxy_set_header Connection "";',
      "proxy_buffering off;",
      "proxy_request_buffering off;",
      "proxy_read_timeout 3600s;",
    ]
  ) {
    assert.equal(CONF.split(d).length - 1, 2, d);
  }
});

Deno.test("nginx config: a backend's idle close never becomes a 502 (llama-server closes idle connections after 5 s)", () => {
  for (
    const d of [
      "keepalive_timeout 4s;",
      "proxy_next_upstream error timeout non_idempotent;",
    ]
  ) {
    assert.equal(CONF.split(d).length - 1, 2, d);
  }
});

Deno.test("nginx config: braces balance", () => {
  assert.equal(CONF.split("{").length, CONF.split("}").length);
});

/** A fake system: which binaries exist, the uid, and what each command answers. */
function fakeSystem(opts: {
  have: string[];
  uid: number | null;
  answers?: Record<string, (string | null)[]>;
  installs?: string[];
}) {
  const have = new Set(opts.have);
  const calls: string[] = [];
  const sys: NginxSystem = {
    which: (cmd) => Promise.resolve(have.has(cmd) ? `/usr/sbin/${cmd}` : null),
    uid: () => opts.uid,
    run: (cmd, args) => {
      const key = [cmd, ...args].join(" ");
      calls.push(key);
      const queue = opts.answers?.[key] ?? [null];
      const answer = queue.length > 1 ? queue.shift()! : queue[0]!;
      if (
        answer === null &&
        key === "apt-get -o DPkg::Lock::Timeout=600 install -y nginx-light"
      ) {
        for (const b of opts.installs ?? []) have.add(b);
      }
      return Promise.resolve(answer);
    },
  };
  return { sys, calls };
}

const quiet = () => {};

Deno.test("nginx found on the machine: used as it is, nothing installed", async () => {
  const { sys, calls } = fakeSystem({ have: ["nginx"], uid: 1000 });
  assert.deepEqual(await findOrInstallNginx(sys, quiet), {
    binary: { kind: "found", path: "/usr/sbin/nginx" },
    installed: false,
  });
  assert.deepEqual(calls, []);
});

Deno.test("nginx missing and not root: skipped with the command to run", async () => {
  for (const uid of [1000, null]) {
    const { sys, calls } = fakeSystem({ have: ["apt-get"], uid });
    const r = await findOrInstallNginx(sys, quiet);
    assert.equal(r.binary.kind, "unavailable");
    assert.match(
      r.binary.kind === "unavailable" ? r.binary.reason : "",
      /not root \(apt-get install -y nginx-light\)/,
    );
    assert.deepEqual(calls, []);
  }
});

Deno.test("nginx missing, root, no apt-get: skipped, says so", async () => {
  const { sys } = fakeSystem({ have: [], uid: 0 });
  const r = await findOrInstallNginx(sys, quiet);
  assert.deepEqual(r.binary, {
    kind: "unavailable",
    reason: "nginx not installed, no apt-get",
  });
});

Deno.test("nginx missing as root: installed, apt-get update only after a failed install", async () => {
  const first = fakeSystem({ have: ["apt-get"], uid: 0, installs: ["nginx"] });
  assert.deepEqual(await findOrInstallNginx(first.sys, quiet), {
    binary: { kind: "found", path: "/usr/sbin/nginx" },
    installed: true,
  });
  assert.deepEqual(first.calls, [
    "apt-get -o DPkg::Lock::Timeout=600 install -y nginx-light",
  ]);

  const second = fakeSystem({
    have: ["apt-get"],
    uid: 0,
    installs: ["nginx"],
    answers: {
      "apt-get -o DPkg::Lock::Timeout=600 install -y nginx-light": [
        "E: Unable to locate package",
        null,
      ],
    },
  });
  assert.equal((await findOrInstallNginx(second.sys, quiet)).installed, true);
  assert.deepEqual(second.calls, [
    "apt-get -o DPkg::Lock::Timeout=600 install -y nginx-light",
    "apt-get -o DPkg::Lock::Timeout=600 update",
    "apt-get -o DPkg::Lock::Timeout=600 install -y nginx-light",
  ]);
});

Deno.test("nginx install that fails twice: skipped with apt-get's last line", async () => {
  const { sys } = fakeSystem({
    have: ["apt-get"],
    uid: 0,
    answers: {
      "apt-get -o DPkg::Lock::Timeout=600 install -y nginx-light": [
        "Reading package lists...\nE: Unable to locate package nginx-light",
      ],
    },
  });
  assert.deepEqual((await findOrInstallNginx(sys, quiet)).binary, {
    kind: "unavailable",
    reason:
      "apt-get install nginx-light failed: E: Unable to locate package nginx-light",
  });
});
