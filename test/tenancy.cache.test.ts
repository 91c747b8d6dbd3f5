/**
 * The tenancy cache in-process (`tenancy/cache.ts` through `platform/services.ts`), on the embedded store with
 * every collection read counted: a credential, account, project or settings record read once serves later
 * checks without a store read; an unknown credential is not cached (the same record id works once it exists);
 * a wrong secret for a cached record is still refused; entries expire after the TTL and the least recently
 * used go first past the bound; an invalidation drops an entry, including one whose store read was in flight.
 */
import t, { type Test } from 'tap';
import type { Collection, CollectionSpec, Doc, Store } from '../store/mod.js';
import { createServices } from '../platform/services.js';
import { hashSecret, issueCredential } from '../platform/secrets.js';
import { TtlLru } from '../tenancy/cache.js';
import type { ApiKey } from '../tenancy/keys.js';
import { storeFor } from './helpers/store.js';

/** A store whose collections count their reads (get, findOne, find) by collection name. */
function counting(store: Store): { store: Store; reads: Map<string, number> } {
  const reads = new Map<string, number>();
  const count = (name: string) => reads.set(name, (reads.get(name) ?? 0) + 1);
  const wrapped: Store = Object.create(store);
  wrapped.collection = <T extends Doc>(spec: CollectionSpec): Collection<T> => {
    const c = store.collection<T>(spec);
    const w: Collection<T> = Object.create(c);
    w.get = (id) => (count(spec.name), c.get(id));
    w.findOne = (f, o) => (count(spec.name), c.findOne(f, o));
    w.find = (f, o) => (count(spec.name), c.find(f, o));
    return w;
  };
  return { store: wrapped, reads };
}

async function setup(t: Test, ttlMs = 10_000, maxEntries = 100) {
  const raw = await storeFor(t, 'sb-cache-');
  let clock = 1_000;
  const { store, reads } = counting(raw);
  const services = createServices(store, { ttlMs, maxEntries, now: () => clock });
  return { raw, services, reads, advance: (ms: number) => (clock += ms) };
}

t.test('a verified key, account, project and settings are read from the store once, then from the cache', async (t) => {
  const { services, reads, advance } = await setup(t);
  const account = await services.accounts.create({ name: 'Cached Co' });
  const { record, secret } = await services.keys.issue({ account_id: account.id, scope: 'chat', project_id: null, permissions: [] });
  reads.clear();
  for (let i = 0; i < 5; i++) t.equal((await services.keys.verify(secret))?.id, record.id);
  t.equal(reads.get('api_keys'), 1, 'five checks, one store read');
  t.equal(services.tenancy.stats().keys.hits, 4);

  t.equal(await services.keys.verify(`${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`), null, 'a wrong secret for a cached record is refused');
  t.equal(reads.get('api_keys'), 1, 'refused by the constant-time hash check, without a store read');

  for (let i = 0; i < 3; i++) t.equal((await services.accounts.resolve(account.slug))?.id, account.id);
  t.equal(reads.get('accounts'), 2, 'the slug form: one miss by id, one by slug, then cached');
  for (let i = 0; i < 3; i++) t.same(await services.settings.get('agent-x'), { show_transcripts: true, chunked_streaming: false, pii_redaction: true });
  t.equal(reads.get('project_settings'), 1);

  advance(10_001);
  await services.keys.verify(secret);
  t.equal(reads.get('api_keys'), 2, 'read again once the entry is older than the TTL');
});

t.test('an unknown credential is not cached: the same record id works as soon as it exists', async (t) => {
  const { raw, services, reads } = await setup(t);
  const secret = issueCredential('sbk', 'key_AAAAAAAAAAAAAAAA');
  t.equal(await services.keys.verify(secret), null);
  t.equal(await services.keys.verify(secret), null);
  t.equal(reads.get('api_keys'), 2, 'each unknown lookup reads the store');
  await raw.collection<ApiKey>({ name: 'api_keys', indexes: [{ fields: ['account_id'] }] }).insert({
    id: 'key_AAAAAAAAAAAAAAAA',
    hash: hashSecret(secret),
    account_id: 'acc_x',
    scope: 'chat',
    project_id: null,
    permissions: [],
    created_at: new Date().toISOString(),
  });
  t.equal((await services.keys.verify(secret))?.id, 'key_AAAAAAAAAAAAAAAA', 'the new key works at once');
});

t.test('invalidation drops the entry, here and for a store read in flight', async (t) => {
  const { services, reads } = await setup(t);
  const account = await services.accounts.create({ name: 'Revoked Co' });
  const { record, secret } = await services.keys.issue({ account_id: account.id, scope: 'chat', project_id: null, permissions: [] });
  await services.keys.verify(secret);
  await services.keys.remove(record.id);
  t.equal((await services.keys.verify(secret))?.id, record.id, 'without an invalidation the cache still holds it (what the admin API must never leave)');
  await services.tenancy.invalidate({ kind: 'key', id: record.id });
  t.equal(await services.keys.verify(secret), null, 'invalidated: read again, and gone');

  // A read that began before an invalidation answers its caller but is not cached.
  const lru = new TtlLru<string>(10_000, 10, () => 0);
  let release!: (v: string) => void;
  const pending = lru.read('a', () => new Promise<string>((r) => (release = r)));
  lru.invalidate('a');
  release('stale');
  t.equal(await pending, 'stale');
  t.equal(lru.get('a'), undefined, 'the value read before the invalidation was not kept');
  t.ok(reads.get('api_keys')! >= 2);
});

t.test('each cache is bounded, least recently used out first; TTL 0 turns caching off', async (t) => {
  const lru = new TtlLru<number>(10_000, 2, () => 0);
  lru.set('a', 1);
  lru.set('b', 2);
  t.equal(lru.get('a'), 1, 'a is now the most recently used');
  lru.set('c', 3);
  t.same([lru.get('a'), lru.get('b'), lru.get('c')], [1, undefined, 3], 'b, the least recently used, went');
  t.equal(lru.stats().size, 2);

  // A hit marks its entry, and eviction passes over a marked entry once (unmarking it) instead of moving every
  // hit to the end: every entry was hit, and the value just set still stays.
  const marked = new TtlLru<number>(10_000, 2, () => 0);
  marked.set('a', 1);
  marked.set('b', 2);
  marked.get('a');
  marked.get('b');
  marked.set('c', 3);
  t.same([marked.get('a'), marked.get('b'), marked.get('c')], [undefined, 2, 3], 'a and b had their second chance; a, first, went');
  marked.set('d', 4);
  t.same([marked.get('b'), marked.get('c'), marked.get('d')], [undefined, 3, 4], 'b, unmarked by the last pass, goes before c, hit since');

  const { services, reads } = await setup(t, 0);
  const account = await services.accounts.create({ name: 'Uncached Co' });
  const { secret } = await services.keys.issue({ account_id: account.id, scope: 'chat', project_id: null, permissions: [] });
  reads.clear();
  for (let i = 0; i < 3; i++) await services.keys.verify(secret);
  t.equal(reads.get('api_keys'), 3, 'every check reads the store');
});

t.test("an agent's real-time config pages are read once per agent, and a patch invalidates them before it returns", async (t) => {
  const { services, reads, advance } = await setup(t);
  const agent = { id: 'agt_cached', account_id: 'acc_x' } as Parameters<typeof services.builder.realtimeConfigs.patch>[0];
  const { realtimeConfigs } = services.builder;
  await realtimeConfigs.patch(agent, 'hours', { open: 9, close: 17 });
  await realtimeConfigs.patch(agent, 'live', { open: 10 });
  reads.clear();
  for (let i = 0; i < 5; i++) t.same(await realtimeConfigs.effective(agent.id, 'live'), { open: 10, close: 17 });
  t.same(await realtimeConfigs.effective(agent.id, 'sandbox'), { open: 9, close: 17 }, 'the environments share the cached pages');
  t.equal(reads.get('realtime_configs'), 1, 'six turns, one store read');
  t.equal(services.tenancy.stats().realtimeConfigs.hits, 5);

  const invalidations = services.tenancy.stats().realtimeConfigs.invalidations;
  await realtimeConfigs.patch(agent, 'live', { open: 8 });
  t.same(await realtimeConfigs.effective(agent.id, 'live'), { open: 8, close: 17 }, 'the next turn sees the change');
  t.equal(services.tenancy.stats().realtimeConfigs.invalidations, invalidations + 1, 'the patch invalidated them');
  const merged = await realtimeConfigs.effective(agent.id, 'live');
  t.equal(await realtimeConfigs.effective(agent.id, 'live'), merged, 'the turns share one merge of the cached pages');
  t.ok(Object.isFrozen(merged), 'frozen, as it is shared');
  t.throws(() => ((merged as Record<string, unknown>).open = 1), TypeError, 'a turn cannot change what the next one sees');
  t.not(await realtimeConfigs.effective(agent.id, 'sandbox'), merged, 'each environment has its own');
  await realtimeConfigs.patch(agent, 'hours', { close: 18 });
  t.same(await realtimeConfigs.effective(agent.id, 'live'), { open: 8, close: 18 }, 'a patch replaces the merge');

  t.same(await realtimeConfigs.effective('agt_without_pages', 'live'), {});
  const before = reads.get('realtime_configs');
  t.same(await realtimeConfigs.effective('agt_without_pages', 'live'), {});
  t.equal(reads.get('realtime_configs'), before, 'an agent without pages is cached too (no page is a result)');

  await services.tenancy.invalidate({ kind: 'all' });
  await realtimeConfigs.effective(agent.id, 'live');
  t.equal(reads.get('realtime_configs'), before! + 1, '`all` drops them');
  advance(10_001);
  await realtimeConfigs.effective(agent.id, 'live');
  t.equal(reads.get('realtime_configs'), before! + 2, 'and so does the TTL');
});
