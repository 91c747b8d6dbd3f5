/**
 * The recordings projector's rule for a recording its media gateway never completed (it died mid-call): rendered
 * once its conversation ends idle (nothing feeds a conversation whose call's media is gone), never at another end
 * while it is incomplete (a live gateway is still writing its last chunks); the media gateways' sweep completes
 * one still incomplete long after such an end (`completeIfOrphaned`). Real LMDB store and blob store; the whole
 * path, a gateway killed mid-call, is `test/recordings.test.ts`'s.
 */
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBlobStore, type BlobStore } from '../store/blobs/mod.js';
import type { JournalEntry } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/mod.js';
import { audioOf, ORPHANED_AFTER_MS, recordingPrefix, recordingStartedEntry, type RecordingMeta } from '../actors/recording/mod.js';
import { recordingsProjector } from '../actors/recording/projector.js';
import { Recordings } from '../gateway/media/recordings/recordings.js';
import { storeFor } from './helpers/store.js';
import { removeDir } from './helpers/platform.js';

const store = await storeFor(t, 'sb-recproj-');
const blobsDir = mkdtempSync(join(tmpdir(), 'sb-recproj-blobs-'));
t.teardown(() => removeDir(blobsDir));
const blobs: BlobStore = await openBlobStore({ dataDir: blobsDir });
const projector = recordingsProjector(async () => blobs);
const owner = { account_id: 'acc', project_id: 'proj' };
const T0 = Date.parse('2026-03-02T10:00:00.000Z');
let seq = 0;

/** A call's conversation, ended, with a recording of a second per track whose meta says it is still being written. */
async function endedCall(id: string): Promise<string> {
  await conversationRecords(store).insert({ id, ...owner, channel: 'VOICE-SIP', in_progress: false, turns: [], snapshot_version: 3 } as never);
  const prefix = recordingPrefix(owner.account_id, owner.project_id, id);
  const meta: RecordingMeta = { conversation_id: id, ...owner, call_sid: `sid-${id}`, started_at: T0, ended_at: null, expires_at: T0 + 86_400_000 * 365 * 10 };
  await blobs.put(`${prefix}/meta`, Buffer.from(JSON.stringify(meta)));
  for (const track of ['caller', 'agent']) await blobs.putChunk(`${prefix}/${track}`, 0, Buffer.alloc(16_000, 1));
  return prefix;
}
const end = (id: string, reason: string, at: number): JournalEntry => ({
  seq: ++seq, key: `conversation/${id}`, kind: 'conversation', id, shard: 0, version: 3, at, value: 'ended',
  events: [{ type: 'conversation.ended', data: { ...owner, channel: 'VOICE-SIP', ended_at: new Date(at).toISOString(), reason, crashed: false } }],
});
const metaOf = async (prefix: string) => JSON.parse((await blobs.read(`${prefix}/meta`))!.toString()) as RecordingMeta;

t.test('an incomplete recording whose conversation ends idle: completed as written, and rendered', async (t) => {
  const prefix = await endedCall('c-idle');
  await projector.apply([end('c-idle', 'idle', T0 + 1_800_000)], store);
  t.equal((await metaOf(prefix)).ended_at, T0 + 1_800_000, 'complete: ended when its conversation did');
  t.same(JSON.parse((await blobs.read(`${prefix}/redactions`))!.toString()), [], 'rendered (nothing to mute)');
  t.equal((await blobs.read(`${prefix}/redacted-caller`))?.length, 16_000, 'the whole caller track');
});

for (const reason of ['closed', 'agent']) {
  t.test(`an incomplete recording whose conversation ends ${reason}: left to its gateway, which is still writing it`, async (t) => {
    const prefix = await endedCall(`c-${reason}`);
    await projector.apply([end(`c-${reason}`, reason, T0 + 60_000)], store);
    t.equal((await metaOf(prefix)).ended_at, null, 'not completed here');
    t.equal(await blobs.read(`${prefix}/redactions`), null, 'not rendered');
  });
}

t.test('an incomplete recording whose conversation ended otherwise, its gateway gone: completed by the orphan sweep, then rendered', async (t) => {
  const endedAt = T0 + 120_000;
  const prefix = await endedCall('c-orphan');
  const { seq: _seq, at: _at, ...ended } = end('c-orphan', 'agent', endedAt);
  await store.journal.append(ended);
  // Another call's recording, its conversation still going (no end journaled): never an orphan.
  const live = await endedCall('c-live');
  await store.journal.append({ key: 'conversation/c-live', kind: 'conversation', id: 'c-live', shard: 0, version: 1, value: 'active', events: [] });
  // A call's recording its gateway completed: left as it is.
  const done = await endedCall('c-done');
  await blobs.put(`${done}/meta`, Buffer.from(JSON.stringify({ ...(await metaOf(done)), ended_at: endedAt })));
  await store.journal.append(end('c-done', 'agent', endedAt));

  // As a media gateway's hourly sweep runs it.
  const logged: string[] = [];
  const gateway = new Recordings(blobs, { retentionDays: 30, chunkMs: 1000, log: (_level, msg) => logged.push(msg), journal: store.journal });
  t.same((await gateway.sweep(endedAt + ORPHANED_AFTER_MS - 1000)).completed, [], 'not while its gateway may still be writing it');
  t.equal((await metaOf(prefix)).ended_at, null);
  const head = await store.journal.head();
  t.same((await gateway.sweep(endedAt + ORPHANED_AFTER_MS + 1000)).completed, ['c-orphan'], 'completed once that time has passed');
  t.same(logged, ['completed a recording its gateway left incomplete'], 'and said so');
  t.equal((await metaOf(prefix)).ended_at, endedAt, 'ended when its conversation did');
  t.equal((await metaOf(live)).ended_at, null, 'a recording whose conversation goes on is left alone');
  t.equal((await metaOf(done)).ended_at, endedAt, 'a complete one is untouched');
  const appended = await store.journal.read(head, 10);
  t.match(appended, [{ key: 'recording/c-orphan', kind: 'recording', events: [{ type: 'recording.completed', data: { conversation_id: 'c-orphan', call_sid: 'sid-c-orphan', ended_at: endedAt } }] }], 'recording.completed journaled, once');
  t.equal(appended.length, 1);
  // What the projector then does with it, as with a completion its gateway journaled.
  await projector.apply(appended, store);
  t.same(JSON.parse((await blobs.read(`${prefix}/redactions`))!.toString()), [], 'rendered');
  t.same(await gateway.sweep(endedAt + ORPHANED_AFTER_MS + 2000), { removed: 0, completed: [] }, 'a second sweep finds nothing');
});

t.test('the catalog: a started recording is available on its row, with its spans once rendered; expired, another project\'s, or dropped by a reset, not', async (t) => {
  const id = 'c-catalog';
  const expires = T0 + 86_400_000;
  const audio = async (projectId: string, conversationId: string, now: number) =>
    (await audioOf(store, projectId, [conversationId], now)).get(conversationId) ?? { available: false };
  const started: JournalEntry = { seq: ++seq, at: T0, ...recordingStartedEntry({ conversation_id: id, ...owner, call_sid: `sid-${id}`, started_at: T0, expires_at: expires }) };
  t.same(await audio(owner.project_id, id, T0), { available: false }, 'nothing before its start is projected');
  await projector.apply([started], store);
  await projector.apply([started], store);
  t.same(await audio(owner.project_id, id, T0 + 1000), { available: true }, 'started: available, no spans yet (applied twice: the same)');
  t.same(await audio('other-project', id, T0 + 1000), { available: false }, 'not on another project\'s rows');
  t.same(await audio(owner.project_id, id, expires), { available: false }, 'expired: not available');
  // Its call ends: the rendering's spans are catalogued with it (also for a recording whose start was never journaled).
  await endedCall(id);
  await blobs.put(`${recordingPrefix(owner.account_id, owner.project_id, id)}/meta`, Buffer.from(JSON.stringify({ conversation_id: id, ...owner, call_sid: `sid-${id}`, started_at: T0, ended_at: T0 + 60_000, expires_at: expires } satisfies RecordingMeta)));
  await projector.apply([end(id, 'closed', T0 + 60_000)], store);
  t.same(await audio(owner.project_id, id, T0 + 120_000), { available: true, redactions: [] }, 'rendered: its spans on the row');
  t.same(await audio(owner.project_id, 'c-idle', T0 + 120_000), { available: true, redactions: [] }, 'a recording rendered without a journaled start is catalogued by its rendering');
  t.same([...(await audioOf(store, owner.project_id, [id, 'c-none', 'c-idle'], T0 + 120_000))].sort(), [['c-catalog', { available: true, redactions: [] }], ['c-idle', { available: true, redactions: [] }]], 'a page\'s call rows in one query: those without a recording absent');
  await projector.reset(store);
  t.same(await audio(owner.project_id, id, T0 + 120_000), { available: false }, 'a reset drops the catalog, which the replay fills again');
  await projector.apply([started], store);
  t.same(await audio(owner.project_id, id, T0 + 120_000), { available: true });
});
