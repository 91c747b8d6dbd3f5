/**
 * The conversations projector against a real LMDB store: the record folded from journal entries, entries
 * applied again (a runner resuming from its checkpoint) changing nothing, and a rebuild (reset, then the
 * whole journal again) giving the same read models as the entries applied one by one.
 */
import t from 'tap';
import { join } from 'node:path';
import type { JournalEntry, Store } from '../store/mod.js';
import { conversationsProjector } from '../actors/conversation/projectors/conversations.js';
import { foldRecord } from '../actors/conversation/projectors/record-fold.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { conversationV3 } from '../actors/conversation/view.js';
import { conversationDocuments } from '../actors/conversation/document.js';
import { conversationMarks, MAX_MARKED_VALUES, projectedMarksOf } from '../actors/conversation/marks.js';
import { markedValues } from '../actors/recording/marks.js';
import { conversationHours, conversationSpans, conversationTerms, conversationVectorBuckets, conversationVectors } from '../actors/conversation/search.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import { ProjectionStatus } from '../actors/projection/status.js';
import { ProjectionRunner } from '../actors/projection/runner.js';
import { Skipped } from '../actors/projection/skipped.js';
import type { TurnRecord } from '../machines/conversation.js';
import { storeFor } from './helpers/store.js';

const store = await storeFor(t, 'sb-convproj-');
const projector = conversationsProjector({ embedder: createOfflineEmbedder() });
const owner = { account_id: 'acc', project_id: 'proj' };
const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const turn = (k: number, user: string, agent: string, o: Partial<TurnRecord> = {}): TurnRecord => ({
  user_input: user, user_input_dtmf: '', user_input_datetime: iso(T0 + k * 10_000), barge_in: false, agent_response: agent,
  agent_response_datetime: iso(T0 + k * 10_000 + 500), latency: 0.5, translated_user_input: '', english_agent_response: '',
  intents: [], entities: {}, is_ood: false, is_silence: false, metadata: {}, ...o,
});
const changed = (o: Record<string, unknown> = {}) => ({
  type: 'conversation.changed',
  data: {
    ...owner, state: { n: 1 }, variant_id: 'v1', variant_name: 'London', artifact_version: 'a1', handoff: null, num_ood: 0, function_errors: 0,
    integration_attributes: {}, asr_lang_code: 'en', tts_lang_code: 'en', end_reason: '', awaiting_external_event: null, bridge_ended: null, ...o,
  },
});
let seq = 0;
const entry = (id: string, version: number, events: Array<{ type: string; data: Record<string, unknown> }>): JournalEntry =>
  ({ seq: ++seq, key: `conversation/${id}`, kind: 'conversation', id, shard: 0, version, at: T0 + version * 10_000, value: 'idle', events });
const turnEvent = (tr: TurnRecord) => ({ type: 'conversation.turn', data: { ...owner, channel: 'CHAT', turn: tr, latency_ms: 500, function_errors: 0 } });

/** A conversation's entries: started with its greeting, `turns` exchanges, then (if `ended`) its end. */
function conversation(id: string, start: number, turns: string[], ended: boolean): JournalEntry[] {
  const out = [entry(id, 1, [
    { type: 'conversation.started', data: { ...owner, channel: 'CHAT', environment: 'live', variant_id: 'v1', from_number: '', to_number: '', started_at: iso(start), state: { from_: '', to: '', conversation_id: id } } },
    turnEvent(turn(0, '', 'Hello')), changed(), { type: 'conversation.answered', data: { ...owner, response: 'Hello', end: false, handoff: null } },
  ])];
  turns.forEach((text, k) => out.push(entry(id, k + 2, [turnEvent(turn(k + 1, text, `about ${text}`)), changed({ num_ood: k })])));
  // A step that recorded nothing (a delivery that found no live channel).
  out.push(entry(id, turns.length + 2, []));
  if (ended) out.push(entry(id, turns.length + 3, [changed({ end_reason: 'closed', state: { from_: '', to: '', conversation_id: id, n: 2 }, num_ood: turns.length - 1 }), { type: 'conversation.ended', data: { ...owner, channel: 'CHAT', ended_at: iso(T0 + 60_000), reason: 'closed', crashed: false } }]));
  return out;
}

t.test('the record folded from the entries: turns, changed fields, derived fields, the end; an entry folded twice changes nothing', async (t) => {
  const entries = conversation('c-fold', T0, ['opening hours', 'parking'], true);
  let r = null;
  for (const e of entries) r = foldRecord(r, 'c-fold', e);
  t.match(r, {
    id: 'c-fold', ...owner, channel: 'CHAT', environment: 'live', variant_id: 'v1', variant_name: 'London', artifact_version: 'a1',
    started_at: iso(T0), ended_at: iso(T0 + 60_000), in_progress: false, num_turns: 3, total_duration: 60, polyai_duration: 60,
    num_ood: 1, end_reason: 'closed', state: { from_: '', to: '', conversation_id: 'c-fold', n: 2 }, snapshot_version: 5,
    metrics: { CALL_DURATION: '60' },
  });
  t.same(conversationV3(r!, { version: 'v3', showTranscripts: false, includeLatency: false }).metrics, { CALL_DURATION: '60', CALL_TURN: [iso(T0), iso(T0 + 10_000), iso(T0 + 20_000)] }, 'CALL_TURN rendered from the turns, transcripts shown or not');
  t.same(r!.turns.map((x) => x.user_input), ['', 'opening hours', 'parking']);
  const again = foldRecord(r, 'c-fold', entries[1]);
  t.equal(again!.turns.length, 3, 'an older entry again: skipped');
  t.equal(foldRecord(null, 'c-never', entry('c-never', 1, [changed()])), null, 'no record without a start');
});

t.test("the record's state is the conversation's own, built-in keys included", async (t) => {
  const callStart = { ...owner, channel: 'VOICE-SIP', environment: 'live', variant_id: null, from_number: '+15550001111', to_number: '+14155550123', call_sid: 'IN-1', started_at: iso(T0) };
  const builtins = { from_: '+15550001111', to: '+14155550123', conversation_id: 'c-state', call_sid: 'IN-1' };
  // A function changed `to` and deleted `call_sid`: the record shows what it left.
  const now = [
    entry('c-state', 1, [{ type: 'conversation.started', data: { ...callStart, state: builtins } }, changed({ state: builtins })]),
    entry('c-state', 2, [changed({ state: { from_: '+15550001111', to: 'desk', conversation_id: 'c-state', n: 1 } })]),
  ];
  let r = foldRecord(null, 'c-state', now[0]);
  t.same(r!.state, builtins, 'at the start: the state the conversation started with');
  r = foldRecord(r, 'c-state', now[1]);
  t.same(r!.state, { from_: '+15550001111', to: 'desk', conversation_id: 'c-state', n: 1 }, 'a deleted key stays deleted, a changed one changed');
});

t.test('a step of a long conversation stores nothing more than a short one does: only the turns grow with it', async (t) => {
  const texts = Array.from({ length: 60 }, (_, k) => `question ${k}`);
  const entries = conversation('c-long', T0, texts, false);
  entries.splice(-1, 1, entry('c-long', texts.length + 2, [turnEvent(turn(texts.length + 1, 'a silence', '', { is_silence: true })), changed()]));
  let r = null;
  for (const e of entries) r = foldRecord(r, 'c-long', e);
  const { turns, ...rest } = r!;
  t.equal(turns.length, 62);
  t.match(rest, { num_turns: 62, num_silences: 1, metrics: { CALL_DURATION: String((T0 + 61 * 10_000 + 500 - T0) / 1000) } }, 'counts kept as turns are appended');
  const outside = JSON.stringify(rest);
  // The opening turn's time is the start's too.
  t.notOk(turns.slice(1).some((x) => outside.includes(x.user_input_datetime)), 'no turn time is kept outside the turns (a step would rewrite it)');
  t.same(conversationV3(r!, { version: 'v3', showTranscripts: true, includeLatency: false }).metrics.CALL_TURN, turns.map((x) => x.user_input_datetime));
});

const collections = (s: Store) => [
  conversationRecords(s), conversationDocuments(s), conversationVectors(s), conversationTerms(s), conversationHours(s), conversationSpans(s), conversationVectorBuckets(s),
  conversationMarks(s),
];
/** Everything the projector wrote, comparable (updated_at and slot revisions aside: they count writes). */
const dump = async (of: Store = store) => {
  const out: unknown[] = [];
  for (const c of collections(of)) {
    const docs = (await c.find({})).map((d: any) => {
      // An hour's tokens of its slots are random at each write: compared as present or not.
      const { rev: _r, updated_at: _u, ...rest } = d;
      return {
        ...rest,
        ...(rest.json ? { json: Buffer.from(rest.json).toString() } : {}),
        ...(rest.block ? { block: Buffer.from(rest.block).toString('base64') } : {}),
        ...(rest.vectors !== undefined ? { vectors: typeof rest.vectors } : {}),
        ...(rest.spans !== undefined ? { spans: typeof rest.spans } : {}),
      };
    });
    out.push(docs.sort((a: any, b: any) => (a.id < b.id ? -1 : 1)));
  }
  // Slot entries are kept in write order: compare them as sets.
  const spans = out[5] as Array<{ entries: string }>;
  for (const s of spans) s.entries = s.entries.split('\u0001').sort().join('\u0001');
  return out;
};

t.test('entries applied one by one, again after a crash, and a rebuild from the journal give the same read models', async (t) => {
  const journal = [
    ...conversation('c1', T0, ['opening hours on monday', 'parking near the store'], true),
    ...conversation('c2', T0 + 1000, ['refund for my order'], false),
    ...conversation('c3', T0 + 3_600_000, ['invoice amount wrong', 'speak to a manager', 'thanks'], true),
  ].sort((a, b) => a.version - b.version || a.seq - b.seq);
  journal.forEach((e, i) => (e.seq = i + 1));
  // Values functions marked personal, in the steps of the turns that said them (a value marked twice is kept
  // once), and in a step that recorded nothing else.
  const mark = (id: string, version: number, values: string[]) =>
    journal.find((e) => e.id === id && e.version === version)!.events.push({ type: 'conversation.pii_marked', data: { ...owner, values } });
  mark('c1', 2, ['monday']);
  mark('c3', 2, ['invoice', 'amount']);
  mark('c3', 3, ['manager', 'invoice']);
  mark('c2', 3, ['order']);
  for (const e of journal) await projector.apply([e], store);
  const live = await dump();
  t.same(Object.fromEntries(await projectedMarksOf(store, ['c1', 'c2', 'c3'])), { c1: ['monday'], c2: ['order'], c3: ['invoice', 'amount', 'manager'] }, 'the marked values, once each, in order');
  t.equal((live[0] as unknown[]).length, 3, 'three records');
  t.equal((live[1] as unknown[]).length, 2, 'two documents (the ended conversations)');
  t.ok((live[3] as unknown[]).length > 10, 'postings');
  t.equal((await conversationRecords(store).get('c3'))!.num_turns, 4);

  // A runner that crashed before storing its checkpoint sees the last batches again.
  await projector.apply(journal.slice(-6), store);
  await projector.apply(journal, store);
  t.same(await dump(), live, 'applied again: nothing changes');

  // The rebuild's reset runs elsewhere (the admin API's thread), with another instance of the projector.
  const marks = await conversationMarks(store).find({});
  await conversationsProjector({ embedder: createOfflineEmbedder() }).reset(store);
  for (const c of collections(store).slice(0, -1)) t.equal((await c.find({})).length, 0, 'reset drops what it wrote');
  t.same(await conversationMarks(store).find({}), marks, 'but the marks: kept, so a turn written while it resets reads masked');
  for (let i = 0; i < journal.length; i += 4) await projector.apply(journal.slice(i, i + 4), store);
  t.same(await dump(), live, 'rebuilt from the journal in batches: the same records, documents, postings, vectors, hours and slots');
});

t.test('a projector with nothing of a live conversation in memory (restarted, or past its cache) inserts no posting that is stored already', async (t) => {
  const first = conversation('c-resumed', T0, ['opening hours on monday', 'parking near the store'], false).slice(0, 3);
  await conversationsProjector({ embedder: createOfflineEmbedder() }).apply(first, store);
  const terms = conversationTerms(store);
  const before = (await terms.find({ conversation_id: 'c-resumed' })).length;
  // Another instance: its caches are empty, so it analyses the whole transcript again at the next turn.
  const restarted = conversationsProjector({ embedder: createOfflineEmbedder() });
  const insert = terms.insert.bind(terms);
  let inserts = 0;
  let duplicates = 0;
  terms.insert = async (doc) => {
    inserts++;
    return insert(doc).catch((err) => {
      duplicates++;
      throw err;
    });
  };
  try {
    await restarted.apply([entry('c-resumed', 4, [turnEvent(turn(3, 'a refund please', 'about a refund')), changed()])], store);
  } finally {
    terms.insert = insert;
  }
  t.equal(duplicates, 0, 'no insert that finds its posting stored (each would make the group commit run its batch again)');
  const after = await terms.find({ conversation_id: 'c-resumed' });
  t.equal(inserts, after.length - before, 'only the new terms are inserted');
  t.ok(after.some((p) => p.term === 'u:refund'), 'the new turn is posted');
  t.equal((await conversationRecords(store).get('c-resumed'))!.num_turns, 4);
});

t.test('a batch that writes its turns while a rebuild resets the projector: the turns read masked', async (t) => {
  // The interleaving the admin API's rebuild can meet: a runner has written a batch's marks and is about to
  // write its records when the reset (another thread, another instance of the projector) drops what it wrote.
  const entries = conversation('c-race', T0, ['my card is 4111'], false).slice(0, 2);
  entries[1].events.push({ type: 'conversation.pii_marked', data: { ...owner, values: ['4111'] } });
  const records = conversationRecords(store);
  const putNewer = records.putNewer.bind(records);
  let reset: Promise<void> | null = null;
  records.putNewer = async (doc, field) => {
    reset ??= conversationsProjector({ embedder: createOfflineEmbedder() }).reset(store);
    await reset;
    return putNewer(doc, field);
  };
  try {
    await projector.apply(entries, store);
  } finally {
    records.putNewer = putNewer;
  }
  t.ok(reset, 'the reset ran between the marks and the record');
  t.equal((await records.get('c-race'))!.num_turns, 2, 'the record written after the reset');
  t.same((await projectedMarksOf(store, ['c-race'])).get('c-race'), ['4111'], 'its marks still there to mask it');
});

t.test('a rebuild asked for while the runner\'s thread writes a batch: the replay gives the read models of a replay from empty', async (t) => {
  // The audit's interleaving (switchboard rebuild conversations under Chat API traffic): the runner (its own
  // thread, its own instance of the projector) is applying a batch that ends conversations when the admin API
  // (the edge thread, another instance) asks for the rebuild. A reset made there and then dropped the batch's
  // document and postings, already written, and not its record, written after: the replay found that record
  // at its version and skipped the conversation, so it stayed out of search and of the v2/v3 pages for good.
  const live = await storeFor(t, 'sb-convrace-');
  const journal = [
    ...conversation('r1', T0, ['opening hours on monday', 'parking near the store'], true),
    ...conversation('r2', T0 + 1000, ['refund for my order', 'the parcel never came'], true),
    ...conversation('r3', T0 + 2000, ['invoice amount wrong'], false),
  ].sort((a, b) => a.version - b.version || a.seq - b.seq);
  const append = (e: JournalEntry) => live.journal.append({ key: e.key, kind: e.kind, id: e.id, shard: 0, version: e.version, at: e.at, value: e.value, events: e.events });
  // Started and first turns projected before the rebuild; the rest (second turns, ends) in the batch it meets.
  const early = journal.filter((e) => e.version <= 2);
  for (const e of early) await append(e);
  const worker = conversationsProjector({ embedder: createOfflineEmbedder() });
  const runner = new ProjectionRunner({ store: live, projectors: [worker], partitions: 4, owned: () => [0, 1, 2, 3], batch: 1000, runnerId: 'rt', pollMs: 1000, waitForWork: async () => undefined });
  await runner.cycle();
  for (const e of journal.filter((x) => x.version > 2)) await append(e);
  const edge = conversationsProjector({ embedder: createOfflineEmbedder() });
  const status = new ProjectionStatus(live, [edge], 4);
  const records = conversationRecords(live);
  const putNewer = records.putNewer.bind(records);
  let rebuilt: Promise<unknown> | null = null;
  records.putNewer = async (doc, field) => {
    // The first record of the batch: its document and postings are written (or on their way), the record not yet.
    rebuilt ??= status.rebuild(edge);
    await rebuilt;
    return putNewer(doc, field);
  };
  try {
    await runner.cycle();
  } finally {
    records.putNewer = putNewer;
  }
  t.ok(rebuilt, 'the rebuild was asked for in the middle of the batch');
  for (let i = 0; i < 5 && (await runner.cycle()) > 0; i++);
  t.match(await status.all(), [{ checkpoint: await live.journal.head(), behind: 0, epoch: 1 }], 'caught up in the new epoch');
  // The same journal replayed into an empty store by a projector on a quiet system.
  const quiet = await storeFor(t, 'sb-convquiet-');
  await conversationsProjector({ embedder: createOfflineEmbedder() }).apply(await live.journal.read(0, 1000), quiet);
  const want = await dump(quiet);
  t.same(await dump(live), want, 'the same records, documents, postings, summaries, hours and slots');
  const terms = conversationTerms(live);
  for (const id of ['r1', 'r2', 'r3']) t.ok((await terms.find({ conversation_id: id })).length > 0, `${id} has its postings (transcript search)`);
  t.same((await conversationDocuments(live).find({})).map((d) => d.id).sort(), ['r1', 'r2'], 'both ended conversations have their document (the v2/v3 pages)');
});

t.test('past MAX_MARKED_VALUES values, the projection and the journal give the same first values to mask and mute', async (t) => {
  const values = Array.from({ length: MAX_MARKED_VALUES + 40 }, (_, i) => `value-${i}`);
  const entries = conversation('c-many', T0, ['hello'], false).slice(0, 2);
  // 32 values a call (the sandbox's bound), one call per step, some marked again.
  for (let i = 0; i < values.length; i += 32) {
    const step = entry('c-many', 3 + i / 32, [{ type: 'conversation.pii_marked', data: { ...owner, values: [...values.slice(i, i + 32), values[0]] } }]);
    entries.push(step);
  }
  await projector.apply(entries, store);
  for (const e of entries) await store.journal.append({ key: e.key, kind: e.kind, id: e.id, shard: -1, version: 0, value: null, events: e.events });
  const projected = (await projectedMarksOf(store, ['c-many'])).get('c-many');
  t.same(projected, values.slice(0, MAX_MARKED_VALUES), 'the projection: the first values marked, once each, in order');
  t.same(await markedValues(store, 'c-many'), projected, 'the journal read of the recordings: the same');
});

t.test('a batch that fails while indexing a turn is retried: the turn\'s postings and summary are written, nothing set aside', async (t) => {
  // The audit's case: a turn's analysis overflowed the stack in the projection thread ("projection cycle failed;
  // retrying"), its record was written all the same, and the retry found the record at its version and skipped
  // the conversation: the turn's postings and summary were never written. Two faults, each on the first time
  // through, with the real runner: a posting's write failing, and a throw in the middle of the indexing (the
  // embedder's, as the stemmer's was).
  const faults = {
    // A known live conversation's turn: the indexer's cache has marked the turn's terms posted.
    posting: { id: 'f-write', ended: false },
    // The turn and the end in one batch: the final summary, vector and slot entry are due.
    analysis: { id: 'f-throw', ended: true },
  };
  for (const [fault, { id, ended }] of Object.entries(faults)) {
    const live = await storeFor(t, 'sb-convretry-');
    const all = conversation(id, T0, ['opening hours on monday', 'zebra crossing near the store'], ended).filter((e) => e.events.length > 0);
    const append = (e: JournalEntry) => live.journal.append({ key: e.key, kind: e.kind, id: e.id, shard: 0, version: e.version, at: e.at, value: e.value, events: e.events });
    let failNext = false;
    let met = 0;
    const offline = createOfflineEmbedder();
    const embedder = {
      model: offline.model,
      embed: (texts: string[]) => offline.embed(texts),
      fromTerms: (terms: string[]) => {
        if (fault === 'analysis' && failNext) {
          failNext = false;
          met++;
          throw new RangeError('Maximum call stack size exceeded');
        }
        return offline.fromTerms!(terms);
      },
    };
    const runner = new ProjectionRunner({
      store: live, projectors: [conversationsProjector({ embedder })], partitions: 4, owned: () => [0, 1, 2, 3], batch: 1000, runnerId: 'rt', pollMs: 1000,
      waitForWork: async () => undefined, backoffMs: () => 0,
    });
    // The start and the first turn, projected as usual.
    for (const e of all.filter((x) => x.version <= 2)) await append(e);
    await runner.cycle();
    for (const e of all.filter((x) => x.version > 2)) await append(e);
    const terms = conversationTerms(live);
    const insert = terms.insert.bind(terms);
    terms.insert = async (doc) => {
      if (fault === 'posting' && doc.term === 'u:zebra' && !failNext) {
        failNext = true;
        met++;
        throw new Error('injected: the write failed');
      }
      return insert(doc);
    };
    failNext = fault === 'analysis';
    try {
      t.equal(await runner.cycle(), all.filter((x) => x.version > 2).length, `${fault}: the cycle applies the batch (retried after the failure)`);
      t.equal(met, 1, `${fault}: the fault was met, once`);
    } finally {
      terms.insert = insert;
    }
    t.same(await new Skipped(live).records.find({}), [], `${fault}: nothing set aside: the failure was transient`);
    t.match(await new ProjectionStatus(live, [conversationsProjector({ embedder })], 4).all(), [{ name: 'conversations', skipped: 0, behind: 0 }]);
    t.ok(await terms.get(`${id}|u:zebra`), `${fault}: the turn's user terms are posted (transcript search finds it)`);
    t.ok(await terms.get(`${id}|a:zebra`), `${fault}: and its agent terms`);
    // Everything as a projector on a quiet system writes it from the same journal.
    const quiet = await storeFor(t, 'sb-convretry-quiet-');
    await conversationsProjector({ embedder: createOfflineEmbedder() }).apply(await live.journal.read(0, 1000), quiet);
    t.same(await dump(live), await dump(quiet), `${fault}: the same records, documents, postings, summaries, hours and slots as without the failure`);
  }
});
