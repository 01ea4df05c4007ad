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
