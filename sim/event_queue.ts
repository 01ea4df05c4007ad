// The discrete-event queue of the virtual clock: a binary min-heap ordered by
// (atMs, seq), where `seq` is an insertion counter that breaks ties explicitly
// (FoundationDB's timer queue; conventions §6, P3). The clock is the time of
// the item being processed: it jumps, it never sleeps.

type Entry<T> = { atMs: number; seq: number; item: T };

export class EventQueue<T> {
  #heap: Entry<T>[] = [];
  #seq = 0;

  get size(): number {
    return this.#heap.length;
  }

  push(atMs: number, item: T): void {
    const heap = this.#heap;
    heap.push({ atMs, seq: this.#seq++, item });
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(heap[i]!, heap[p]!)) break;
      [heap[i], heap[p]] = [heap[p]!, heap[i]!];
      i = p;
    }
  }

  peekAtMs(): number | null {
    return this.#heap[0]?.atMs ?? null;
  }

  pop(): { atMs: number; item: T } | null {
    const heap = this.#heap;
    const top = heap[0];
    if (top === undefined) return null;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && before(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && before(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return { atMs: top.atMs, item: top.item };
  }
}

function before<T>(a: Entry<T>, b: Entry<T>): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
}
