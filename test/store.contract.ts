/**
 * The behavioural contract of `store/types.ts`, run against every backend by `store.<backend>.test.ts`.
 * Expectations are written out by hand or computed with plain JavaScript (and, for the randomised
 * planner checks, with mingo over an in-memory array), never read back from the store under test.
 */
import fc from 'fast-check';
import { Query } from 'mingo';
import type { Test } from 'tap';
import {
  StoreCursorError,
  StoreDuplicateError,
  type Collection,
  type Doc,
  type Filter,
  type Sort,
  type Store,
} from '../store/mod.js';

export type MakeStore = () => Promise<Store>;
/** Opens again the store that `closed` was (after `closed.close()`), on the same data. */
export type ReopenStore = (closed: Store) => Promise<Store>;

/**
 * Registers the contract as subtests of `t`; each subtest opens its own store with `makeStore`. With
 * `reopen`, it also checks that data survives closing the store. Resolves once they are registered.
 */
export async function storeContract(t: Test, makeStore: MakeStore, reopen?: ReopenStore): Promise<void> {
  const open = async (t: Test) => {
    const store = await makeStore();
    t.teardown(() => store.close());
    return store;
  };

  t.test('insert and get', async (t) => {
    const store = await open(t);
    const people = store.collection({ name: 'people' });
    const ada = {
      id: 'p1',
      name: 'Ada',
      age: 36,
      tags: ['math', 'engines'],
      address: { city: 'London' },
      active: true,
      note: null,
    };
    t.same(await people.insert(ada), ada, 'insert returns the record');
    t.same(await people.get('p1'), ada, 'get returns it as stored');
    t.equal(await people.get('nope'), null, 'unknown id is null');
    await t.rejects(people.insert({ id: 'p1', name: 'Other' }), StoreDuplicateError, 'duplicate id');
    const error = await people.insert({ id: 'p1' }).catch((e: unknown) => e);
    t.match(error, { code: 'STORE_DUPLICATE', collection: 'people', fields: ['id'] }, 'error names the id');
    t.same(await people.get('p1'), ada, 'a rejected insert changes nothing');
  });

  t.test('unique indexes', async (t) => {
    const store = await open(t);
    const users = store.collection({
      name: 'users',
      indexes: [
        { fields: ['email'], unique: true },
        { fields: ['account_id', 'slug'], unique: true, sparse: true },
        { fields: ['account_id'] },
      ],
    });
    await users.insert({ id: 'u1', email: 'a@x', account_id: 'acc1', slug: 'ada' });
    await t.rejects(
      users.insert({ id: 'u2', email: 'a@x', account_id: 'acc2' }),
      { code: 'STORE_DUPLICATE', fields: ['email'] },
      'unique on insert',
    );
    t.equal(await users.get('u2'), null, 'the rejected record is not stored');
    await users.insert({ id: 'u2', email: 'b@x', account_id: 'acc1' });
    await users.insert({ id: 'u3', email: 'c@x', account_id: 'acc1', slug: null });
    await users.insert({ id: 'u4', email: 'd@x', account_id: 'acc1' });
    t.pass('sparse unique allows many records without the field, or with null');
    await t.rejects(users.insert({ id: 'u5', email: 'e@x', account_id: 'acc1', slug: 'ada' }), {
      code: 'STORE_DUPLICATE',
      fields: ['account_id', 'slug'],
    });
    await users.insert({ id: 'u5', email: 'e@x', account_id: 'acc2', slug: 'ada' });
    t.pass('the same slug in another account is fine');
    await t.rejects(users.update({ id: 'u2' }, { $set: { email: 'a@x' } }), StoreDuplicateError, 'unique on update');
    await t.rejects(
      users.update({ id: 'u2' }, { $set: { slug: 'ada' } }),
      { code: 'STORE_DUPLICATE', fields: ['account_id', 'slug'] },
      'sparse unique on update',
    );
    t.same(await users.get('u2'), { id: 'u2', email: 'b@x', account_id: 'acc1' }, 'a rejected update changes nothing');
    t.same(
      (await users.find({ email: 'b@x' })).map((u) => u.id),
      ['u2'],
      'index entries survive a rejected update',
    );
    t.match(
      await users.update({ id: 'u1' }, { $set: { email: 'a@x', name: 'Ada' } }),
      { name: 'Ada' },
      'keeping its own value is fine',
    );
    t.match(await users.update({ id: 'u2' }, { $set: { email: 'z@x' } }), { email: 'z@x' });
    await users.insert({ id: 'u6', email: 'b@x', account_id: 'acc3' });
    t.pass('a value freed by an update can be taken');
    t.equal(await users.delete({ id: 'u1' }), 1);
    await users.insert({ id: 'u7', email: 'a@x', account_id: 'acc1', slug: 'ada' });
    t.pass('values freed by a delete can be taken');
    await users.insert({ id: 'u8', account_id: 'acc4' });
    await t.rejects(
      users.insert({ id: 'u9', account_id: 'acc5' }),
      { code: 'STORE_DUPLICATE', fields: ['email'] },
      'a non-sparse unique index counts missing as a value',
    );
    t.same(
      (await users.find({ account_id: 'acc1' })).map((u) => u.id),
      ['u2', 'u3', 'u4', 'u7'],
    );
  });

  t.test('find filters', async (t) => {
    const store = await open(t);
    const items = store.collection({ name: 'items', indexes: [{ fields: ['kind', 'n'] }, { fields: ['name'] }] });
    const all = Array.from({ length: 40 }, (_, i) => ({
      id: `i${String(i).padStart(2, '0')}`,
      kind: ['a', 'b', 'c'][i % 3],
      n: i,
      name: `item-${i % 7}`,
      ...(i % 4 === 0 ? {} : { meta: { level: i % 5, label: i % 2 === 0 ? 'even' : 'odd' } }),
      tags: i % 6 === 0 ? ['x', 'y'] : ['z'],
    }));
    for (const doc of all) await items.insert(doc);
    const expect = async (filter: Filter, predicate: (d: (typeof all)[number]) => boolean, what: string) => {
      const got = (await items.find(filter)).map((d) => d.id);
      t.same(
        got,
        all.filter(predicate).map((d) => d.id),
        what,
      );
      t.equal(await items.count(filter), got.length, `count: ${what}`);
    };
    await expect({}, () => true, 'empty filter');
    await expect({ kind: 'b' }, (d) => d.kind === 'b', 'equality on an indexed field');
    await expect(
      { kind: { $eq: 'c' }, n: 5 },
      (d) => d.kind === 'c' && d.n === 5,
      '$eq on an index prefix and the next field',
    );
    await expect(
      { kind: { $in: ['a', 'c'] }, n: { $gte: 10, $lt: 20 } },
      (d) => d.kind !== 'b' && d.n >= 10 && d.n < 20,
      '$in then a range',
    );
    await expect({ n: { $gt: 35 } }, (d) => d.n > 35, '$gt on a non-leading field');
    await expect({ n: { $lte: 3 } }, (d) => d.n <= 3, '$lte');
    await expect({ name: { $regex: '^item-[12]$' } }, (d) => /^item-[12]$/.test(d.name), '$regex');
    await expect({ name: /-3$/ }, (d) => d.name.endsWith('-3'), 'RegExp literal');
    await expect({ 'meta.level': 2 }, (d) => d.meta?.level === 2, 'nested path');
    await expect({ 'meta.label': { $exists: false } }, (d) => d.meta === undefined, '$exists false');
    await expect({ meta: null }, (d) => d.meta === undefined, 'null matches missing');
    await expect({ tags: 'x' }, (d) => d.tags.includes('x'), 'equality matches an array element');
    await expect(
      { $or: [{ kind: 'a', n: { $lt: 10 } }, { name: 'item-6' }] },
      (d) => (d.kind === 'a' && d.n < 10) || d.name === 'item-6',
      '$or',
    );
    await expect(
      { $and: [{ kind: 'b' }, { $or: [{ n: { $lt: 5 } }, { n: { $gt: 30 } }] }] },
      (d) => d.kind === 'b' && (d.n < 5 || d.n > 30),
      '$and with a nested $or',
    );
    await expect({ kind: { $nin: ['a', 'b'] }, n: { $ne: 2 } }, (d) => d.kind === 'c' && d.n !== 2, '$nin and $ne');
    await expect({ kind: 'zzz' }, () => false, 'no match');
    await expect({ n: { $gt: 'a' } }, () => false, 'comparisons do not cross types');
    t.same((await items.findOne({ kind: 'a' }))?.id, 'i00', 'findOne defaults to id order');
    t.equal(await items.findOne({ kind: 'zzz' }), null, 'findOne without a match');
  });

  t.test('sort, skip, limit', async (t) => {
    const store = await open(t);
    const rows = store.collection({ name: 'rows', indexes: [{ fields: ['g'] }] });
    const docs: Doc[] = [
      { id: 'r5', g: 2, s: 'b' },
      { id: 'r1', g: 1, s: 'b' },
      { id: 'r4', g: null, s: 'a' },
      { id: 'r2', g: 2, s: 'a' },
      { id: 'r3', s: 'c' },
      { id: 'r6', g: 1, s: 'a' },
      { id: 'r0', g: 'x', s: 'c' },
      { id: 'r7', g: true, s: 'c' },
    ];
    for (const doc of docs) await rows.insert(doc);
    const ids = async (sort: Sort, options: { skip?: number; limit?: number } = {}) =>
      (await rows.find({}, { sort, ...options })).map((d) => d.id);
    t.same(await ids({}), ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7'], 'default order is id');
    t.same(
      await ids({ g: 1 }),
      ['r3', 'r4', 'r1', 'r6', 'r2', 'r5', 'r0', 'r7'],
      'null and missing tie first, then numbers, strings, booleans; id breaks ties',
    );
    t.same(
      await ids({ g: -1 }),
      ['r7', 'r0', 'r2', 'r5', 'r1', 'r6', 'r3', 'r4'],
      'descending keeps id ascending among ties',
    );
    t.same(
      await ids({ s: 1, g: -1 }),
      ['r2', 'r6', 'r4', 'r5', 'r1', 'r7', 'r0', 'r3'],
      'two fields, mixed directions',
    );
    t.same(await ids({ id: -1 }), ['r7', 'r6', 'r5', 'r4', 'r3', 'r2', 'r1', 'r0'], 'sorting by id itself');
    t.same(await ids({ g: 1 }, { skip: 2, limit: 3 }), ['r1', 'r6', 'r2'], 'skip and limit apply after the sort');
    t.same(await ids({ g: 1 }, { skip: 7, limit: 5 }), ['r7'], 'limit past the end');
    t.same(await ids({ g: 1 }, { limit: 0 }), [], 'limit 0 returns nothing');
    t.same((await rows.findOne({ g: { $type: 'number' } }, { sort: { g: -1 } }))?.id, 'r2', 'findOne honours sort');
    t.equal(await rows.count({ g: { $gte: 1 } }), 4);
  });

  t.test('update', async (t) => {
    const store = await open(t);
    const docs = store.collection({ name: 'docs', indexes: [{ fields: ['state'] }] });
    await docs.insert({ id: 'd1', state: 'new', version: 1, count: 0, tags: ['a'], extra: 'x' });
    await docs.insert({ id: 'd2', state: 'new', version: 1, count: 5, tags: [] });
    await docs.insert({ id: 'd3', state: 'done', version: 1, count: 9, tags: [] });
    const updated = await docs.update(
      { id: 'd1' },
      {
        $set: { state: 'open', 'meta.by': 'me' },
        $unset: { extra: '' },
        $inc: { count: 2, fresh: 1 },
        $push: { tags: 'b' },
      },
    );
    t.same(
      updated,
      { id: 'd1', state: 'open', version: 1, count: 2, fresh: 1, tags: ['a', 'b'], meta: { by: 'me' } },
      'operators applied, record returned after',
    );
    t.same(await docs.get('d1'), updated, 'and stored');
    t.same(
      (await docs.find({ state: 'open' })).map((d) => d.id),
      ['d1'],
      'the index follows the update',
    );
    t.same(
      (await docs.find({ state: 'new' })).map((d) => d.id),
      ['d2'],
      'and forgets the old value',
    );
    // $addToSet with $each adds each value once, whether the array exists or the update creates it (mingo alone
    // would set a missing array to the list as given, duplicates and all).
    t.same((await docs.update({ id: 'd3' }, { $addToSet: { tags: { $each: ['x', 'y', 'x'] }, fresh: { $each: ['b', 'a', 'b', 'a'] } } }))?.tags, ['x', 'y']);
    t.same((await docs.get('d3'))?.fresh, ['b', 'a'], 'a missing array: each value once, in order');
    t.same((await docs.update({ id: 'd-set' }, { $addToSet: { tags: { $each: [{ k: 1 }, { k: 1 }, 'z'] } } }, { upsert: true }))?.tags, [{ k: 1 }, 'z'], 'an upsert: the same');
    t.equal(await docs.update({ id: 'zz' }, { $set: { state: 'x' } }), null, 'no match, no upsert: null');
    t.equal(await docs.update({ state: 'gone' }, { $set: { state: 'x' } }), null);

    const cas = (version: number) => docs.update({ id: 'd2', version }, { $set: { version: version + 1 } });
    t.match(await cas(1), { version: 2 }, 'compare-and-set succeeds on the expected version');
    t.equal(await cas(1), null, 'and fails on a stale one');
    const race = await Promise.all([cas(2), cas(2), cas(2), cas(2)]);
    t.equal(race.filter((r) => r !== null).length, 1, 'exactly one of concurrent compare-and-sets wins');
    t.match(await docs.get('d2'), { version: 3 });

    t.match(
      await docs.update({ state: { $in: ['new', 'done', 'open'] } }, { $set: { picked: true } }),
      { id: 'd1' },
      'several match: lowest id',
    );
    t.match(
      await docs.update({}, { $set: { picked: true } }, { sort: { count: -1 } }),
      { id: 'd3' },
      'sort picks the record',
    );
    const counted = await Promise.all(
      Array.from({ length: 20 }, () => docs.update({ id: 'd3' }, { $inc: { count: 1 } })),
    );
    t.same(
      counted.map((d) => d?.count).sort((a, b) => Number(a) - Number(b)),
      Array.from({ length: 20 }, (_, i) => 10 + i),
      'concurrent $inc lose nothing',
    );
    await t.rejects(docs.update({ id: 'd3' }, { $set: { id: 'd9' } }), TypeError, 'an update may not change id');
    // Indirectly too, on a collection without indexes (whose update applies to the record as read) and with one.
    for (const indexes of [[], [{ fields: ['n'] }]]) {
      const plain = store.collection({ name: `renames${indexes.length}`, indexes });
      await plain.insert({ id: 'r1', n: 1, other: 'r2' });
      await t.rejects(plain.update({ id: 'r1' }, { $rename: { other: 'id' } }), TypeError, 'a $rename onto id is refused');
      t.same(await plain.get('r1'), { id: 'r1', n: 1, other: 'r2' }, 'and changes nothing');
      t.equal(await plain.get('r2'), null);
    }
    await t.rejects(docs.update({ id: 'd3' }, {}), 'an empty update is refused');
  });

  t.test('upsert', async (t) => {
    const store = await open(t);
    const settings = store.collection({ name: 'settings', indexes: [{ fields: ['project'], unique: true }] });
    const created = await settings.update(
      { id: 's1', project: 'p1' },
      { $set: { theme: 'dark' }, $setOnInsert: { created: 'now' }, $inc: { writes: 1 } },
      { upsert: true },
    );
    t.same(
      created,
      { id: 's1', project: 'p1', theme: 'dark', created: 'now', writes: 1 },
      'created from the filter equalities and the update',
    );
    t.same(await settings.get('s1'), created);
    const again = await settings.update(
      { id: 's1' },
      { $set: { theme: 'light' }, $setOnInsert: { created: 'later' }, $inc: { writes: 1 } },
      { upsert: true },
    );
    t.same(
      again,
      { id: 's1', project: 'p1', theme: 'light', created: 'now', writes: 2 },
      'an existing record is updated, $setOnInsert ignored',
    );
    await t.rejects(
      settings.update({ project: 'p2' }, { $set: { theme: 'x' } }, { upsert: true }),
      TypeError,
      'an upsert needs an id',
    );
    await t.rejects(
      settings.update({ project: 'p1' }, { $set: { theme: 'x' } }, { upsert: true }),
      TypeError,
      'even when a record matches',
    );
    await t.rejects(
      settings.update({ id: 's1', writes: 99 }, { $set: { theme: 'x' } }, { upsert: true }),
      { code: 'STORE_DUPLICATE', fields: ['id'] },
      'a failed compare-and-set with upsert collides with the existing id',
    );
    await t.rejects(
      settings.update({ id: 's2', project: 'p1' }, { $set: { theme: 'x' } }, { upsert: true }),
      { code: 'STORE_DUPLICATE', fields: ['project'] },
      'unique index on upsert',
    );
    t.equal(await settings.get('s2'), null);
    const racers = await Promise.allSettled(
      Array.from({ length: 5 }, () => settings.update({ id: 's3' }, { $inc: { n: 1 } }, { upsert: true })),
    );
    t.same(
      racers.map((r) => r.status),
      Array(5).fill('fulfilled'),
      'concurrent upserts of one id all succeed',
    );
    t.match(await settings.get('s3'), { n: 5 });
  });

  t.test('binary fields come back as bytes', async (t) => {
    const store = await open(t);
    const blobs = store.collection({ name: 'blobs' });
    const bytes = Buffer.from([0, 1, 127, 128, 255]);
    await blobs.insert({ id: 'b1', bytes });
    t.equal(await blobs.putNewer({ id: 'b2', v: 1, bytes }, 'v'), true);
    for (const id of ['b1', 'b2']) {
      const got = (await blobs.get(id))!.bytes;
      t.ok(got instanceof Uint8Array, `${id}: a Uint8Array`);
      t.same([...(got as Uint8Array)], [...bytes], `${id}: the same bytes`);
    }
    t.ok((await blobs.find({ id: 'b1' }))[0].bytes instanceof Uint8Array, 'from find too');
  });

  t.test('putNewer', async (t) => {
    const store = await open(t);
    const views = store.collection({
      name: 'views',
      indexes: [{ fields: ['owner', 'at'] }, { fields: ['slug'], unique: true, sparse: true }],
    });
    t.equal(await views.putNewer({ id: 'v1', owner: 'a', at: 1, v: 1, extra: 'x' }, 'v'), true, 'a new record is inserted');
    t.same(await views.get('v1'), { id: 'v1', owner: 'a', at: 1, v: 1, extra: 'x' });
    t.equal(await views.putNewer({ id: 'v1', owner: 'b', at: 2, v: 3 }, 'v'), true, 'a higher version replaces it');
    t.same(await views.get('v1'), { id: 'v1', owner: 'b', at: 2, v: 3 }, 'whole: fields it lacks are gone');
    t.same((await views.find({ owner: 'b', at: { $gte: 2 } })).map((d) => d.id), ['v1'], 'the index follows');
    t.same(await views.find({ owner: 'a' }), [], 'and forgets the old values');
    t.equal(await views.putNewer({ id: 'v1', owner: 'c', at: 3, v: 3 }, 'v'), false, 'an equal version is refused');
    t.equal(await views.putNewer({ id: 'v1', owner: 'c', at: 3, v: 2 }, 'v'), false, 'a lower one too');
    t.same(await views.get('v1'), { id: 'v1', owner: 'b', at: 2, v: 3 }, 'a refused put changes nothing');
    await views.insert({ id: 'v2', owner: 'a', at: 1 });
    t.equal(await views.putNewer({ id: 'v2', owner: 'z', at: 9, v: 1 }, 'v'), false, 'a stored record without the version is never replaced');
    t.same(await views.get('v2'), { id: 'v2', owner: 'a', at: 1 });
    await views.insert({ id: 'v3', v: 1, slug: 'taken' });
    await t.rejects(
      views.putNewer({ id: 'v4', v: 1, slug: 'taken' }, 'v'),
      { code: 'STORE_DUPLICATE', fields: ['slug'] },
      'unique indexes hold',
    );
    t.equal(await views.get('v4'), null);
    await t.rejects(views.putNewer({ id: 'v5', v: '2' }, 'v'), TypeError, 'the version must be a number');
    await t.rejects(views.putNewer({ id: 'v5', v: Number.NaN }, 'v'), TypeError, 'a finite one');
    await t.rejects(views.putNewer({ id: 'v5', v: 1 }, 'id'), TypeError, 'on a field other than id');
    await t.rejects(views.putNewer({ id: 'v5', m: { v: 1 } }, 'm.v'), TypeError, 'at the top level');
    t.equal(await views.get('v5'), null);
    const versions = [4, 9, 2, 7, 5, 8, 3, 6];
    const results = await Promise.all(versions.map((v) => views.putNewer({ id: 'v6', v, owner: `o${v}` }, 'v')));
    t.ok(results.some(Boolean), 'concurrent puts: some win');
    t.same(await views.get('v6'), { id: 'v6', v: 9, owner: 'o9' }, 'the highest version is what stays');
    t.same((await views.find({ owner: { $in: versions.map((v) => `o${v}`) } })).map((d) => d.id), ['v6'], 'with one index entry');
  });

  t.test('an appended field: records read whole, however they were written', async (t) => {
    const store = await open(t);
    const logs = store.collection({ name: 'logs', indexes: [{ fields: ['owner', 'n'] }], appended: 'items', readModel: true });
    const doc = (id: string, v: number, items: unknown[] | undefined, owner = 'a') => ({ id, owner, n: items?.length ?? 0, ...(items ? { items } : {}), v });
    const grown: Array<{ k: number; at: string }> = [];
    for (let v = 1; v <= 6; v++) {
      grown.push({ k: v, at: `t${v}` });
      t.equal(await logs.putNewer(doc('a', v, grown.slice()), 'v'), true);
      t.same(await logs.get('a'), doc('a', v, grown), `grown to ${v}`);
    }
    t.same(await logs.putNewer(doc('a', 6, [...grown, { k: 0, at: 'no' }]), 'v'), false, 'an older version adds nothing');
    t.same(await logs.get('a'), doc('a', 6, grown));
    t.equal(await logs.putNewer(doc('a', 7, grown.slice(0, 2)), 'v'), true, 'a shorter array replaces the stored one');
    t.same(await logs.get('a'), doc('a', 7, grown.slice(0, 2)));
    t.equal(await logs.putNewer(doc('a', 8, [...grown.slice(0, 2), { k: 9, at: 't9' }]), 'v'), true);
    t.same((await logs.find({ owner: 'a' }))[0], doc('a', 8, [...grown.slice(0, 2), { k: 9, at: 't9' }]), 'find reads it whole');
    t.same((await logs.find({ 'items.k': 9 })).map((d) => d.id), ['a'], 'filters see the items');
    await logs.update({ id: 'a' }, { $set: { 'items.0.at': 'changed' } });
    t.same((await logs.get('a'))?.items, [{ k: 1, at: 'changed' }, { k: 2, at: 't2' }, { k: 9, at: 't9' }], 'an update may change any item');
    t.equal(await logs.putNewer(doc('a', 9, [{ k: 1, at: 'changed' }, { k: 2, at: 't2' }, { k: 9, at: 't9' }, { k: 10, at: 't10' }]), 'v'), true, 'and grows on from there');
    t.same((await logs.get('a'))?.items, [{ k: 1, at: 'changed' }, { k: 2, at: 't2' }, { k: 9, at: 't9' }, { k: 10, at: 't10' }]);
    await logs.insert(doc('ab', 1, [{ k: 1, at: 'x' }], 'b'));
    await logs.insert(doc('none', 1, undefined, 'b'));
    t.same(await logs.get('none'), doc('none', 1, undefined, 'b'), 'a record without the field has none');
    t.same((await logs.get('ab'))?.items, [{ k: 1, at: 'x' }], "an id that starts with another's keeps its own items");
    t.equal(await logs.putNewer(doc('e', 1, []), 'v'), true);
    t.same(await logs.get('e'), doc('e', 1, []), 'an empty array stays one');
    t.equal(await logs.delete({ id: 'a' }), 1);
    t.equal(await logs.get('a'), null);
    t.equal(await logs.putNewer(doc('a', 1, [{ k: 5, at: 'new' }]), 'v'), true, 'written again after a delete');
    t.same((await logs.get('a'))?.items, [{ k: 5, at: 'new' }], 'with none of the deleted items');
    t.same((await logs.page({ owner: 'b' }, { limit: 10 })).items.map((d) => d.items), [[{ k: 1, at: 'x' }], undefined], 'pages read whole');
    t.throws(() => store.collection({ name: 'logs', indexes: [{ fields: ['owner', 'n'] }], readModel: true }), /already declared with another appended field/);
  });

  t.test('delete', async (t) => {
    const store = await open(t);
    const jobs = store.collection({ name: 'jobs', indexes: [{ fields: ['queue'] }] });
    for (let i = 0; i < 10; i++) await jobs.insert({ id: `j${i}`, queue: i % 2 === 0 ? 'even' : 'odd', n: i });
    t.equal(await jobs.delete({ queue: 'even', n: { $gte: 4 } }), 3);
    t.equal(await jobs.delete({ queue: 'none' }), 0);
    t.same(
      (await jobs.find({ queue: 'even' })).map((j) => j.id),
      ['j0', 'j2'],
      'index entries of deleted records are gone',
    );
    t.equal(await jobs.delete({ id: 'j1' }), 1);
    t.equal(await jobs.get('j1'), null);
    t.equal(await jobs.delete({}), 6);
    t.equal(await jobs.count({}), 0);
    await jobs.insert({ id: 'j4', queue: 'even' });
    t.pass('a deleted id can be inserted again');
  });

  t.test('page walks every record once, in order', async (t) => {
    const store = await open(t);
    const calls = store.collection({ name: 'calls', indexes: [{ fields: ['account', 'started'] }] });
    const docs: Doc[] = [];
    for (let i = 0; i < 320; i++) {
      const doc: Doc = { id: `c${String((i * 7919) % 1000).padStart(3, '0')}`, account: `acc${i % 3}`, score: i % 9 };
      if (i % 5 !== 0) doc.started = `2026-01-${String((i % 28) + 1).padStart(2, '0')}`;
      if (i % 11 === 0) doc.score = i % 2 === 0 ? null : 'high';
      docs.push(doc);
      await calls.insert(doc);
    }
    const cases: Array<[Filter, Sort | undefined, number]> = [
      [{}, undefined, 17],
      [{}, { started: -1 }, 10],
      [{}, { score: 1, started: -1 }, 9],
      [{ account: 'acc1' }, { started: 1 }, 7],
      [{ account: { $in: ['acc0', 'acc2'] }, started: { $gte: '2026-01-10' } }, { score: -1, started: 1 }, 5],
      [{}, { id: -1 }, 50],
      [{}, { account: 1, score: -1, started: 1 }, 1000],
    ];
    for (const [filter, sort, limit] of cases) {
      const walked: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const result = await calls.page(filter, { sort, limit, cursor });
        t.ok(result.items.length <= limit, 'a page holds at most limit items');
        walked.push(...result.items.map((d) => d.id));
        cursor = result.next ?? undefined;
        if (cursor !== undefined) t.match(cursor, /^[A-Za-z0-9_-]+$/, 'cursors are URL-safe');
        pages++;
      } while (cursor !== undefined);
      const expected = docs
        .filter((d) => new Query(filter).test(d))
        .sort(byReference(sort ?? {}))
        .map((d) => d.id);
      t.same(walked, expected, `walk ${JSON.stringify(filter)} by ${JSON.stringify(sort)} / ${limit} (${pages} pages)`);
    }
    const empty = await calls.page({ account: 'none' }, { limit: 5 });
    t.same(empty, { items: [], next: null }, 'an empty result is one empty page');
    const exact = await calls.page({ account: 'acc0', score: 4 }, { limit: 100 });
    t.equal(exact.next, null, 'no cursor when everything fits');
    await t.rejects(calls.page({}, { limit: 0 }), RangeError, 'limit must be at least 1');
  });

  t.test('page walks stay correct under concurrent inserts', async (t) => {
    const store = await open(t);
    const events = store.collection({ name: 'events', indexes: [{ fields: ['at'] }] });
    const original: Doc[] = [];
    for (let i = 0; i < 200; i++) {
      const doc = { id: `e${String(i).padStart(3, '0')}`, at: 1000 + (i % 50) * 10, kind: 'original' };
      original.push(doc);
      await events.insert(doc);
    }
    const sort: Sort = { at: -1 };
    const order = byReference(sort);
    const seen: Doc[] = [];
    let cursor: string | undefined;
    let extra = 0;
    do {
      const result = await events.page({}, { sort, limit: 9, cursor });
      seen.push(...result.items);
      cursor = result.next ?? undefined;
      // New records on both sides of the cursor, and some tied with it on `at`.
      const last = result.items[result.items.length - 1];
      for (const at of [995, 1250, 1495, last ? Number(last.at) : 0]) {
        await events.insert({ id: `x${String(extra++).padStart(3, '0')}`, at, kind: 'inserted' });
      }
    } while (cursor !== undefined);
    const ids = seen.map((d) => d.id);
    t.equal(new Set(ids).size, ids.length, 'no record is returned twice');
    t.same(
      seen.filter((d) => d.kind === 'original').map((d) => d.id),
      [...original].sort(order).map((d) => d.id),
      'every record that existed when the walk began is returned, in order',
    );
    t.ok(
      seen.every((d, i) => i === 0 || order(seen[i - 1], d) < 0),
      'the whole walk is in sort order',
    );
  });

  t.test('cursor errors', async (t) => {
    const store = await open(t);
    const log = store.collection({ name: 'log' });
    for (let i = 0; i < 5; i++) await log.insert({ id: `l${i}`, n: i });
    const { next } = await log.page({}, { sort: { n: 1 }, limit: 2 });
    t.type(next, 'string');
    const forged = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const bad of [
      'garbage!',
      '',
      'e30',
      forged(['+n,+id']),
      forged({ a: 1 }),
      forged(['+n', 1, 2]),
      forged(['+n', { $gt: 1 }, 'l1']),
      `${next}x`,
    ]) {
      await t.rejects(
        log.page({}, { sort: { n: 1 }, limit: 2, cursor: bad }),
        StoreCursorError,
        `malformed cursor ${JSON.stringify(bad)}`,
      );
    }
    await t.rejects(
      log.page({}, { sort: { n: -1 }, limit: 2, cursor: next! }),
      StoreCursorError,
      'a cursor for another sort',
    );
    await t.rejects(log.page({}, { limit: 2, cursor: next! }), StoreCursorError, 'a cursor for the default sort');
    t.same(
      (await log.page({}, { sort: { n: 1 }, limit: 2, cursor: next! })).items.map((d) => d.id),
      ['l2', 'l3'],
      'the genuine cursor still works',
    );
  });

  t.test('index-planned queries agree with a full scan', (t) => plannerAgreement(t, open, BASE_STRINGS, 60));

  t.test('a range on one field of a compound index and conditions on a later one: exactly the matches', async (t) => {
    // The conversations' (project, environment, ended_at, started_at) index as semantic search reads it: the
    // ones that ended after a time and started in a range (the embedded store checks `started_at` in the keys).
    const store = await open(t);
    const c = store.collection({ name: 'spans', indexes: [{ fields: ['p', 'started'] }, { fields: ['p', 'ended', 'started'] }] });
    const docs: Doc[] = [];
    for (let i = 0; i < 40; i++) {
      const started = `2026-01-01T${String(i % 24).padStart(2, '0')}:00:00.000Z`;
      const ended = i % 5 === 0 ? null : `2026-01-02T${String((i * 7) % 24).padStart(2, '0')}:00:00.000Z`;
      docs.push({ id: `s${i}`, p: i % 3 === 0 ? 'q' : 'p', started, ...(i % 9 === 0 ? {} : { ended }) });
    }
    for (const d of docs) await c.insert(d);
    const filters: Filter[] = [
      { p: 'p', ended: { $gt: '2026-01-02T10:00:00.000Z' }, started: { $gte: '2026-01-01T04:00:00.000Z', $lt: '2026-01-01T13:00:00.000Z' } },
      { p: 'p', ended: { $gte: '2026-01-02T07:00:00.000Z' }, started: { $lt: '2026-01-01T05:00:00.000Z' } },
      { p: 'p', ended: { $gt: '2026-01-02T00:00:00.000Z' }, $and: [{ started: { $gte: '2026-01-01T02:00:00.000Z' } }, { started: { $ne: '2026-01-01T08:00:00.000Z' } }] },
      { p: { $in: ['p', 'q'] }, ended: { $lte: '2026-01-02T12:00:00.000Z' }, started: { $in: ['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z', 'x'] } },
      { p: 'p', ended: null, started: { $gte: '2026-01-01T00:00:00.000Z' } },
    ];
    for (const f of filters) {
      const expected = docs.filter((d) => new Query(f).test(d)).map((d) => d.id).sort();
      t.same((await c.find(f)).map((d) => d.id).sort(), expected, JSON.stringify(f));
      t.equal(await c.count(f), expected.length, `count ${JSON.stringify(f)}`);
    }
  });

  t.test('snapshots', async (t) => {
    const store = await open(t);
    const snaps = store.snapshots;
    // A state as an actor stores one: nested objects, arrays, nulls.
    const bytes = (s: string) => ({ text: s, nested: { list: [1, 'two', null], flag: true } });
    const text = (data: unknown) => (data as { text?: string } | undefined)?.text;
    t.equal(await snaps.get('a'), null);
    t.same(await snaps.put('a', bytes('one'), { expectedVersion: 0, fence: 5, shard: 1, deadline: 100 }), {
      ok: true,
      version: 1,
    });
    const first = await snaps.get('a');
    t.match(first, { key: 'a', version: 1, fence: 5, shard: 1, deadline: 100 });
    t.same(first?.data, bytes('one'), 'data comes back as it was put');
    (first!.data as { text: string }).text = 'changed by the reader';
    t.equal(text((await snaps.get('a'))?.data), 'one', 'each read is a copy of its own');
    t.type(first?.updated_at, 'number');
    t.same(
      await snaps.put('a', bytes('x'), { expectedVersion: 0, fence: 5, shard: 1, deadline: null }),
      {
        ok: false,
        reason: 'version',
        current: { version: 1, fence: 5 },
      },
      'version 0 means it must not exist',
    );
    t.same(await snaps.put('a', bytes('two'), { expectedVersion: 1, fence: 5, shard: 1, deadline: 200 }), {
      ok: true,
      version: 2,
    });
    t.same(
      await snaps.put('a', bytes('x'), { expectedVersion: 2, fence: 4, shard: 1, deadline: null }),
      {
        ok: false,
        reason: 'fence',
        current: { version: 2, fence: 5 },
      },
      'a smaller fence is refused',
    );
    t.match(
      await snaps.put('a', bytes('x'), { expectedVersion: 7, fence: 4, shard: 1, deadline: null }),
      { ok: false, reason: 'fence' },
      'fence is checked before version',
    );
    t.same(
      await snaps.put('a', bytes('three'), { expectedVersion: 2, fence: 9, shard: 1, deadline: null }),
      { ok: true, version: 3 },
      'a larger fence takes over',
    );
    t.match(await snaps.put('a', bytes('x'), { expectedVersion: 3, fence: 5, shard: 1, deadline: null }), {
      ok: false,
      reason: 'fence',
      current: { fence: 9 },
    });
    t.match(await snaps.get('a'), { version: 3, fence: 9, deadline: null });
    t.equal(text((await snaps.get('a'))?.data), 'three', 'refused puts changed nothing');

    const race = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        snaps.put('b', bytes(`w${i}`), { expectedVersion: 0, fence: 1, shard: 0, deadline: null }),
      ),
    );
    t.equal(race.filter((r) => r.ok).length, 1, 'one of concurrent creators wins');
    const winner = race.findIndex((r) => r.ok);
    t.equal(text((await snaps.get('b'))?.data), `w${winner}`, 'the winner is what is stored');

    t.same(await snaps.due([0, 1, 2], Number.MAX_SAFE_INTEGER, 10), [], 'nothing due without deadlines');
    const put = (key: string, shard: number, deadline: number | null, expectedVersion = 0) =>
      snaps.put(key, bytes(key), { expectedVersion, fence: 1, shard, deadline });
    await put('t1', 0, 300);
    await put('t2', 1, 100);
    await put('t3', 2, 200);
    await put('t4', 1, 250);
    await put('t5', 0, 100);
    await put('t6', 1, null);
    await put('t7', 0, 1000);
    t.same(
      await snaps.due([0, 1], 300, 10),
      [
        { key: 't2', deadline: 100 },
        { key: 't5', deadline: 100 },
        { key: 't4', deadline: 250 },
        { key: 't1', deadline: 300 },
      ],
      'due: these shards, deadline at or before, earliest first',
    );
    t.same(
      await snaps.due([0, 1, 2], 300, 2),
      [
        { key: 't2', deadline: 100 },
        { key: 't5', deadline: 100 },
      ],
      'limit',
    );
    t.same(await snaps.due([3], 5000, 10), [], 'other shards');
    t.same(await snaps.due([2], 199, 10), [], 'deadline after before');
    await put('t2', 1, 400, 1);
    await put('t4', 1, null, 1);
    t.same(await snaps.due([1], 500, 10), [{ key: 't2', deadline: 400 }], 'a put moves or clears the deadline');
    await snaps.delete('t2');
    await snaps.delete('never-existed');
    t.equal(await snaps.get('t2'), null, 'delete');
    t.same(await snaps.due([1], 500, 10), [], 'a deleted snapshot is not due');
    t.same(await put('t2', 1, null), { ok: true, version: 1 }, 'a deleted key starts again at version 1');
  });

  t.test('snapshots: putMany judges each write alone (group commit)', async (t) => {
    const store = await open(t);
    const snaps = store.snapshots;
    const w = (key: string, expectedVersion: number, fence: number, deadline: number | null = null) => ({
      key, data: new Uint8Array([expectedVersion]), expectedVersion, fence, shard: 7, deadline,
    });
    t.same(await snaps.putMany([]), [], 'an empty batch');
    t.same(await snaps.putMany([w('g1', 0, 5), w('g2', 0, 5, 50), w('g3', 0, 5)]), [
      { ok: true, version: 1 },
      { ok: true, version: 1 },
      { ok: true, version: 1 },
    ]);
    const results = await snaps.putMany([w('g1', 1, 5), w('g2', 0, 5), w('g3', 1, 4), w('g4', 0, 1, 60)]);
    t.same(results, [
      { ok: true, version: 2 },
      { ok: false, reason: 'version', current: { version: 1, fence: 5 } },
      { ok: false, reason: 'fence', current: { version: 1, fence: 5 } },
      { ok: true, version: 1 },
    ], 'a lost race in the batch does not stop the others');
    t.equal((await snaps.get('g1'))?.version, 2);
    t.same(await snaps.due([7], 100, 10), [{ key: 'g2', deadline: 50 }, { key: 'g4', deadline: 60 }]);
  });

  t.test('snapshots: the highest fence stored', async (t) => {
    const store = await open(t);
    const snaps = store.snapshots;
    t.equal(await snaps.highestFence(), 0, 'none stored: 0');
    const w = (key: string, fence: number) => ({ key, data: null, expectedVersion: 0, fence, shard: 0, deadline: null });
    await snaps.putMany([w('h1', 3), w('h2', 4711), w('h3', 12)]);
    t.equal(await snaps.highestFence(), 4711);
    t.same(await snaps.putMany([w('h4', 5000)]), [{ ok: true, version: 1 }]);
    t.equal(await snaps.highestFence(), 5000);
    await snaps.delete('h4');
    t.equal(await snaps.highestFence(), 4711, 'a deleted snapshot\'s fence is gone with it');
  });

  t.test('snapshots: a chained put stands only on its own writer\'s put', async (t) => {
    const store = await open(t);
    const snaps = store.snapshots;
    const put = (expectedVersion: number, writer?: number, chained?: boolean) =>
      snaps.put('ch', new Uint8Array([expectedVersion]), { expectedVersion, fence: 1, shard: 0, deadline: null, ...(writer !== undefined ? { writer } : {}), ...(chained ? { chained } : {}) });
    const refused = (version: number) => ({ ok: false, reason: 'version', current: { version, fence: 1 } });
    t.same(await put(0, 7, true), { ok: false, reason: 'version', current: { version: 0, fence: 0 } }, 'a chained put does not create');
    t.same(await put(0, 7), { ok: true, version: 1 });
    t.equal((await snaps.get('ch'))?.writer, 7, 'the writer is stored');
    t.same(await put(1, 7, true), { ok: true, version: 2 }, 'on its own put');
    t.same(await put(2, 8), { ok: true, version: 3 }, 'another writer, not chained, on the version it read');
    t.same(await put(3, 7, true), refused(3), 'refused: the version matches, the writer does not');
    t.same(await put(3, undefined, true), refused(3), 'a chained put names its writer');
    t.same(await put(3, 8, true), { ok: true, version: 4 });
    t.same(await put(4), { ok: true, version: 5 }, 'a put that names no writer');
    t.equal((await snaps.get('ch'))?.writer, undefined, 'leaves none behind');
    t.same(await put(5, 8, true), refused(5));
  });

  t.test('snapshots: a read made as soon as a put resolves sees it, while other reads run all along', async (t) => {
    const store = await open(t);
    const snaps = store.snapshots;
    let reading = true;
    // Reads between the writes: a backend that keeps a read view for a while (lmdb-js keeps its read
    // transaction until a timer ends it) must still show each write to the code that awaited it.
    const reader = (async () => {
      while (reading) {
        await snaps.get('rw');
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    let stale = 0;
    for (let v = 0; v < 100; v++) {
      const r = await snaps.put('rw', new Uint8Array([v]), { expectedVersion: v, fence: 1, shard: 0, deadline: null });
      if (!r.ok || (await snaps.get('rw'))?.version !== v + 1) stale++;
    }
    reading = false;
    await reader;
    t.equal(stale, 0, 'no put was missed by the read right after it');
  });

  t.test('journal: a step commits with its snapshot, a refused one appends nothing', async (t) => {
    const store = await open(t);
    const { snapshots, journal } = store;
    t.equal(await journal.head(), 0, 'an empty journal');
    t.same(await journal.read(0, 10), []);
    const w = (key: string, expectedVersion: number, fence: number, events: Array<{ type: string; data: Record<string, unknown> }> = []) => ({
      key, data: new Uint8Array([expectedVersion]), expectedVersion, fence, shard: 3, deadline: null,
      step: { value: { active: 'talking' }, events },
    });
    const first = await snapshots.putMany([w('counter/a', 0, 1, [{ type: 'counter.incremented', data: { count: 1 } }]), w('counter/b', 0, 1)]);
    t.match(first, [{ ok: true, version: 1, seq: Number }, { ok: true, version: 1, seq: Number }]);
    const [sa, sb] = first.map((r) => (r as { seq: number }).seq);
    t.ok(sb > sa, 'seqs increase in the order of the batch');
    const refused = await snapshots.putMany([w('counter/a', 0, 1, [{ type: 'lost', data: {} }]), w('counter/b', 1, 0)]);
    t.match(refused, [{ ok: false, reason: 'version' }, { ok: false, reason: 'fence' }]);
    t.equal(await journal.head(), sb, 'refused writes append nothing');
    const second = await snapshots.put('counter/a', new Uint8Array([9]), { expectedVersion: 1, fence: 1, shard: 3, deadline: null });
    t.same(second, { ok: true, version: 2 }, 'a write without a step appends nothing');
    const third = await snapshots.putMany([w('counter/a', 2, 1, [{ type: 'x', data: { n: 1 } }, { type: 'y', data: { nested: { deep: [1, 'two'] } } }])]);
    const entries = await journal.read(0, 10);
    t.same(entries.map((e) => [e.key, e.version]), [['counter/a', 1], ['counter/b', 1], ['counter/a', 3]]);
    const a3 = entries[2];
    t.match(a3, { seq: (third[0] as { seq: number }).seq, kind: 'counter', id: 'a', shard: 3, version: 3, value: { active: 'talking' } });
    t.same(a3.events, [{ type: 'x', data: { n: 1 } }, { type: 'y', data: { nested: { deep: [1, 'two'] } } }]);
    t.ok(a3.at > 0 && a3.at === (third[0] as { at: number }).at, 'the commit time is the one the write reported');
    t.same(entries[1].events, [], 'a step that emitted nothing still has its entry');
    t.same((await journal.read(entries[0].seq, 1)).map((e) => e.seq), [entries[1].seq], 'read after a seq, limited');
    t.equal(await journal.head(), entries[2].seq);
  });

  t.test('journal: a step\'s reply is stored with its entry; a step without one has none', async (t) => {
    const store = await open(t);
    const reply = { ok: true, response: 'We open at 9.', handoff: null, parts: [1, 'two'] };
    const write = (expectedVersion: number, answer?: unknown) => ({
      key: 'counter/r', data: new Uint8Array([expectedVersion]), expectedVersion, fence: 1, shard: 0, deadline: null,
      step: { value: 'idle', events: [], ...(answer !== undefined ? { reply: answer } : {}) },
    });
    t.match(await store.snapshots.putMany([write(0, reply), write(1)]), [{ ok: true }, { ok: true }]);
    const [first, second] = await store.journal.ofActor('counter/r');
    t.same(first.reply, reply);
    t.notOk('reply' in second, 'no reply field at all');
    t.same((await store.journal.read(0, 1))[0].reply, reply, 'read by seq too');
  });

  t.test('journal: one actor\'s entries, non-actor entries', async (t) => {
    const store = await open(t);
    const { snapshots, journal } = store;
    for (let v = 0; v < 6; v++) {
      await snapshots.putMany([
        { key: 'k/one', data: new Uint8Array([v]), expectedVersion: v, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [{ type: 'e', data: { v } }] } },
        { key: 'k/one2', data: new Uint8Array([v]), expectedVersion: v, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [] } },
      ]);
    }
    const versions = async (opts?: { afterVersion?: number; limit?: number; last?: number }) => (await journal.ofActor('k/one', opts)).map((e) => e.version);
    t.same(await versions(), [1, 2, 3, 4, 5, 6], 'every version, in order, not another actor sharing a prefix');
    t.same(await versions({ afterVersion: 4 }), [5, 6]);
    t.same(await versions({ limit: 2 }), [1, 2]);
    t.same(await versions({ afterVersion: 1, limit: 2 }), [2, 3]);
    t.same(await versions({ last: 2 }), [5, 6], 'the newest, oldest first');
    t.same(await versions({ last: 0 }), []);
    t.same((await journal.ofActor('k/one', { last: 1 }))[0].events, [{ type: 'e', data: { v: 5 } }]);
    t.same(await journal.ofActor('k/none'), []);
    const head = await journal.head();
    const seq = await journal.append({ key: 'edge/p1', kind: 'edge', id: 'p1', shard: -1, version: 0, value: null, events: [{ type: 'http.errors', data: { count: 2 } }] });
    const seq2 = await journal.append({ key: 'edge/p1', kind: 'edge', id: 'p1', shard: -1, version: 0, value: null, events: [], at: 1234 });
    t.ok(seq > head && seq2 > seq, 'appended after the head');
    t.equal(await journal.head(), seq2);
    const [e1, e2] = await journal.read(head, 10);
    t.match(e1, { seq, key: 'edge/p1', kind: 'edge', shard: -1, version: 0, value: null, events: [{ type: 'http.errors', data: { count: 2 } }] });
    t.equal(e2.at, 1234, 'a given time is kept');
    t.same((await journal.ofActor('edge/p1')).map((e) => e.seq), [seq, seq2], 'non-actor entries in seq order');
  });

  t.test('journal: an actor\'s entries outlive its deleted snapshot; entries and snapshots carry the contract\'s fields only', async (t) => {
    const store = await open(t);
    const step = (v: number) => ({ key: 'k/gone', data: new Uint8Array([v]), expectedVersion: v, fence: 1, shard: 0, deadline: null, step: { value: 'v', events: [] } });
    for (let v = 0; v < 3; v++) t.match(await store.snapshots.putMany([step(v)]), [{ ok: true }]);
    t.same(Object.keys((await store.snapshots.get('k/gone'))!).sort(), ['data', 'deadline', 'fence', 'key', 'shard', 'updated_at', 'version']);
    const fields = ['at', 'events', 'id', 'key', 'kind', 'seq', 'shard', 'value', 'version'];
    for (const e of [...(await store.journal.ofActor('k/gone')), ...(await store.journal.read(0, 10))]) t.same(Object.keys(e).sort(), fields, `entry ${e.seq}`);
    await store.snapshots.delete('k/gone');
    t.equal(await store.snapshots.get('k/gone'), null);
    t.same((await store.journal.ofActor('k/gone')).map((e) => e.version), [1, 2, 3], 'the journal is not deleted with the snapshot');
    t.same((await store.journal.ofActor('k/gone', { afterVersion: 1, limit: 1 })).map((e) => e.version), [2]);
    t.same((await store.journal.ofActor('k/gone', { limit: 1 })).map((e) => e.version), [1]);
  });

  t.test('journal: concurrent batches get distinct, increasing seqs', async (t) => {
    const store = await open(t);
    const writes = Array.from({ length: 40 }, (_, i) =>
      store.snapshots.put(`c/${i}`, new Uint8Array([1]), { expectedVersion: 0, fence: 1, shard: i % 4, deadline: null }).then(() =>
        store.snapshots.putMany([{ key: `c/${i}`, data: new Uint8Array([2]), expectedVersion: 1, fence: 1, shard: i % 4, deadline: null, step: { value: null, events: [] } }]),
      ),
    );
    const seqs = (await Promise.all(writes)).map(([r]) => (r as { seq: number }).seq);
    t.equal(new Set(seqs).size, 40, 'distinct');
    const read = (await store.journal.read(0, 100)).map((e) => e.seq);
    t.same(read, [...seqs].sort((a, b) => a - b), 'read in seq order');
  });

  t.test('a read model is declared the same way everywhere; it reads and writes like any collection', async (t) => {
    const store = await open(t);
    store.collection({ name: 'plain' });
    const projected = store.collection({ name: 'projected', readModel: true });
    t.throws(() => store.collection({ name: 'plain', readModel: true }), /already declared as not a read model/);
    t.throws(() => store.collection({ name: 'projected' }), /already declared as a read model/);
    t.equal(store.collection({ name: 'projected', readModel: true }), projected, 'declaring again returns the same collection');
    await projected.insert({ id: 'p', n: 1 });
    await projected.update({ id: 'p' }, { $inc: { n: 1 } });
    t.match(await projected.get('p'), { n: 2 });
    t.match(await store.collection({ name: 'plain' }).get('p'), null, 'apart from other collections');
  });

  t.test('collections are isolated from each other', async (t) => {
    const store = await open(t);
    const a = store.collection({ name: 'a', indexes: [{ fields: ['k'], unique: true }] });
    const b = store.collection({ name: 'b', indexes: [{ fields: ['k'], unique: true }] });
    t.equal(
      store.collection({ name: 'a', indexes: [{ fields: ['k'], unique: true }] }),
      a,
      'declaring again returns the same collection',
    );
    await a.insert({ id: 'x', k: 1, in: 'a' });
    await b.insert({ id: 'x', k: 1, in: 'b' });
    t.match(await a.get('x'), { in: 'a' });
    t.match(await b.get('x'), { in: 'b' });
    t.same(
      (await b.find({ k: 1 })).map((d) => d.in),
      ['b'],
    );
    t.equal(await a.delete({}), 1);
    t.equal(await b.count({}), 1);
    t.equal(await a.count({}), 0);
  });

  if (reopen) {
    t.test('data survives close and reopen', async (t) => {
      const store = await makeStore();
      const notes = store.collection({ name: 'notes', indexes: [{ fields: ['owner'] }] });
      await notes.insert({ id: 'n1', owner: 'o1', text: 'hello' });
      await notes.update({ id: 'n1' }, { $set: { text: 'hello again' } });
      await store.snapshots.put('s', { s: { value: 'idle', context: { n: [1, 2, 3] } }, a: [['e1', { ok: true }]] }, {
        expectedVersion: 0,
        fence: 1,
        shard: 0,
        deadline: 10,
      });
      await store.close();
      const again = await reopen(store);
      t.teardown(() => again.close());
      const reopened = again.collection({ name: 'notes', indexes: [{ fields: ['owner'] }, { fields: ['text'] }] });
      t.same(await reopened.get('n1'), { id: 'n1', owner: 'o1', text: 'hello again' });
      t.same(
        (await reopened.find({ owner: 'o1' })).map((d) => d.id),
        ['n1'],
        'indexes survive',
      );
      t.same(
        (await reopened.find({ text: 'hello again' })).map((d) => d.id),
        ['n1'],
        'an index declared later covers existing records',
      );
      t.same((await again.snapshots.get('s'))?.data, { s: { value: 'idle', context: { n: [1, 2, 3] } }, a: [['e1', { ok: true }]] });
      t.same(await again.snapshots.due([0], 10, 5), [{ key: 's', deadline: 10 }]);
    });
  }
}

/** Strings for generated records: short ones that collide, and long ones sharing a 150-character prefix. */
const BASE_STRINGS = ['', 'a', 'ab', 'b', 'B', 'é', 'x'.repeat(150) + 'a', 'x'.repeat(150) + 'b'];

const TYPE_RANK = (v: unknown) =>
  v === null || v === undefined ? 0 : typeof v === 'number' ? 1 : typeof v === 'string' ? 2 : 3;

function compareScalars(x: unknown, y: unknown): number {
  const rx = TYPE_RANK(x);
  const ry = TYPE_RANK(y);
  if (rx !== ry) return rx - ry;
  if (rx === 0) return 0;
  return (x as number) < (y as number) ? -1 : (x as number) > (y as number) ? 1 : 0;
}

/** MongoDB's order for scalar fields (missing = null < numbers < strings < booleans), then id ascending. */
function byReference(sort: Sort): (a: Doc, b: Doc) => number {
  const fields = 'id' in sort ? Object.entries(sort) : [...Object.entries(sort), ['id', 1] as const];
  return (a, b) => {
    for (const [field, dir] of fields) {
      const order = compareScalars(a[field], b[field]);
      if (order !== 0) return dir === -1 ? -order : order;
    }
    return 0;
  };
}

/**
 * Random records and random filters over indexed and non-indexed fields: the store must answer `find`,
 * `count`, sorted `find` and page walks exactly as mingo answers over the same records in memory, also
 * after random updates and deletes have moved index entries around.
 */
export async function plannerAgreement(
  t: Test,
  open: (t: Test) => Promise<Store>,
  strings: string[],
  runs: number,
): Promise<void> {
  const store = await open(t);
  const scalar = fc.oneof(
    fc.integer({ min: -3, max: 3 }),
    fc.constant(-0),
    fc.constantFrom(...strings),
    fc.constant(null),
    fc.boolean(),
  );
  const bound = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(...strings), fc.boolean());
  const doc = fc.record(
    {
      a: scalar,
      b: scalar,
      c: scalar,
      tags: fc.oneof(scalar, fc.array(scalar, { maxLength: 3 })),
      nested: fc.record({ x: scalar }),
    },
    { requiredKeys: [] },
  );
  const field = fc.constantFrom('a', 'b', 'c', 'tags', 'nested.x');
  const condition = fc.oneof(
    scalar,
    scalar.map((v) => ({ $eq: v })),
    fc.array(scalar, { maxLength: 3 }).map((vs) => ({ $in: vs })),
    fc.tuple(fc.constantFrom('$gt', '$gte', '$lt', '$lte'), bound).map(([op, v]) => ({ [op]: v })),
    fc.tuple(bound, bound).map(([low, high]) => ({ $gte: low, $lt: high })),
    scalar.map((v) => ({ $ne: v })),
  );
  const idCondition = fc.oneof(
    fc.constantFrom('r0', 'r3', 'r12', 'zz'),
    fc.array(fc.constantFrom('r1', 'r2', 'r10', 'q'), { maxLength: 3 }).map((vs) => ({ $in: vs })),
    fc.tuple(fc.constantFrom('$gt', '$lte'), fc.constantFrom('r1', 'r15', 'r3')).map(([op, v]) => ({ [op]: v })),
  );
  const leaf = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(field, condition).map(([f, c]) => ({ [f]: c }) as Filter) },
    { weight: 1, arbitrary: idCondition.map((c) => ({ id: c }) as Filter) },
  );
  const filter = fc.oneof(
    leaf,
    fc.array(leaf, { minLength: 1, maxLength: 3 }).map((leaves) => Object.assign({}, ...leaves) as Filter),
    fc.array(leaf, { minLength: 1, maxLength: 3 }).map((leaves) => ({ $and: leaves })),
    fc
      .tuple(leaf, fc.array(leaf, { minLength: 1, maxLength: 2 }))
      .map(([l, alternatives]) => ({ ...l, $or: alternatives })),
  );
  const sort = fc
    .uniqueArray(fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.constantFrom(1 as const, -1 as const)), {
      maxLength: 2,
      selector: ([f]) => f,
    })
    .map((entries) => Object.fromEntries(entries) as Sort);
  const change = fc.record({ at: fc.nat(), set: fc.record({ a: scalar, b: scalar }, { requiredKeys: [] }) });

  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(doc, { maxLength: 30 }),
      fc.array(filter, { minLength: 1, maxLength: 6 }),
      sort,
      fc.integer({ min: 1, max: 7 }),
      fc.array(change, { maxLength: 5 }),
      async (raw, filters, order, limit, changes) => {
        const collection = store.collection({
          name: `prop${run++}`,
          indexes: [
            { fields: ['a'] },
            { fields: ['a', 'b'] },
            { fields: ['tags'] },
            { fields: ['b', 'c'] },
            { fields: ['nested.x'] },
            // Conditions on `a` with `b` equal and no usable one on `c` are checked in this index's keys.
            { fields: ['b', 'c', 'a'] },
          ],
        });
        const docs: Doc[] = raw.map((d, i) => ({ id: `r${i}`, ...d }));
        for (const d of docs) await collection.insert(d);
        for (const { at, set } of changes) {
          if (docs.length === 0) break;
          const target = docs[at % docs.length];
          if (Object.keys(set).length === 0) continue;
          Object.assign(target, set);
          await collection.update({ id: target.id }, { $set: set });
        }
        const expectedIds = (f: Filter) => docs.filter((d) => new Query(f).test(d)).map((d) => d.id);
        for (const f of filters) {
          const expected = expectedIds(f).sort();
          const got = (await collection.find(f)).map((d) => d.id).sort();
          if (JSON.stringify(got) !== JSON.stringify(expected)) {
            throw new Error(`find ${JSON.stringify(f)}: got ${got}, expected ${expected}`);
          }
          if ((await collection.count(f)) !== expected.length) throw new Error(`count ${JSON.stringify(f)}`);
        }
        const [first] = filters;
        const sorted = docs
          .filter((d) => new Query(first).test(d))
          .sort(byReference(order))
          .map((d) => d.id);
        const found = (await collection.find(first, { sort: order })).map((d) => d.id);
        if (JSON.stringify(found) !== JSON.stringify(sorted))
          throw new Error(`sorted find: got ${found}, expected ${sorted}`);
        const walked: string[] = [];
        let cursor: string | undefined;
        do {
          const result = await collection.page(first, { sort: order, limit, cursor });
          walked.push(...result.items.map((d) => d.id));
          cursor = result.next ?? undefined;
        } while (cursor !== undefined);
        if (JSON.stringify(walked) !== JSON.stringify(sorted))
          throw new Error(`page walk: got ${walked}, expected ${sorted}`);
        const deleted = await collection.delete(first);
        if (deleted !== sorted.length) throw new Error(`delete ${JSON.stringify(first)} removed ${deleted}`);
        const left = docs.filter((d) => !sorted.includes(d.id));
        for (const f of filters.slice(1)) {
          const expected = left
            .filter((d) => new Query(f).test(d))
            .map((d) => d.id)
            .sort();
          const got = (await collection.find(f)).map((d) => d.id).sort();
          if (JSON.stringify(got) !== JSON.stringify(expected))
            throw new Error(`after delete, find ${JSON.stringify(f)}: got ${got}, expected ${expected}`);
        }
      },
    ),
    { numRuns: runs },
  );
  t.pass(`${runs} random data sets agree with mingo`);
}
