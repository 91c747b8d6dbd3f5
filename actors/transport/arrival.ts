/**
 * What a transport calls when messages arrive from another thread or process, before their handlers run.
 * The runtime passes its store's `refresh`: the embedded store reads through one snapshot per thread until that
 * thread's next timers phase (lmdb-js), so without it a handler could read what stood before a write its sender
 * had committed, and answered, before it sent (a rotated webhook secret, a deployment, a revoked key).
 */
export type Arrived = () => void;

/**
 * `arrived` once per synchronous run of deliveries: nats.js hands every message of one socket read to its
 * callbacks in one loop, all of them sent before the first is handled, so one refresh covers them all.
 */
export function oncePerRun(arrived: Arrived): Arrived {
  let due = true;
  const again = () => {
    due = true;
  };
  return () => {
    if (!due) return;
    due = false;
    arrived();
    queueMicrotask(again);
  };
}
