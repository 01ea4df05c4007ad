// Issue 32: the documents a user copies. examples/tls-nginx.conf passes
// `nginx -t` on Debian 12's nginx (1.22, where `http2 on;` does not exist yet),
// and, run for real in front of the relay with a certificate from a private CA
// made here, carries https:// for a client and wss:// for a worker that trusts
// the CA through DENO_CERT, as the README says.
import assert from "node:assert/strict";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../shell/demo/cluster.ts";
import {
  type Child,
  freePort,
  ROOT,
  spawnProgram,
  waitUntil,
} from "../shell/procs.ts";
import { answerWords, MODEL } from "./_cluster.ts";

const EXAMPLE = `${ROOT}examples/tls-nginx.conf`;
const SECRET = "tls-nginx-secret-0123456789";

async function run(
  program: string,
  args: string[],
): Promise<{ ok: boolean; out: string }> {
  const r = await new Deno.Command(program, {
    args,
    env: { DEBIAN_FRONTEND: "noninteractive" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return {
    ok: r.success,
    out: text.decode(r.stdout) + text.decode(r.stderr),
  };
}

/** Debian's nginx: on this machine, or installed with apt-get (tests may). */
async function debianNginx(): Promise<string> {
  const path = "/usr/sbin/nginx";
  const present = async () => {
    try {
      return (await Deno.stat(path)).isFile;
    } catch {
      return false;
    }
  };
  if (await present()) return path;
  // Another install may hold the dpkg lock: wait for it, as the other tests do.
  const apt = ["-o", "DPkg::Lock::Timeout=600"];
  const install = await run("apt-get", [
    ...apt,
    "install",
    "-y",
    "nginx-light",
  ]);
  if (!install.ok) await run("apt-get", [...apt, "update"]);
  if (!install.ok) {
    await run("apt-get", [...apt, "install", "-y", "nginx-light"]);
  }
  if (!await present()) {
    throw new Error(
      "no nginx for the TLS example test: run `sudo apt-get install -y nginx-light`",
    );
  }
  return path;
}

/** A private CA and a certificate it signed for localhost and 127.0.0.1. */
async function privateCa(dir: string): Promise<void> {
  const steps: string[][] = [
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
      .concat(["-subj", "/CN=modelrelay test CA"])
      .concat(["-keyout", `${dir}/ca.key`, "-out", `${dir}/ca.pem`]),
    ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost"]
      .concat(["-keyout", `${dir}/server.key`, "-out", `${dir}/server.csr`]),
    ["x509", "-req", "-in", `${dir}/server.csr`, "-CA", `${dir}/ca.pem`]
      .concat(["-CAkey", `${dir}/ca.key`, "-CAcreateserial", "-days", "2"])
      .concat(["-extfile", `${dir}/ext.cnf`, "-out", `${dir}/server.pem`]),
  ];
  await Deno.writeTextFile(
    `${dir}/ext.cnf`,
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
  );
  for (const args of steps) {
    const r = await run("openssl", args);
    assert.ok(r.ok, `openssl ${args[0]}: ${r.out}`);
  }
}

/** The example with only what must change on this machine: its certificate files. */
function withOurCert(site: string, dir: string): string {
  return site
    .replace(/ssl_certificate\s+\S+;/, `ssl_certificate ${dir}/server.pem;`)
    .replace(
      /ssl_certificate_key\s+\S+;/,
      `ssl_certificate_key ${dir}/server.key;`,
    );
}

/** A main config around a site file, everything nginx writes kept in `dir`. */
function mainConfig(dir: string, site: string): string {
  return `pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 64; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  include ${dir}/${site};
}
`;
}

Deno.test("examples/tls-nginx.conf passes nginx -t on Debian 12's nginx 1.22", async () => {
  const nginx = await debianNginx();
  const dir = await Deno.makeTempDir({ prefix: "tls-nginx-" });
  try {
    await privateCa(dir);
    const site = withOurCert(await Deno.readTextFile(EXAMPLE), dir);
    await Deno.writeTextFile(`${dir}/site.conf`, site);
    await Deno.writeTextFile(`${dir}/nginx.conf`, mainConfig(dir, "site.conf"));
    const version = await run(nginx, ["-v"]);
    const t = await run(nginx, [
      "-t",
      "-p",
      dir,
      "-e",
      `${dir}/error.log`,
      "-c",
      `${dir}/nginx.conf`,
    ]);
    assert.ok(t.ok, `${version.out.trim()}: nginx -t failed:\n${t.out}`);
    assert.match(t.out, /syntax is ok/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("through the example nginx: https:// for a client, wss:// for a worker trusting a private CA with DENO_CERT", async () => {
  const nginx = await debianNginx();
  const dir = await Deno.makeTempDir({ prefix: "tls-nginx-run-" });
  const children: Child[] = [];
  try {
    await privateCa(dir);
    const mock = await startMockProcess({ delayMs: 1, models: [MODEL] });
    children.push(mock.child);
    const server = await startServerProcess({ secret: SECRET });
    children.push(server.child);
    const relayPort = new URL(server.url).port;
    const [http, https] = [freePort(), freePort()];
    // Run it on free loopback ports in front of this relay; nothing else changes.
    const site = withOurCert(await Deno.readTextFile(EXAMPLE), dir)
      .replace(/^\s*listen \[::\].*$/gm, "")
      .replace("listen 80;", `listen 127.0.0.1:${http};`)
      .replace("listen 443 ssl http2;", `listen 127.0.0.1:${https} ssl http2;`)
      .replace("server 127.0.0.1:8080;", `server 127.0.0.1:${relayPort};`);
    await Deno.writeTextFile(`${dir}/site.conf`, site);
    await Deno.writeTextFile(`${dir}/nginx.conf`, mainConfig(dir, "site.conf"));
    const proxy = spawnProgram({
      name: "nginx",
      program: nginx,
      args: [
        "-p",
        dir,
        "-e",
        `${dir}/error.log`,
        "-c",
        `${dir}/nginx.conf`,
        "-g",
        "daemon off;",
      ],
    });
    children.push(proxy);
    const base = `https://localhost:${https}`;
    const curl = (args: string[]) =>
      run("curl", ["-sS", "--cacert", `${dir}/ca.pem`, ...args]);
    await waitUntil(
      "nginx answering https",
      async () => (await curl([`${base}/health`])).ok,
      15_000,
      proxy,
    );

    // The worker trusts the private CA only through DENO_CERT.
    const worker = await startWorkerProcess({
      name: "tls-worker",
      serverUrl: base,
      secret: SECRET,
      backendUrl: mock.url,
      env: { DENO_CERT: `${dir}/ca.pem` },
    });
    children.push(worker);
    assert.ok(
      worker.lines.some((l) => l.includes(`wss://localhost:${https}/`)),
      worker.tail(),
    );

    const answer = await curl([
      "-N",
      `${base}/v1/chat/completions`,
      "-H",
      "content-type: application/json",
      "-d",
      JSON.stringify({
        model: MODEL,
        stream: true,
        max_tokens: 4,
        messages: [{ role: "user", content: "Hello!" }],
      }),
    ]);
    assert.ok(answer.ok, answer.out);
    const text = answer.out.split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? "")
      .join("");
    assert.equal(text, answerWords(4));

    // The CA is private: without it, TLS refuses (what DENO_CERT fixed).
    const untrusting = await run("curl", ["-sS", `${base}/health`]);
    assert.equal(untrusting.ok, false);
  } finally {
    for (const c of children.reverse()) await c.stop(5_000);
    await Deno.remove(dir, { recursive: true });
  }
});
