/**
 * The dot products of semantic search: a query embedding (float64) with stored int8 vectors, in WebAssembly
 * SIMD (`dot.wat`). The scan of a week scores about 200,000 vectors a request; the scalar loop this replaces
 * spent most of a request there, and this one returns the very same numbers (`dot.wat` says why), so ranks,
 * ties and pages do not change.
 *
 * One module instance per thread, its memory shared by every caller: the query at the start, the block of
 * vectors after it (then the scores of `scoresOf`). Scoring is synchronous, so a caller's placement holds
 * until its scan returns. The memory grows to the largest slot scored and never shrinks: a slot holds at most
 * 100 vectors, so this is about 100 × (dimension + 8) bytes.
 */
import { DOT_WASM } from './dot-wasm.js';

interface DotExports {
  memory: WebAssembly.Memory;
  dot(query: number, vector: number, dims: number): number;
  scores(query: number, block: number, count: number, dims: number, out: number): void;
}

let kernel: DotExports | null = null;

function instance(): DotExports {
  // Compiled on first use: a process that never searches never pays for it.
  kernel ??= new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(DOT_WASM, 'base64'))).exports as unknown as DotExports;
  return kernel;
}

const PAGE = 65_536;

/** Places `query` and `block` in the module's memory; returns where the block starts. `extra`: bytes to keep free after it. */
function place(m: DotExports, query: Float64Array, block: Int8Array, extra: number): number {
  // The block starts on a 16-byte boundary after the query (aligned loads).
  const base = (query.byteLength + 15) & ~15;
  const need = base + block.byteLength + extra + 16;
  if (need > m.memory.buffer.byteLength) m.memory.grow(Math.ceil((need - m.memory.buffer.byteLength) / PAGE));
  const buffer = m.memory.buffer;
  new Float64Array(buffer, 0, query.length).set(query);
  new Int8Array(buffer, base, block.length).set(block);
  return base;
}

/**
 * Places `query` and `block` in the module's memory and returns the dot product of the query with the
 * `dims` components of the block from `at` (the caller keeps `at + dims` within the block and `dims` within
 * the query). Valid until the next call of `dotsWith` or `scoresOf`.
 */
export function dotsWith(query: Float64Array, block: Int8Array): (at: number, dims: number) => number {
  const m = instance();
  const base = place(m, query, block, 0);
  const dot = m.dot;
  return (at, dims) => dot(0, base + at, dims);
}

/**
 * The dot products of `query` with each of the `count` vectors of `query.length` components that `block`
 * holds one after the other (`count` × `query.length` ≤ the block's length), in one call: the same numbers as
 * `dotsWith`. The result is a view of the module's memory, valid until the next call of `dotsWith` or `scoresOf`.
 */
export function scoresOf(query: Float64Array, block: Int8Array, count: number): Float64Array {
  const m = instance();
  const base = place(m, query, block, count * 8);
  const out = (base + block.byteLength + 7) & ~7;
  m.scores(0, base, count, query.length, out);
  return new Float64Array(m.memory.buffer, out, count);
}
