// What the demo and the end-to-end tests ask a running relay while they wait
// for it: is a model listed, how many workers registered.

/** True once GET `${serverUrl}/v1/models` lists `model`. */
export async function modelListed(
  serverUrl: string,
  model: string,
): Promise<boolean> {
  const res = await fetch(`${serverUrl}/v1/models`);
  const body = await res.json() as { data?: { id: string }[] };
  return res.ok && (body.data ?? []).some((m) => m.id === model);
}

/** Number of registered workers, from GET /health. */
export async function workersConnected(serverUrl: string): Promise<number> {
  const res = await fetch(`${serverUrl}/health`);
  const body = await res.json() as { workers_connected?: number };
  return body.workers_connected ?? 0;
}
