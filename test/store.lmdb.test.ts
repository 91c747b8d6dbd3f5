import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { Query } from 'mingo';
import t from 'tap';
import { closeEnv, openEnv } from '../store/lmdb/env.js';
import { LmdbJournal } from '../store/lmdb/journal.js';
import type { LmdbCollection } from '../store/lmdb/collection.js';
import { LmdbSnapshots } from '../store/lmdb/snapshots.js';
import { matcher } from '../store/lmdb/matcher.js';
import { hasFieldNames, isFieldName } from '../store/lmdb/shapes.js';
import { openLmdbStore } from '../store/lmdb/store.js';
import type { Store } from '../store/mod.js';
import { toolAvailable } from './helpers/tools.js';
import { plannerAgreement, storeContract } from './store.contract.js';

const dirs = new WeakMap<Store, string>();

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-store-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function makeStore(dataDir = tempDir()): Promise<Store> {
  const store = await openLmdbStore({ dataDir });
  dirs.set(store, dataDir);
  return store;
}

t.test('contract', (t) =>
  storeContract(
    t,
    () => makeStore(),
    (closed) => makeStore(dirs.get(closed)),
  ),
);

t.test('layout', async (t) => {
  const dataDir = path.join(tempDir(), 'nested', 'data');
  const store = await makeStore(dataDir);
  await store.collection({ name: 'c' }).insert({ id: 'x' });
  await store.collection({ name: 'rm', readModel: true }).insert({ id: 'y' });
  await store.close();
  t.ok(fs.existsSync(path.join(dataDir, 'store.mdb')), 'the main file in the created data directory');
  t.ok(fs.existsSync(path.join(dataDir, 'read-models.mdb')), 'and the read models\' file beside it');
  t.equal(store.backend, 'lmdb');
  const env = openEnv(dataDir);
  t.teardown(() => closeEnv(env));
  t.same(env.records.get(['c', 'x']), { id: 'x' }, 'a record is in store.mdb');
  t.equal(env.readModels.records.get(['c', 'x']), undefined);
  t.same(env.readModels.records.get(['rm', 'y']), { id: 'y' }, 'a read model is in read-models.mdb');
  t.equal(env.records.get(['rm', 'y']), undefined);
});

t.test('a read-model write does not wait for the main file\'s writer lock; a record write does', async (t) => {
  const dataDir = tempDir();
  const store = await makeStore(dataDir);
  t.teardown(() => store.close());
  // Declared first: declaring a new collection builds its catalog entry under the writer lock.
  const plain = store.collection({ name: 'plain' });
  const projected = store.collection({ name: 'projected', readModel: true });
  const holder = spawn(process.execPath, [path.join(import.meta.dirname, 'fixtures', 'writer-lock-holder.js'), dataDir], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => holder.on('exit', () => resolve()));
  t.teardown(() => holder.kill());
  await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve()));
  const order: string[] = [];
  const record = plain.insert({ id: 'a' }).then(() => order.push('record written'));
  await projected.insert({ id: 'b' });
  order.push('read model written');
  order.push('lock released');
  holder.stdin.end();
  await exited;
  await record;
  t.same(order, ['read model written', 'lock released', 'record written']);
});

t.test('otherProcesses names the live processes that have the files open: not this one, not one that ended', async (t) => {
  const dataDir = tempDir();
  const store = await makeStore(dataDir);
  t.teardown(() => store.close());
  await store.collection({ name: 'plain' }).get('x');
  await store.collection({ name: 'projected', readModel: true }).get('x');
  t.same(store.otherProcesses(), [], 'alone: none (its own reader slots are not counted)');
  const reader = spawn(process.execPath, [path.join(import.meta.dirname, 'fixtures', 'store-reader.js'), dataDir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => reader.on('exit', () => resolve()));
  t.teardown(() => reader.kill('SIGKILL'));
  await new Promise<void>((resolve) => reader.stdout.on('data', (d: Buffer) => d.toString().includes('read') && resolve()));
  t.same(store.otherProcesses(), [reader.pid], 'a process that has read from them');
  // Killed: it cannot release its slots, so they are found stale and cleared.
  reader.kill('SIGKILL');
  await exited;
  t.same(store.otherProcesses(), [], 'not once it has ended, however it ended');
});

t.test('a write that throws in a group commit fails alone: the others of its batch commit, seqs without a gap', async (t) => {
  const store = await makeStore();
  t.teardown(() => store.close());
  const c = store.collection<{ id: string; n?: number }>({ name: 'mixed' });
  await c.insert({ id: 'taken' });
  const head = await store.journal.head();
  const step = (n: number) => ({ value: 'idle', events: [{ type: 'counted', data: { n } }] });
  // Queued in one turn, so one batch: a duplicate among writes that succeed, a journal step before and after it.
  const outcomes = await Promise.allSettled([
    store.snapshots.putMany([{ key: 'k/1', data: new Uint8Array([1]), expectedVersion: 0, fence: 1, shard: 0, deadline: null, step: step(1) }]),
    c.insert({ id: 'first' }),
    c.insert({ id: 'taken', n: 2 }),
    store.journal.append({ key: 'k/2', kind: 'k', id: '2', shard: 0, version: 1, at: 1, value: null, events: [{ type: 'counted', data: { n: 2 } }] }),
    c.update({ id: 'first' }, { $set: { n: 3 } }),
  ]);
  t.same(outcomes.map((o) => o.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  t.equal((outcomes[2] as PromiseRejectedResult).reason?.name, 'StoreDuplicateError', 'the duplicate is refused');
  t.same(await c.get('taken'), { id: 'taken' }, 'the stored record is untouched');
  t.same(await c.get('first'), { id: 'first', n: 3 }, 'the writes after it in the batch committed, each once');
  const entries = await store.journal.read(head, 10);
  t.same(entries.map((e) => [e.seq, e.key]), [[head + 1, 'k/1'], [head + 2, 'k/2']], 'both journal entries, with consecutive seqs');
  t.equal(await store.journal.head(), head + 2);
  t.equal((await store.snapshots.get('k/1'))?.version, 1);
});

t.test('batches become durable in the order they were queued, also when one runs again after a write threw', async (t) => {
  const store = await makeStore();
  t.teardown(() => store.close());
  const c = store.collection<{ id: string; blob?: string }>({ name: 'ordered' });
  await c.insert({ id: 'taken' });
  const head = await store.journal.head();
  const entry = (id: string) => ({ key: `k/${id}`, kind: 'k', id, shard: 0, version: 1, at: 1, value: null, events: [] });
  const turn = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));
  // A large first batch keeps lmdb-js's writer busy flushing, so that the next two batches are queued behind it
  // and run in one transaction: the first of them rolls back (a duplicate) and runs again after the second ran.
  const blob = 'x'.repeat(1 << 20);
  const big = Promise.all(Array.from({ length: 24 }, (_, i) => c.insert({ id: `big-${i}`, blob })));
  await turn();
  const duplicate = c.insert({ id: 'taken' }).catch((err: Error) => err.name);
  const first = store.journal.append(entry('first'));
  await turn();
  const second = store.journal.append(entry('second'));
  await big;
  t.equal(await duplicate, 'StoreDuplicateError');
  await Promise.all([first, second]);
  const entries = await store.journal.read(head, 10);
  t.same(entries.map((e) => e.key), ['k/first', 'k/second'], 'the batch queued first is durable first: its seq is the lower');
});

t.test('writes of one key in one batch are judged in order, a chained one on what the one before left', async (t) => {
  const store = await makeStore();
  const w = (expectedVersion: number, chained: boolean, writer = 3) => ({
    key: 'k/chain', data: new Uint8Array([expectedVersion]), expectedVersion, fence: 1, shard: 0, deadline: null, writer, chained, step: { value: 'v', events: [] },
  });
  t.match(await store.snapshots.putMany([w(0, false), w(1, true), w(2, true)]), [{ ok: true, version: 1 }, { ok: true, version: 2 }, { ok: true, version: 3 }]);
  // Another writer's put gets in first: the first of the batch is refused, and so is every one chained behind it.
  t.match(await store.snapshots.putMany([w(3, false, 4), w(3, true), w(4, true)]), [{ ok: true, version: 4 }, { ok: false }, { ok: false }]);
  t.equal((await store.snapshots.get('k/chain'))?.version, 4);
  t.same((await store.journal.ofActor('k/chain')).map((e) => e.version), [1, 2, 3, 4]);
  await store.close();
});

t.test("a snapshot stepped several times in one batch has its data encoded and written once, the last step's; every step journaled", async (t) => {
  const dir = tempDir();
  const env = openEnv(dir);
  t.teardown(() => closeEnv(env));
  const snapshots = new LmdbSnapshots(env);
  const journal = new LmdbJournal(env);
  const written: unknown[] = [];
  // The real database, its puts seen on their way through.
  const putSync = env.snapshotData.putSync.bind(env.snapshotData);
  env.snapshotData.putSync = ((key: string, value: unknown) => (written.push([key, value]), putSync(key, value))) as typeof env.snapshotData.putSync;
  const w = (key: string, expectedVersion: number) => ({
    key, data: { step: expectedVersion + 1 }, expectedVersion, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [{ type: 'stepped', data: { n: expectedVersion + 1 } }] },
  });
  const head = await journal.head();
  // Queued in one turn, so one batch: three steps of k/a, one of k/b, in two puts as two actors' commits are.
  const [first, second] = await Promise.all([snapshots.putMany([w('k/a', 0), w('k/a', 1), w('k/b', 0)]), snapshots.putMany([w('k/a', 2)])]);
  t.match([...first, ...second], [{ ok: true, version: 1 }, { ok: true, version: 2 }, { ok: true, version: 1 }, { ok: true, version: 3 }]);
  t.same(written, [['k/b', { step: 1 }], ['k/a', { step: 3 }]], 'each key\'s data written once, in the order of its last step');
  t.same((await snapshots.get('k/a'))?.data, { step: 3 });
  t.equal((await snapshots.get('k/a'))?.version, 3);
  t.same((await journal.read(head, 10)).map((e) => [e.key, e.version]), [['k/a', 1], ['k/a', 2], ['k/b', 1], ['k/a', 3]], 'every step has its entry');
  // A later batch writes again.
  written.length = 0;
  await snapshots.putMany([w('k/a', 3)]);
  t.same(written, [['k/a', { step: 4 }]]);
  t.same((await snapshots.get('k/a'))?.data, { step: 4 });
});

t.test('a batch that runs again puts each snapshot\'s data with its own write: a value that cannot be stored fails its write alone', async (t) => {
  const dir = tempDir();
  const env = openEnv(dir);
  t.teardown(() => closeEnv(env));
  const snapshots = new LmdbSnapshots(env);
  const w = (key: string, expectedVersion: number, data: unknown) => ({ key, data, expectedVersion, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [] } });
  // msgpack cannot encode a value that is not data: the put made last throws, the batch runs again isolated.
  const outcomes = await Promise.allSettled([
    snapshots.putMany([w('k/a', 0, { n: 1 }), w('k/a', 1, { n: 2 })]),
    snapshots.putMany([w('k/bad', 0, { n: 10n ** 30n })]),
    snapshots.putMany([w('k/c', 0, { n: 3 })]),
  ]);
  t.same(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  t.same((await snapshots.get('k/a'))?.data, { n: 2 });
  t.equal((await snapshots.get('k/a'))?.version, 2);
  t.equal(await snapshots.get('k/bad'), null, 'the write whose data cannot be stored left nothing');
  t.same((await snapshots.get('k/c'))?.data, { n: 3 });
});

t.test('putLast outside a batch write is refused', async (t) => {
  const env = openEnv(tempDir());
  t.teardown(() => closeEnv(env));
  t.throws(() => env.putLast(env.snapshotData, 'k/x', 1), /inside a batch write only/);
});

t.test("a record's appended field is kept apart: a write that grows it stores only the items it adds", async (t) => {
  const dataDir = tempDir();
  const store = await makeStore(dataDir);
  const logs = store.collection({ name: 'logs', appended: 'items', readModel: true });
  const items: Array<{ k: number }> = [];
  for (let v = 1; v <= 12; v++) {
    items.push({ k: v });
    await logs.putNewer({ id: 'a', v, items: items.slice() }, 'v');
  }
  t.throws(() => store.collection({ name: 'bad', appended: 'items', indexes: [{ fields: ['items.k'] }] }), /no index may name its appended field/);
  await store.close();
  const env = openEnv(dataDir);
  t.teardown(() => closeEnv(env));
  t.same(env.readModels.records.get(['logs', 'a']), { id: 'a', v: 12, items: 12 }, 'the record holds the count');
  t.same(
    [...env.readModels.appended.getRange({ start: ['logs', 'a'], end: ['logs', 'a', Buffer.from([0xff])] })].map(({ key, value }) => [(key as unknown[])[2], value]),
    items.map((item, i) => [i, [item]]),
    'each write stored the one item it added, under its position, in order',
  );
});

t.test('stored objects share their shapes; a shape first written in a batch that rolled back is saved again', async (t) => {
  const dataDir = tempDir();
  let store = await makeStore(dataDir);
  const c = store.collection<{ id: string; [k: string]: unknown }>({ name: 'shapes' });
  await c.insert({ id: 'taken' });
  // One batch: a record of a shape never stored before, and a duplicate that rolls the first attempt back.
  const [fresh, dup] = await Promise.allSettled([c.insert({ id: 'novel', novel: { left: 1, right: 2 } }), c.insert({ id: 'taken' })]);
  t.equal(fresh.status, 'fulfilled');
  t.equal(dup.status, 'rejected');
  await c.insert({ id: 'novel-2', novel: { left: 3, right: 4 } });
  await store.close();
  store = await makeStore(dataDir);
  t.teardown(() => store.close());
  const again = store.collection<{ id: string; [k: string]: unknown }>({ name: 'shapes' });
  t.same(await again.get('novel'), { id: 'novel', novel: { left: 1, right: 2 } }, 'it decodes in a new process\'s handle');
  t.same(await again.get('novel-2'), { id: 'novel-2', novel: { left: 3, right: 4 } });
  // So does an actor's stored state, which the store encodes.
  const state = { s: { value: 'idle', context: { recentMessages: [{ role: 'user', text: 'hi' }] } }, a: [] };
  t.ok((await store.snapshots.put('k/shaped', state, { expectedVersion: 0, fence: 1, shard: 0, deadline: null })).ok);
  t.same((await store.snapshots.get('k/shaped'))?.data, state);
  // The raw bytes, through a handle opened after every write above (a handle's read view is its own).
  const env = openEnv(dataDir);
  t.teardown(() => closeEnv(env));
  const raw = env.records.getBinary(['shapes', 'novel-2']);
  t.ok(raw, 'the record is there');
  t.notOk(Buffer.from(raw!).includes(Buffer.from('right')), 'the value names its shape by id instead of spelling out its keys');
  const rawState = env.snapshotData.getBinary('k/shaped');
  t.ok(rawState, 'the snapshot is there');
  t.notOk(Buffer.from(rawState!).includes(Buffer.from('recentMessages')), 'a snapshot names its shapes by id too');
});

t.test('objects keyed by ids are stored as maps: they take no shapes, whatever their number', async (t) => {
  const dataDir = tempDir();
  const store = await makeStore(dataDir);
  t.teardown(() => store.close());
  const c = store.collection<{ id: string; [k: string]: unknown }>({ name: 'keyed' });
  const sessions = Array.from({ length: 600 }, (_, i) => ({
    id: `s${i}`,
    // A session's connections by id, a project's topics by id, a tenant's own keys: one key set each.
    connections: { [randomUUID()]: { gateway: 'g1', until: i } },
    topics: { [`topic_${i.toString(36).padStart(6, '0')}Xy9`]: { name: 'hours' } },
    state: { [`order-${i}`]: true, '12': 'twelve' },
  }));
  for (let i = 0; i < sessions.length; i += 100) await Promise.all(sessions.slice(i, i + 100).map((doc) => c.insert(doc)));
  const puts = await Promise.all(sessions.map((doc, i) => {
    const data = { s: { value: 'idle', context: { connections: doc.connections } }, a: [] };
    return store.snapshots.put(`session/${i}`, data, { expectedVersion: 0, fence: 1, shard: 0, deadline: null });
  }));
  t.ok(puts.every((p) => p.ok), 'the snapshots are stored');
  const back = await c.get('s599');
  t.same(back, sessions[599], 'read back equal');
  t.notOk(back!.connections instanceof Map, 'as plain objects, not Maps');
  t.same((await store.snapshots.get('session/17'))?.data, { s: { value: 'idle', context: { connections: sessions[17].connections } }, a: [] });
  const env = openEnv(dataDir);
  t.teardown(() => closeEnv(env));
  const shapes = (db: { get(key: never): unknown }) => (db.get(Symbol.for('structures') as never) as unknown[] | undefined)?.length ?? 0;
  t.ok(shapes(env.records) < 10, `the records' shapes stay few (${shapes(env.records)}), not one per key set`);
  t.ok(shapes(env.snapshotData) < 10, `so do the snapshots' (${shapes(env.snapshotData)})`);
});

t.test('field names and ids', async (t) => {
  for (const name of ['id', 's', 'user_agent', 'asrLangCode', 'CALL_DURATION', 'p99', '$set', 'english_agent_response']) t.ok(isFieldName(name), name);
  for (const id of ['', '0', '12', 'ses_0Vcd7nhpiPhg2mJ1ZiDL', 'topic_2vcYybnxCD4dWZkL', 'w-vm-8439-93c9a1', 'order-1', 'a.b', 'x'.repeat(41)]) t.notOk(isFieldName(id), JSON.stringify(id));
  fc.assert(fc.property(fc.uuid(), (id) => !isFieldName(id)));
  t.ok(hasFieldNames({}), 'an empty object is a record');
});

const needsStrace = toolAvailable('/usr/bin/strace', 'strace') ? {} : { skip: 'strace is not installed' };

t.test('each file flushes a commit before the meta page that makes it visible, and a batch resolves after both', needsStrace, async (t) => {
  // Watched from outside with strace: LMDB writes a commit's pages, then its meta page (128 bytes in the first
  // two pages of the file). With lmdb-js's overlapping sync the meta page went out before the flush, so a commit
  // was visible (to the projection runner, to other processes) before it was durable.
  const dataDir = tempDir();
  const trace = path.join(dataDir, 'trace');
  await promisify(execFile)('/usr/bin/strace', ['-f', '-y', '-o', trace, '-e', 'trace=pwrite64,fdatasync,fsync,write', process.execPath, path.join(import.meta.dirname, 'fixtures', 'commit-order.js'), dataDir]);
  const steps = fs.readFileSync(trace, 'utf8').split('\n').flatMap((line) => {
    const call = /(pwrite64|fdatasync|fsync|write)\(\d+<([^>]+)>(.*)/.exec(line);
    if (!call) return [];
    const [, name, file, rest] = call;
    if (name === 'write') {
      const said = /"resolved ([\w.-]+)/.exec(rest);
      return said ? [{ file: said[1], step: 'resolved' }] : [];
    }
    const base = path.basename(file);
    if (name !== 'pwrite64') return [{ file: base, step: 'flush' }];
    const at = /, (\d+), (\d+)(?:\)| <unfinished)/.exec(rest);
    return at ? [{ file: base, step: Number(at[2]) < 8192 && Number(at[1]) < 4096 ? 'meta' : 'pages' }] : [];
  });
  for (const file of ['store.mdb', 'read-models.mdb']) {
    const mine = steps.filter((s) => s.file === file).map((s) => s.step);
    t.ok(mine.includes('resolved'), `${file}: the batch resolved`);
    let unflushed = false;
    let early = 0;
    for (const step of mine) {
      if (step === 'pages') unflushed = true;
      if (step === 'flush') unflushed = false;
      if (step === 'meta' && unflushed) early++;
    }
    t.equal(early, 0, `${file}: no meta page written before the pages it points to are flushed`);
    const resolved = mine.indexOf('resolved');
    t.ok(mine.slice(0, resolved).lastIndexOf('meta') > mine.slice(0, resolved).lastIndexOf('pages'), `${file}: the batch resolved after its commit's meta page`);
  }
});

t.test('index ranges over awkward strings agree with a full scan', async (t) => {
  // Strings around the UTF-16 (mingo) versus UTF-8 (LMDB key) order difference, NUL (ordered-binary's
  // array delimiter) and long strings that share the prefix kept in index keys.
  const strings = [
    '',
    'a',
    'a\0',
    'a\0b',
    'ab',
    'b',
    'é',
    '\uE000',
    '\uFFFF',
    '\u{1F600}',
    '\u{1F600}x',
    'x'.repeat(150) + 'a',
    'x'.repeat(150) + 'b',
    'x'.repeat(99) + '\u{1F600}a',
    'x'.repeat(99) + '\uE000a',
  ];
  const store = await makeStore();
  t.teardown(() => store.close());
  // (k, c, a): `a` checked in the keys (no `c` in the records), cut strings included.
  const c = store.collection({ name: 'strings', indexes: [{ fields: ['a'] }, { fields: ['k', 'b'] }, { fields: ['k', 'c', 'a'] }] });
  const docs = strings.map((value, i) => ({ id: `s${String(i).padStart(2, '0')}`, a: value, k: 'k', b: value }));
  for (const doc of docs) await c.insert(doc);
  let mismatches = 0;
  for (const bound of strings) {
    for (const op of ['$eq', '$gt', '$gte', '$lt', '$lte']) {
      for (const filter of [{ a: { [op]: bound } }, { k: 'k', b: { [op]: bound } }, { a: { $in: [bound, 'b'] } }, { k: 'k', a: { [op]: bound } }]) {
        const expected = docs.filter((d) => new Query(filter).test(d)).map((d) => d.id);
        const got = (await c.find(filter)).map((d) => d.id);
        if (JSON.stringify(got) !== JSON.stringify(expected)) {
          mismatches++;
          t.same(got, expected, JSON.stringify(filter));
        }
      }
    }
  }
  t.equal(mismatches, 0, `${strings.length * 20} queries agree with mingo`);
});

t.test('conditions on a compound index\'s later fields are checked in its keys: only the records that pass them are read', async (t) => {
  // As semantic search reads the conversations that ended since its walk began: a day of them ended since,
  // a few started in the range asked.
  const store = await makeStore();
  t.teardown(() => store.close());
  const c = store.collection({ name: 'spans', indexes: [{ fields: ['p', 'started'] }, { fields: ['p', 'ended', 'started'] }] }) as LmdbCollection;
  const T = Date.parse('2026-01-01T00:00:00.000Z');
  const iso = (ms: number) => new Date(ms).toISOString();
  for (let i = 0; i < 300; i++) await c.insert({ id: `s${String(i).padStart(3, '0')}`, p: 'p', started: iso(T + i * 60_000), ended: iso(T + i * 60_000 + 30_000) });
  const records = c.env.records;
  const get = records.get;
  let reads = 0;
  records.get = function (this: typeof records, ...args: Parameters<typeof get>) {
    if ((args[0] as unknown[])[0] === 'spans') reads++;
    return get.apply(this, args);
  } as typeof get;
  t.teardown(() => {
    records.get = get;
  });
  const found = await c.find({ p: 'p', ended: { $gt: iso(T) }, started: { $gte: iso(T + 10 * 60_000), $lt: iso(T + 15 * 60_000) } });
  t.same(found.map((d) => d.id), ['s010', 's011', 's012', 's013', 's014'], 'the matches');
  t.equal(reads, 5, 'the records read are the matches, not the 299 that ended since');
});

t.test('planner agrees with a full scan on awkward strings', (t) =>
  plannerAgreement(
    t,
    async (t) => {
      const store = await makeStore();
      t.teardown(() => store.close());
      return store;
    },
    ['a', '\u{1F600}', '\uE000', '\uFFFF', 'a\0b', 'a\0', 'é'.repeat(120), 'é'.repeat(120) + 'x'],
    40,
  ),
);

t.test('invalid ids and keys are refused, not mis-stored', async (t) => {
  const store = await makeStore();
  t.teardown(() => store.close());
  const c = store.collection({ name: 'c' });
  await t.rejects(c.insert({ id: '' }), TypeError);
  await t.rejects(c.insert({ id: 'a\0b' }), TypeError);
  await t.rejects(c.insert({ id: 'x'.repeat(600) }), TypeError);
  t.equal(await c.get('a\0b'), null);
  t.same(await c.find({ id: 'a\0b' }), []);
  t.throws(() => store.collection({ name: 'c', indexes: [{ fields: ['k'] }] }), 'redeclaring with other indexes');
});

t.test('several processes on one data directory lose no update', async (t) => {
  const dataDir = tempDir();
  const worker = path.join(import.meta.dirname, 'fixtures', 'store-worker.js');
  const processes = 3;
  const rounds = 150;
  // The directory and the collection's index exist before any child opens it, and no child commits before all
  // have opened (the fixture waits for a line on stdin): see the fixture's comment.
  const setup = await makeStore(dataDir);
  setup.collection({ name: 'counters', indexes: [{ fields: ['kind'] }] });
  await setup.close();
  const children = Array.from({ length: processes }, (_, i) => {
    const child = spawn(process.execPath, [worker, dataDir, String(rounds), `w${i}`], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    // 'close': after the child's output has all been read.
    const done = new Promise<{ stdout: string }>((resolve, reject) => child.once('close', (code) => (code === 0 ? resolve({ stdout }) : reject(new Error(`worker w${i} exited with ${code}: ${stderr}`)))));
    const opened = new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (d) => {
        stderr += d;
        if (stderr.includes('open\n')) resolve();
      });
      done.then(() => reject(new Error(`worker w${i} ended before opening the store`)), reject);
    });
    return { child, opened, done };
  });
  await Promise.all(children.map((c) => c.opened));
  for (const c of children) c.child.stdin.end('go\n');
  const outputs = await Promise.all(children.map((c) => c.done));
  const observed = outputs.map(
    ({ stdout }) => JSON.parse(stdout) as { casVersions: number[]; incValues: number[]; inconsistent: number },
  );
  const total = processes * rounds;
  const everyCount = Array.from({ length: total }, (_, i) => i + 1);
  t.same(
    observed.flatMap((o) => o.casVersions).sort((a, b) => a - b),
    everyCount,
    'each snapshot version was won by exactly one put',
  );
  t.same(
    observed.flatMap((o) => o.incValues).sort((a, b) => a - b),
    everyCount,
    'each $inc result was seen by exactly one update',
  );
  t.ok(
    observed.every((o) => o.inconsistent === 0),
    'no process read a snapshot whose data disagreed with its version',
  );
  t.ok(
    observed.every((o) => o.incValues.every((v, i) => i === 0 || v > o.incValues[i - 1])),
    'each process saw the counter only grow',
  );
  const store = await makeStore(dataDir);
  t.teardown(() => store.close());
  const snapshot = await store.snapshots.get('counter');
  t.equal(snapshot?.version, total);
  t.same(snapshot?.data, { count: total });
  t.match(await store.collection({ name: 'counters', indexes: [{ fields: ['kind'] }] }).get('shared'), {
    n: total,
    kind: 'counter',
  });
  t.equal(
    (await store.snapshots.due([0], Date.now(), 10)).length,
    1,
    'the deadline index holds one entry per snapshot',
  );
});

t.test('compiled filters agree with mingo', async (t) => {
  const scalar = fc.oneof(fc.constantFrom('a', 'b', '', 'A', 'é'), fc.boolean(), fc.constantFrom(0, 1, -1, 1.5), fc.constant(null));
  const value = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.record({ x: scalar }));
  // Stored records decode as plain objects (fast-check's records have no prototype, which mingo cannot hash).
  const doc = fc.record({ id: fc.constant('d'), a: value, b: value, n: value }, { requiredKeys: ['id'] }).map((d) => JSON.parse(JSON.stringify(d)));
  const equalityFilter = fc.dictionary(fc.constantFrom('a', 'b', 'n', 'missing', 'a.x', 'toString'), fc.oneof(fc.constantFrom('a', 'b', ''), fc.boolean()), { maxKeys: 3 });
  const bound = fc.oneof(fc.constantFrom('a', 'b', '', 'A', 'é', 'aa'), fc.constantFrom(0, 1, -1, 1.5, -0));
  const operatorFilter = fc.oneof(
    fc.record({ a: fc.record({ $in: fc.array(scalar, { maxLength: 3 }) }) }),
    // `$in` of scalars beside equalities: the compiled set test.
    fc.record({ a: fc.record({ $in: fc.array(fc.oneof(fc.constantFrom('a', 'b', '', 'A', 'é'), fc.boolean(), fc.constantFrom(0, 1, -1, 1.5, -0)), { maxLength: 4 }) }), b: fc.constantFrom('a', 'b', true) }, { requiredKeys: ['a'] }),
    fc.record({ $or: fc.array(fc.record({ b: scalar }), { minLength: 1, maxLength: 2 }) }),
    fc.record({ n: fc.record({ $gte: fc.constantFrom(0, 1), $lt: fc.constantFrom(1, 2) }) }),
    // Ranges of strings or numbers, any of the four bounds, beside an equality: the compiled range test.
    fc.record(
      {
        a: fc.record(
          { $gt: bound, $gte: bound, $lt: bound, $lte: bound },
          { requiredKeys: [] },
        ),
        b: fc.constantFrom('a', 'b', true),
      },
      { requiredKeys: ['a'] },
    ),
    fc.record({ a: scalar, b: fc.record({ $ne: scalar }) }),
    fc.record({ $expr: fc.constant({ $eq: ['$a', '$b'] }) }),
  );
  // fc.assert throws with the shrunk counterexample on the first disagreement.
  fc.assert(
    fc.property(doc, fc.oneof(equalityFilter, operatorFilter), (d, filter) => matcher(filter)(d) === new Query(filter).test(d)),
    { numRuns: 4000 },
  );
  t.pass('4,000 random documents and filters');
});

t.test('an actor\'s journal chain: continued after its snapshot is deleted and written again, and by entries appended under its key', async (t) => {
  const store = await makeStore();
  const w = (expectedVersion: number) => ({ key: 'k/again', data: new Uint8Array([expectedVersion]), expectedVersion, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [] } });
  await store.snapshots.putMany([w(0), w(1)]);
  const appended = await store.journal.append({ key: 'k/again', kind: 'k', id: 'again', shard: -1, version: 0, value: null, events: [] });
  await store.snapshots.putMany([w(2)]);
  t.equal((await store.snapshots.get('k/again'))?.version, 3, 'an appended entry leaves the snapshot as it was');
  t.same((await store.journal.ofActor('k/again', { afterVersion: 1 })).map((e) => e.version), [2, 3], 'past an appended entry to the versions before it');
  await store.snapshots.delete('k/again');
  await store.snapshots.putMany([w(0)]);
  const entries = await store.journal.ofActor('k/again');
  t.same(entries.map((e) => e.version), [1, 2, 0, 3, 1], 'every entry of the key, in seq order');
  t.equal(entries[2].seq, appended);
  t.same((await store.journal.ofActor('k/again', { last: 2 })).map((e) => e.version), [3, 1]);
  await store.close();
});

t.test('an actor\'s journal read costs what it returns: its first entry alone, or the versions past one', async (t) => {
  const env = openEnv(tempDir());
  t.teardown(() => closeEnv(env));
  const snapshots = new LmdbSnapshots(env);
  const journal = new LmdbJournal(env);
  for (let v = 0; v < 10; v++) {
    await snapshots.putMany([{ key: 'k/reads', data: new Uint8Array([v]), expectedVersion: v, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [] } }]);
  }
  let gets = 0;
  const get = env.journal.get.bind(env.journal);
  env.journal.get = ((seq: number) => (gets++, get(seq))) as typeof env.journal.get;
  t.teardown(() => {
    env.journal.get = get;
  });
  const read = async (opts: { afterVersion?: number; limit?: number }) => {
    gets = 0;
    const versions = (await journal.ofActor('k/reads', opts)).map((e) => e.version);
    return { versions, gets };
  };
  t.same(await read({ limit: 1 }), { versions: [1], gets: 1 }, 'the first entry, named by the chain\'s ends');
  t.same(await read({ afterVersion: 9, limit: 1 }), { versions: [10], gets: 1 }, 'a retry of the newest step reads the newest entry alone');
  t.same(await read({ afterVersion: 7, limit: 1 }), { versions: [8], gets: 3 }, 'from the newest back to the version asked');
  t.same(await read({ afterVersion: 7 }), { versions: [8, 9, 10], gets: 3 }, 'and no further without a limit');
});
