/**
 * A platform for one test file whose tests read the conversation records straight from its store (what the
 * Conversations API serves, without its views): started with the file's settings before its tests, stopped and
 * its data directory removed after them.
 */
import { conversationRecords } from '../../actors/conversation/record.js';
import { removeDir, startPlatformWithStore, type Platform } from './platform.js';

export interface RecordsPlatform {
  p: Platform;
  records: ReturnType<typeof conversationRecords>;
}

/** Starts the platform with `env` in `t.before` of the file's root `t` and tears it down with it. */
export async function recordsPlatform(t: { teardown(fn: () => unknown): void }, env: Record<string, string>): Promise<RecordsPlatform> {
  const started = await startPlatformWithStore({ env });
  t.teardown(async () => {
    await started.store.close();
    await started.p.stop();
    removeDir(started.p.dataDir);
  });
  return { p: started.p, records: conversationRecords(started.store) };
}
