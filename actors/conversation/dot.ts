/**
 * The dot products of semantic search: a query embedding (float64) with stored int8 vectors, in WebAssembly
 * SIMD (`dot.wat`). The scan of a week scores about 200,000 vectors a request; the scalar loop this replaces
 * spent most of a request there, and this one returns the very same numbers (`dot.wat` says why), so ranks,
 * ties and pages do not change.
 *
 * One module instance per thread, its memory shared by every caller: the query at the start, the block of
 * vectors after it. Scoring is synchronous, so a caller's placement holds until its scan returns.
 */
import { DOT_WASM } from './dot-wasm.js';

interface DotExports {
  memory: WebAssembly.Memory;
  dot(query: number, vector: number, dims: number): number;
}

let kernel: DotExports | null = null;

function instance(): DotExports {
  // Compiled on first use: a process that never searches never pays for it.
  kernel ??= new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(DOT_WASM, 'base64'))).exports as unknown as DotExports;
  return kernel;
}

const PAGE = 65_536;

/**
 * Places `query` and `block` in the module's memory and returns the dot product of the query with the
 * `dims` components of the block from `at` (the caller keeps `at + dims` within the block and `dims` within
 * the query). Valid until the next call of `dotsWith`.
 */
export function dotsWith(query: Float64Array, block: Int8Array): (at: number, dims: number) => number {
  const m = instance();
  // The block starts on a 16-byte boundary after the query (aligned loads).
  const base = (query.byteLength + 15) & ~15;
  const need = base + block.byteLength;
  if (need > m.memory.buffer.byteLength) m.memory.grow(Math.ceil((need - m.memory.buffer.byteLength) / PAGE));
  const buffer = m.memory.buffer;
  new Float64Array(buffer, 0, query.length).set(query);
  new Int8Array(buffer, base, block.length).set(block);
  const dot = m.dot;
  return (at, dims) => dot(0, base + at, dims);
}
