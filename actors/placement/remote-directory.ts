import { decode, encode } from '../protocol.js';
import type { Subscription, Transport } from '../transport/types.js';
import type { WorkerDirectory, WorkerInfo } from './types.js';

/** Where the embedded worker answers for its directory (to the edge thread of its process). */
export const DIRECTORY_SUBJECT = 'sb.runtime.directory';

/** Answers `DIRECTORY_SUBJECT` with `directory`'s workers. */
export function serveDirectory(transport: Transport, directory: WorkerDirectory): Subscription {
  return transport.subscribe(DIRECTORY_SUBJECT, (_data, respond) => {
    directory.workers().then(
      (workers) => respond?.(encode(workers)),
      // No answer: the asker's health watch sees its timeout, as it would a worker that is gone.
      () => undefined,
    );
  });
}

/**
 * The directory of a worker reached over `transport` (`serveDirectory`): the embedded default's edge thread
 * lists its process's worker, and watches its health, through it. No worker answering is no worker.
 */
export function remoteDirectory(transport: Transport, timeoutMs: number): WorkerDirectory {
  return {
    workers: async (): Promise<WorkerInfo[]> => {
      try {
        return decode<WorkerInfo[]>(await transport.request(DIRECTORY_SUBJECT, new Uint8Array(0), timeoutMs));
      } catch (err) {
        if ((err as { code?: string }).code === 'NO_RESPONDERS') return [];
        throw err;
      }
    },
  };
}
