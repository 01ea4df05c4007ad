// Limits of the worker's link to the server: how big a frame from the server
// may be, and how long the link may stay silent before it counts as dead.

/** Requests carry whole prompt bodies; frames far beyond any body limit are refused. */
export const FRAME_CHARS_MAX = 64 * 1024 * 1024;

/**
 * The proxy pings every 15 s (C25, C43), so 90 s without any frame means the link
 * is dead even if TCP never said so (a rebooted host, a NAT that dropped the flow):
 * the worker cuts it and reconnects. 90 s is the original worker's idle timeout.
 */
export const IDLE_TIMEOUT_MS = 90_000;

/**
 * From a connect attempt to the proxy's `register_ack`. A proxy that accepts
 * the TCP connection (or the upgrade) and then never answers would otherwise
 * hold the worker forever: a relay instance that lost its cluster log left
 * such handshakes unanswered (issue 23). 15 s: longer than the proxy's own
 * 10 s register timeout (REGISTER_TIMEOUT_SECS), so a slow but working proxy
 * answers first.
 */
export const REGISTER_ACK_TIMEOUT_MS = 15_000;
