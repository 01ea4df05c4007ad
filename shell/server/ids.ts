// Ids are minted in the shell and arrive in events (the core never draws randomness).
export function newRequestId(): string {
  return `req-${crypto.randomUUID()}`;
}

export function newWorkerId(): string {
  return `w-${crypto.randomUUID().slice(0, 13)}`;
}
