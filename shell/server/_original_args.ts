// Test-only: the Rust original's server command line, as its systemd unit
// would hold it (issue 32), for the test that parses it (config_test.ts) and
// the one that starts a real server with it (e2e/migration_test.ts).

/** Every flag in the original's spelling; 0 is its "unlimited" and "no timeout". */
export function originalServerArgs(
  listen: string,
  secret: string,
  adminToken: string,
): string[] {
  return [
    "--listen",
    listen,
    "--provider",
    "local",
    "--worker-secret",
    secret,
    "--admin-token",
    adminToken,
    "--max-queue-len",
    "0",
    "--queue-timeout",
    "0",
    "--request-timeout",
    "0",
    "--require-api-keys",
  ];
}
