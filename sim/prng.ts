// One small seeded integer generator (sfc32: 32-bit integer math only) with
// `fork()` deriving an independent child stream per subsystem (network, each
// worker, clients), the way TigerBeetle and quinn derive child seeds
// (conventions §6, P4). Probabilities are integer ratios, never floats.

/** A seed as text: a decimal integer (any size) or a 40-hex git SHA. */
export function parseSeed(text: string): bigint | null {
  const t = text.trim();
  if (/^[0-9]{1,40}$/.test(t)) return BigInt(t);
  if (/^[0-9a-fA-F]{40}$/.test(t)) return BigInt("0x" + t);
  return null;
}

const MASK64 = (1n << 64n) - 1n;

/** Folds any non-negative seed into 64 bits (xor of its 64-bit limbs). */
export function seed64(seed: bigint): bigint {
  let s = seed < 0n ? -seed : seed;
  let out = 0n;
  while (s > 0n) {
    out ^= s & MASK64;
    s >>= 64n;
  }
  return out;
}

export class Prng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  private constructor(a: number, b: number, c: number, d: number) {
    this.#a = a >>> 0;
    this.#b = b >>> 0;
    this.#c = c >>> 0;
    this.#d = d >>> 0;
    for (let i = 0; i < 12; i++) this.u32();
  }

  static fromSeed(seed: bigint): Prng {
    const s = seed64(seed);
    const lo = Number(s & 0xffff_ffffn);
    const hi = Number((s >> 32n) & 0xffff_ffffn);
    return new Prng(0x9e37_79b9, lo, hi, 1);
  }

  /** The next 32-bit unsigned integer. */
  u32(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t;
  }

  /** Uniform integer in [lo, hi] (inclusive); hi - lo below 2^32. */
  int(lo: number, hi: number): number {
    if (hi <= lo) return lo;
    const span = hi - lo + 1;
    // Rejection sampling keeps it unbiased.
    const limit = 0x1_0000_0000 - (0x1_0000_0000 % span);
    for (;;) {
      const x = this.u32();
      if (x < limit) return lo + (x % span);
    }
  }

  /** True with probability num/den. */
  chance(num: number, den: number): boolean {
    if (num <= 0) return false;
    if (num >= den) return true;
    return this.int(0, den - 1) < num;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("Cannot pick from an empty list");
    return items[this.int(0, items.length - 1)]!;
  }

  /** An independent child stream: the parent advances by four draws. */
  fork(): Prng {
    return new Prng(this.u32(), this.u32(), this.u32(), this.u32() | 1);
  }
}
