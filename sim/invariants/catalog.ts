// The named invariants (conventions §6): each name, with the checklist items it
// guards, is what a violation reports; one file in this folder checks each
// (named after it), called in a fixed order by sim/observer/observer.ts.
// liveness alone is judged by run_scenario.ts at the end of the heal phase
// (Observer.failLiveness).
export const INVARIANTS = {
  endsExactlyOnce: "C34 every accepted request ends exactly once",
  deadline:
    "C12/C19/C48 a request ends no later than its deadline plus one tick",
  maxConcurrent: "C8 no worker has more in flight than max_concurrent",
  eligibleWorker:
    "C6/C7/C28/C42 dispatch only to a worker that acked the model and is not draining",
  queueBound: "C9 a new request is queued only below MAX_QUEUE_LEN",
  requeueCap: "C22/C23 at most 3 requeues, deadline never extended",
  chunkOrder: "C15 chunks reach the client in the order the worker sent them",
  chunkFromAssigned:
    "C32 chunks come only from the worker the request is assigned to",
  nothingAfterEnd: "C20 nothing reaches a client after its request ended",
  noSplice: "C24 a stream is never spliced from two workers",
  cancelWhenAbandoned:
    "C18/C19 a cancel goes to a worker exactly when a dispatched request is abandoned",
  fifo:
    "C9/C10 FIFO within (priority, tenant) among requests a free worker can serve",
  lowestLoad: "C8 lowest load wins, ties round-robin",
  observerAgrees: "C34 core and observer agree on open and queued requests",
  priorityOrder:
    "004 while a higher class stays dispatchable, a lower class gets at most ceil(w_lower/w_higher) dispatches between two of its dispatches (stride weights)",
  fairnessBound:
    "004 while a tenant has a dispatchable request waiting in a class, no other tenant of that class is served twice before it (at most one dispatch per other tenant)",
  noStarvation:
    "004 while low stays dispatchable, at most sum over higher classes of (floor(w/w_low)+1) dispatches pass before a low one",
  rateLimit:
    "004 per tenant, admissions in any sliding window never exceed the limit; 429 only when the window is full (never under- or over-counted)",
  tokenLimit:
    "issue 26 per tenant, a request is admitted only while its finished requests' tokens in the window are below each token limit (so a window holds at most the limit plus the tokens in flight when it was reached); a token 429 only when the window holds the limit",
  streamsCounted:
    "issue 33 every stream that finished normally is counted: its usage holds at least a token per chunk, charged to every token limit of its tenant",
  cacheAffinity:
    "004 a cache key goes to the worker that served it last unless that worker is busier than the least-loaded one by more than the margin",
  extensionFramesOnlyToNegotiated:
    "I9 extension frames (lifecycle_request) go only to workers that listed the extension; register_ack carries extensions only for workers that sent the field; unnegotiated capabilities are ignored",
  lifecycleTaskEndsOnce:
    "I9 every lifecycle task ends (completed or failed) exactly once: on its worker's final report, when its worker leaves, or by lifecycleTaskTimeoutMs plus one tick",
  lifecycleOnlyToCapable:
    "I9 lifecycle operations go only to registered, non-draining workers that negotiated lifecycle-v1 (the named target if any; holders of the model for unload and model flush), and are refused only when no such worker exists",
  streamCarriesOnlyBackendBytes:
    "C15/C24 issue 14.4 a stream carries only its backend's bytes: a failure after the first byte (a status >= 400 completion) ends it with an SSE error event, never a spliced body or a normal end",
  retryElsewhere:
    "C27 issue 14.3 a request refused by a worker (scoped error) goes back to that worker only when no other worker serves the model; a worker whose backend circuit is open gets nothing",
  neverRunTwiceForSize:
    "issue 14.2 a request never runs twice because of its own answer's size",
  drainingModelsStayRoutable:
    "C28 issue 14.1 a worker draining itself (drain-v1) keeps its models known: requests for them queue, never 404, until it disconnects",
  dispatchOnlyToAccepting:
    "I25 a request is dispatched only to a worker that accepts its path (endpoint_prefixes) and its body (body-bytes-v1 for one that is not text), and refused for want of one only when no worker of its model does",
  wholeSseEvents:
    "C60 issue 24.1 a stream never carries a partial event followed by another event: no chunk starts an event while the stream ends inside one, and our worker's stream breaks only between events",
  streamHeadFromItsWorker:
    "C108 issue 25 a stream opens with the head its committing worker sent in this dispatch (stream-head-v1), never an earlier worker's, and never without it",
  answerBytesCounted:
    "C170/C172 issue 33.3 an answer's bytes handed to the shell stay in MAX_BUFFERED_RESPONSE_BYTES until its client took them or its connection is gone; the fleet's count equals its tenants' and its pieces', each tenant within its share",
  liveness:
    "C34 heal phase: every request and lifecycle task ends within bounded steps",
} as const;
export type InvariantName = keyof typeof INVARIANTS;

export type Violation = {
  name: InvariantName;
  contract: string;
  message: string;
};

/** Records one check of an invariant; `message` is built only on failure. */
export type Check = (
  ok: boolean,
  name: InvariantName,
  message: () => string,
) => void;
