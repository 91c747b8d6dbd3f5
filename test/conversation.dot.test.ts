import fc from 'fast-check';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { DOT_WASM } from '../actors/conversation/dot-wasm.js';
import { dotsWith, scoresOf } from '../actors/conversation/dot.js';

/** The scalar loop `dot.wat` replaces: four lanes, lane k summing components i = k (mod 4), the rest in lane 0. */
function reference(query: Float64Array, block: Int8Array, at: number, dims: number): number {
  let d0 = 0;
  let d1 = 0;
  let d2 = 0;
  let d3 = 0;
  let i = 0;
  for (; i + 3 < dims; i += 4) {
    d0 += query[i] * block[at + i];
    d1 += query[i + 1] * block[at + i + 1];
    d2 += query[i + 2] * block[at + i + 2];
    d3 += query[i + 3] * block[at + i + 3];
  }
  for (; i < dims; i++) d0 += query[i] * block[at + i];
  return d0 + d1 + d2 + d3;
}

const root = fileURLToPath(new URL('../../', import.meta.url));

t.test('the embedded module is what dot.wat compiles to (node scripts/wasm.mjs)', async (t) => {
  const wasm = (await import(new URL('../../scripts/wasm.mjs', import.meta.url).href)) as {
    compile(path: string): Promise<Buffer>;
  };
  const compiled = await wasm.compile(`${root}actors/conversation/dot.wat`);
  t.equal(DOT_WASM, compiled.toString('base64'), 'dot-wasm.ts is stale: run node scripts/wasm.mjs');
});

t.test('the SIMD dot product returns the scalar loop\'s sums bit for bit', async (t) => {
  const doubles = fc.double({ min: -2, max: 2, noNaN: true });
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 300 }),
      fc.integer({ min: 0, max: 40 }),
      fc.array(doubles, { minLength: 300, maxLength: 300 }),
      fc.int8Array({ minLength: 400, maxLength: 400 }),
      (dims, at, q, bytes) => {
        const query = Float64Array.from(q.slice(0, dims));
        const block = bytes.slice(0, at + dims);
        const dot = dotsWith(query, block);
        return Object.is(dot(at, dims), reference(query, block, at, dims));
      },
    ),
    { numRuns: 2_000 },
  );
  t.pass('2,000 random queries, blocks, offsets and dimensions (0 to 300, unaligned)');
});

t.test('a whole block scored in one call: each vector\'s sum bit for bit', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 200 }),
      fc.integer({ min: 0, max: 12 }),
      fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: 200, maxLength: 200 }),
      fc.int8Array({ minLength: 2_400, maxLength: 2_400 }),
      (dims, count, q, bytes) => {
        const query = Float64Array.from(q.slice(0, dims));
        // One byte more than the vectors: a slot's block is scored as far as whole vectors go.
        const block = bytes.slice(0, count * dims + 1);
        const scores = Array.from(scoresOf(query, block, count));
        return scores.length === count && scores.every((s, v) => Object.is(s, reference(query, block, v * dims, dims)));
      },
    ),
    { numRuns: 1_000 },
  );
  t.pass('1,000 random blocks of 0 to 12 vectors of 1 to 200 components');
});

t.test('unit-scale queries with extreme components, every vector of a block', async (t) => {
  const query = new Float64Array(128).map((_, i) => (i % 7 === 0 ? -1 : Math.sin(i) / 11));
  const block = new Int8Array(100 * 128).map((_, i) => ((i * 37) % 256) - 128);
  const dot = dotsWith(query, block);
  for (let v = 0; v < 100; v++) if (!Object.is(dot(v * 128, 128), reference(query, block, v * 128, 128))) t.fail(`vector ${v}`);
  t.equal(dot(0, 128), reference(query, block, 0, 128));
});

t.test('a block larger than the memory grows it; a later small one still scores right', async (t) => {
  const query = new Float64Array(3072).map((_, i) => Math.cos(i) / 50);
  const big = new Int8Array(100 * 3072).map((_, i) => (i % 255) - 127);
  const dot = dotsWith(query, big);
  t.equal(dot(99 * 3072, 3072), reference(query, big, 99 * 3072, 3072), 'the last vector of a 300 KB block');
  t.equal(scoresOf(query, big, 100)[99], reference(query, big, 99 * 3072, 3072), 'and scored with the whole block');
  const small = Int8Array.from([1, -2, 3, -4, 5]);
  const q5 = Float64Array.from([0.5, 0.25, -1, 2, 0.125]);
  t.equal(dotsWith(q5, small)(0, 5), reference(q5, small, 0, 5));
});
