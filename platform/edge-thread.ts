import { MessageChannel, Worker } from 'node:worker_threads';
import type { Runtime } from '../actors/mod.js';

/** What the main thread hands the edge thread (`edge-thread-main.ts`). */
export interface EdgeThreadData {
  /** The edge thread's end of the port its runtime reaches the main thread's actors over. */
  port: import('node:worker_threads').MessagePort;
  operatorTokenHash: string;
  /** Whether the process's stdout is a terminal (a thread's own stdout is not), for the log format. */
  isTTY: boolean;
}

/** What the edge thread tells the main thread. */
export type EdgeThreadMessage = { type: 'listening'; port: number } | { type: 'drained' };

export interface EdgeThread {
  /** The edge's HTTP port. */
  readonly port: number;
  /**
   * Tells the thread the process serves: its `/healthz` answers 200 from then on. It listens before the other
   * roles have started (a socket or SIP port taken still fails the start), and answers 503 meanwhile.
   */
  serve(): void;
  /** Stops serving (as a draining edge does), closes the thread's store and runtime, and ends the thread. */
  drain(): Promise<void>;
}

/**
 * The embedded default's edge: the Fastify edge in a worker thread of its own, so that HTTP parsing,
 * authentication, validation and rendering run on one core while the main thread runs the actors' steps and
 * commits on the other (docs/runtime.md, "The edge thread"). The thread opens the same store (LMDB allows
 * several threads of one process) and reaches the actors over a `MessagePort` served by the main thread's
 * in-process transport (`Runtime.servePort`); the tenancy caches of both threads are kept in step by the
 * invalidation bus over that port, and each thread's metrics are part of the other's scrape.
 *
 * A thread that fails after it started ends the process (`onFailure`): the process cannot serve without it.
 */
export async function startEdgeThread(o: { runtime: Runtime; operatorTokenHash: string; onFailure: (err: unknown) => void }): Promise<EdgeThread> {
  const { port1, port2 } = new MessageChannel();
  o.runtime.servePort(port1);
  const data: EdgeThreadData = { port: port2, operatorTokenHash: o.operatorTokenHash, isTTY: !!process.stdout.isTTY };
  const worker = new Worker(new URL('./edge-thread-main.js', import.meta.url), { workerData: data, transferList: [port2] });
  const port = await new Promise<number>((resolve, reject) => {
    const failed = (err: unknown) => reject(err instanceof Error ? err : new Error(`the edge thread exited (${String(err)}) before it served`));
    worker.once('error', failed);
    worker.once('exit', failed);
    worker.once('message', (m: EdgeThreadMessage) => {
      if (m.type !== 'listening') return;
      worker.off('error', failed);
      worker.off('exit', failed);
      resolve(m.port);
    });
  });
  let draining = false;
  worker.on('error', (err) => o.onFailure(err));
  worker.on('exit', (code) => {
    if (!draining) o.onFailure(new Error(`the edge thread exited with code ${code}`));
  });
  return {
    port,
    serve: () => worker.postMessage({ type: 'serve' }),
    drain: async () => {
      draining = true;
      const drained = new Promise<void>((resolve) => {
        worker.on('message', (m: EdgeThreadMessage) => m.type === 'drained' && resolve());
        worker.once('exit', () => resolve());
      });
      worker.postMessage({ type: 'drain' });
      await drained;
      await worker.terminate();
    },
  };
}
