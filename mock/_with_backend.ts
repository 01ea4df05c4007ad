// Test-only: a mock backend started with `opts` for the length of `fn`, closed
// after it whatever it throws.
import {
  type MockBackend,
  type MockBackendOptions,
  startMockBackend,
} from "./backend.ts";
import { withClosing } from "../shell/with_closing.ts";

export function withMockBackend(
  opts: MockBackendOptions,
  fn: (backend: MockBackend) => Promise<void>,
): Promise<void> {
  return withClosing(startMockBackend(opts), fn);
}
