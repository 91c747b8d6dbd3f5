/**
 * How long every benchmark row is loaded before it is measured, in seconds (`BENCH_WARMUP_S`; 0: none).
 *
 * The targets are about a platform that has been serving for a while. A fresh platform process is not one
 * yet: its hot paths run through thousands of functions (XState, Fastify, zod, msgpackr, lmdb, the
 * platform's own), and V8 keeps optimizing them, and optimizing again those it had to throw away, for tens
 * of seconds of full load. That work runs on V8's background threads, which share the machine's cores with
 * the threads being measured (`bench/README.md`, sixteenth session, has the counts and the CPU it took). Every row,
 * the baselines included, gets the same warm-up, so the ratios compare processes in the same state.
 */
export const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 40);
