// The few events a request or response reports (issue 31), kept as plain
// listener lists: the door's objects need `on`/`once`/`off` as the routes
// used them on node:http, not an EventEmitter with its per-object machinery.

type Listener<A> = ((arg: A) => void) & { original?: (arg: A) => void };

/** Listener lists by event name (`M`: each event's argument); a `once` listener is removable by its original. */
export class Listeners<M extends Record<string, unknown>> {
  #lists: { [K in keyof M]?: Listener<M[K]>[] } = {};

  on<K extends keyof M>(event: K, fn: (arg: M[K]) => void): this {
    (this.#lists[event] ??= []).push(fn);
    return this;
  }

  once<K extends keyof M>(event: K, fn: (arg: M[K]) => void): this {
    const wrapped: Listener<M[K]> = (arg) => {
      this.off(event, wrapped);
      fn(arg);
    };
    wrapped.original = fn;
    return this.on(event, wrapped);
  }

  off<K extends keyof M>(event: K, fn: (arg: M[K]) => void): this {
    const list = this.#lists[event];
    if (list === undefined) return this;
    // A loop, not findIndex with a closure, and shifted in place, not
    // spliced (an array of what it removed): readBody removes three a
    // request (issue 31).
    for (let i = 0; i < list.length; i++) {
      const l = list[i]!;
      if (l !== fn && l.original !== fn) continue;
      for (let j = i + 1; j < list.length; j++) list[j - 1] = list[j]!;
      list.pop();
      break;
    }
    return this;
  }

  /** Whether anyone listens to `event`. */
  protected listening(event: keyof M): boolean {
    return (this.#lists[event]?.length ?? 0) > 0;
  }

  protected emit<K extends keyof M>(event: K, arg: M[K]): void {
    const list = this.#lists[event];
    if (list === undefined || list.length === 0) return;
    if (list.length === 1) return list[0]!(arg);
    for (const fn of list.slice()) fn(arg);
  }
}
