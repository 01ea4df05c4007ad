// Read buffers of one size kept between uses, for the next connection or turn
// that needs one (issue 31: a fresh zero-filled buffer per large read cost
// ~1.4 µs and its share of the collector). The door's large request reads and
// the WebSocket transport's large reads both use it. A buffer given back must
// be free: no read pending into it, no view of its bytes kept.

export type SpareBuffers = {
  /** A kept buffer, or a new one of the pool's size. */
  take(): Uint8Array;
  /** Keeps `buf` for a later `take`, unless `max` are kept already. */
  give(buf: Uint8Array): void;
};

export function spareBuffers(bytes: number, max: number): SpareBuffers {
  const kept: Uint8Array[] = [];
  return {
    take: () => kept.pop() ?? new Uint8Array(bytes),
    give: (buf) => {
      if (kept.length < max) kept.push(buf);
    },
  };
}
