// Issue 33 (MEDIUM 6) with real processes: a backend behind a normalising
// nginx (`proxy_pass http://backend/;` decodes %2F and resolves dot segments
// before it forwards), a worker in front of nginx, the relay in front of the
// worker. A forwarded path with an encoded separator, a backslash or a dot
// segment is refused 400 and never reaches the backend, where nginx would have
// turned `/v1/..%2fslots` into `/slots`; a forward prefix matches whole
// segments.
import assert from "node:assert/strict";
import { ensureNginx } from "../../bench/e2e/nginx.ts";
import { type Child, waitUntil } from "../procs.ts";
import { startServerProcess, startWorkerProcess } from "../demo/cluster.ts";
import { workersConnected } from "../demo/relay_probes.ts";
import { rawBackend } from "../../e2e/_raw_backend.ts";
import { rawConnect } from "./_raw_socket.ts";

const SECRET = "forward-path-nginx-secret";

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** nginx as many deployments write it: a URI on proxy_pass, so it normalises. */
function normalisingConfig(dir: string, port: number, backend: string): string {
  return `pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass ${backend}/; }
  }
}
`;
}

/** The status of one request sent with exactly this request target. */
async function statusOf(
  url: string,
  method: string,
  target: string,
): Promise<number> {
  const conn = await rawConnect(Number(new URL(url).port));
  await conn.write(
    `${method} ${target} HTTP/1.1\r\nhost: relay\r\nx-model: raw-model\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
  );
  await conn.ended;
  conn.close();
  const m = /^HTTP\/1\.1 (\d{3})/.exec(conn.received());
  assert.ok(m !== null, `no status line for ${target}: ${conn.received()}`);
  return Number(m[1]);
}

Deno.test("issue 33 forwarded paths stay where they are sent: behind a normalising nginx, GET /v1/..%2fsecret no longer reaches /secret", async (t) => {
  const nginx = await ensureNginx(() => {});
  assert.equal(nginx.kind, "found", JSON.stringify(nginx));
  if (nginx.kind !== "found") return;
  const backend = await rawBackend((socket, r) => {
    const body = JSON.stringify({ path: r.path });
    socket.write(
      `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
  });
  const dir = await Deno.makeTempDir({ prefix: "relay-nginx-" });
  const port = freePort();
  await Deno.writeTextFile(
    `${dir}/nginx.conf`,
    normalisingConfig(dir, port, backend.url),
  );
  const proxy = new Deno.Command(nginx.path, {
    args: [
      "-c",
      `${dir}/nginx.conf`,
      "-p",
      dir,
      "-e",
      `${dir}/error.log`,
      "-g",
      "daemon off;",
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const nginxUrl = `http://127.0.0.1:${port}`;
  const started: Child[] = [];
  try {
    await waitUntil("nginx answers", async () => {
      try {
        return (await fetch(`${nginxUrl}/v1/models`)).ok;
      } catch {
        return false;
      }
    });
    const paths = () => backend.requests.map((r) => r.path);

    await t.step(
      "nginx alone does take /v1/..%2fsecret to /secret",
      async () => {
        assert.equal(await statusOf(nginxUrl, "GET", "/v1/..%2fsecret"), 200);
        assert.equal(paths().at(-1), "/secret");
      },
    );
    const direct = backend.requests.length;

    const server = await startServerProcess({
      secret: SECRET,
      env: { TICK_MS: "20", FORWARD_PATH_PREFIXES: "/tokenize" },
    });
    started.push(server.child);
    started.push(
      await startWorkerProcess({
        name: "behind-nginx",
        serverUrl: server.url,
        secret: SECRET,
        backendUrl: nginxUrl,
        env: { MODELS: "raw-model" },
      }),
    );
    await waitUntil(
      "worker registered",
      async () => (await workersConnected(server.url)) === 1,
    );

    await t.step(
      "encoded separators, backslashes and dot segments: 400, nothing forwarded",
      async () => {
        const before = backend.requests.length;
        for (
          const target of [
            "/v1/..%2fsecret",
            "/v1/..%2Fsecret",
            "/v1/a%5c..%5csecret",
            "/v1/a\\secret",
            "/v1/%2e%2e%2fsecret",
            "/v1/./secret",
          ]
        ) {
          assert.equal(await statusOf(server.url, "GET", target), 400, target);
        }
        // Not under /tokenize/ at all (its second segment is "tokenize%2f.."):
        // no route.
        assert.equal(
          await statusOf(server.url, "GET", "/tokenize%2f..%2fsecret"),
          404,
        );
        // (The worker's own polls of the backend go on meanwhile.)
        assert.deepEqual(
          backend.requests.slice(before).map((r) => r.path).filter((p) =>
            p.includes("secret")
          ),
          [],
        );
      },
    );

    await t.step(
      "a forward prefix matches whole segments: /tokenizeX is not /tokenize",
      async () => {
        assert.equal(await statusOf(server.url, "POST", "/tokenizeX"), 404);
        assert.equal(await statusOf(server.url, "POST", "/tokenize"), 200);
        assert.equal(await statusOf(server.url, "POST", "/tokenize/sub"), 200);
        assert.equal(
          await statusOf(server.url, "GET", "/v1/embeddings?x=..%2f"),
          200,
        );
        const last = paths().filter((p) =>
          p.startsWith("/tokenize") || p.startsWith("/v1/embeddings")
        );
        assert.deepEqual(last, [
          "/tokenize",
          "/tokenize/sub",
          "/v1/embeddings?x=..%2f",
        ]);
        assert.ok(
          !paths().slice(direct).some((p) => p.includes("secret")),
          JSON.stringify(paths()),
        );
      },
    );
  } finally {
    for (const c of started.reverse()) await c.stop(5_000);
    proxy.kill("SIGTERM");
    await proxy.status;
    await backend.close();
    await Deno.remove(dir, { recursive: true });
  }
});
