/**
 * The actor index projector on a real embedded store, fed journal entries directly: what each record holds
 * across steps, that an actor's next step is applied from what the projector wrote last (no read of its
 * record back), that anything else reads the store, that steps leaving the state as it is refresh the record
 * at most once a `REFRESH_MS`, however the steps are batched, and that two stores in one process keep apart.
 */
import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { openStore, type Collection, type Doc, type JournalEntry, type Store } from '../store/mod.js';
import { actorIndex, actorIndexProjector, REFRESH_MS } from '../actors/inspector/mod.js';
import { removeDir } from './helpers/platform.js';

const dirs: string[] = [];
async function freshStore(t: Test): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-actor-index-'));
  dirs.push(dir);
  const store = await openStore({ dataDir: dir });
  t.teardown(() => store.close());
  return store;
}
t.teardown(() => dirs.forEach(removeDir));

let seq = 0;
/** A step of `key`; by default each version a second after the one before. */
function entry(key: string, version: number, value: unknown, tenant?: { account_id: string; project_id: string }, at = Date.UTC(2026, 11, 3, 0, 0, version)): JournalEntry {
  const [kind, id] = key.split('/');
  return { seq: ++seq, key, kind, id, shard: 1, version, at, value, events: tenant ? [{ type: 'x.started', data: tenant }] : [] };
}

/** `store` with its actor index's `get` counted, as the projector sees it. */
function counting(store: Store): { store: Store; gets: () => number } {
  let gets = 0;
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'collection') return Reflect.get(target, prop, receiver);
      return (spec: { name: string }) => {
        const c = target.collection(spec as never) as Collection<Doc>;
        if (spec.name !== 'inspector_actors') return c;
        return new Proxy(c, {
          get(ct, cp, cr) {
            if (cp !== 'get') return Reflect.get(ct, cp, cr);
            return (id: string) => {
              gets++;
              return ct.get(id);
            };
          },
        });
      };
    },
  });
  return { store: wrapped, gets: () => gets };
}

const tenant = { account_id: 'acc1', project_id: 'prj1' };

t.test('each step moves the record; the tenant is kept once seen; the next step reads nothing back', async (t) => {
  const raw = await freshStore(t);
  const { store, gets } = counting(raw);
  await actorIndexProjector.apply([entry('counter/a', 1, 'idle', tenant)], store);
  t.equal(gets(), 1, 'the first step reads the store (the actor may be indexed already)');
  await actorIndexProjector.apply([entry('counter/a', 2, { busy: 'working' })], store);
  await actorIndexProjector.apply([entry('counter/a', 3, { busy: 'done' }), entry('counter/a', 4, 'idle')], store);
  t.equal(gets(), 1, 'the steps that follow are applied from what the projector wrote');
  t.match(await actorIndex(raw).get('counter/a'), {
    kind: 'counter',
    actor_id: 'a',
    account_id: 'acc1',
    project_id: 'prj1',
    state: 'idle',
    states: ['idle'],
    version: 4,
    updated_at: new Date(Date.UTC(2026, 11, 3, 0, 0, 4)).toISOString(),
  });

  await actorIndexProjector.apply([entry('counter/a', 3, 'stale')], store);
  t.equal((await actorIndex(raw).get('counter/a'))?.version, 4, 'an entry seen again writes nothing older');
  const before = gets();
  await actorIndexProjector.apply([entry('counter/a', 6, 'later')], store);
  const gap = gets();
  t.equal(gap, before + 1, 'a gap (another runner applied version 5) reads the store');
  t.match(await actorIndex(raw).get('counter/a'), { version: 6, state: 'later', project_id: 'prj1' });
  await actorIndexProjector.apply([entry('counter/a', 6, 'later')], store);
  await actorIndexProjector.apply([entry('counter/a', 7, 'idle')], store);
  t.equal(gets(), gap + 1, 'an entry seen again leaves what the projector remembers: the next step reads nothing');
});

t.test('a rebuild from the same entries equals the index built live', async (t) => {
  const store = await freshStore(t);
  const steps = [
    entry('counter/b', 1, 'idle', tenant),
    entry('counter/c', 1, 'idle', { account_id: 'acc2', project_id: 'prj2' }),
    entry('counter/b', 2, { busy: 'x' }),
    entry('counter/c', 2, 'done'),
    entry('counter/b', 3, 'idle'),
  ];
  for (const e of steps) await actorIndexProjector.apply([e], store);
  const live = await actorIndex(store).find({});
  await actorIndexProjector.reset(store);
  t.same(await actorIndex(store).find({}), [], 'reset empties the index');
  await actorIndexProjector.apply(steps, store);
  t.same(await actorIndex(store).find({}), live);
});

t.test('steps in the same state refresh the record once a REFRESH_MS; a change of state or tenant at once', async (t) => {
  const raw = await freshStore(t);
  const { store, gets } = counting(raw);
  const t0 = Date.UTC(2026, 11, 3, 1, 0, 0);
  const at = (ms: number) => new Date(t0 + ms).toISOString();
  const record = () => actorIndex(raw).get('conversation/e');
  await actorIndexProjector.apply([entry('conversation/e', 1, 'idle', tenant, t0)], store);
  await actorIndexProjector.apply([entry('conversation/e', 2, 'idle', undefined, t0 + 300)], store);
  await actorIndexProjector.apply([entry('conversation/e', 3, 'idle', undefined, t0 + 600), entry('conversation/e', 4, 'idle', undefined, t0 + REFRESH_MS - 1)], store);
  t.match(await record(), { version: 1, updated_at: at(0), state: 'idle' }, 'steps within a REFRESH_MS of the record in its state leave it');
  await actorIndexProjector.apply([entry('conversation/e', 5, 'idle', undefined, t0 + REFRESH_MS)], store);
  t.match(await record(), { version: 5, updated_at: at(REFRESH_MS) }, 'the first step a REFRESH_MS after the record refreshes it');
  await actorIndexProjector.apply([entry('conversation/e', 6, 'ended', undefined, t0 + REFRESH_MS + 10)], store);
  t.match(await record(), { version: 6, state: 'ended', updated_at: at(REFRESH_MS + 10) }, 'a change of state is written at once');
  t.equal(gets(), 1, 'the steps that did not refresh the record are remembered: the next one reads nothing back');

  await actorIndexProjector.apply([entry('counter/f', 1, 'idle', undefined, t0)], store);
  await actorIndexProjector.apply([entry('counter/f', 2, 'idle', tenant, t0 + 10)], store);
  t.match(await actorIndex(raw).get('counter/f'), { version: 2, project_id: 'prj1' }, 'a step that names the tenant first is written at once');
});

t.test('however the steps are batched, live or rebuilt, the index is the same', async (t) => {
  const store = await freshStore(t);
  const states = ['idle', { busy: 'working' }, 'ended'];
  const step = fc.record({ actor: fc.constantFrom('counter/g', 'session/h'), state: fc.nat(states.length - 1), gap: fc.nat(2 * REFRESH_MS), tenant: fc.boolean() });
  const t0 = Date.UTC(2026, 11, 3, 2, 0, 0);
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), fc.array(fc.nat(30), { maxLength: 10 }), async (steps, cuts) => {
      const versions = new Map<string, number>();
      let time = t0;
      const entries = steps.map((s) => {
        time += s.gap;
        const version = (versions.get(s.actor) ?? 0) + 1;
        versions.set(s.actor, version);
        return entry(s.actor, version, states[s.state], s.tenant ? tenant : undefined, time);
      });
      await actorIndexProjector.reset(store);
      await actorIndexProjector.apply(entries, store);
      const whole = await actorIndex(store).find({});
      // The same entries in batches cut at the given places, as a runner's cycles would read them.
      await actorIndexProjector.reset(store);
      const at = [...new Set(cuts.filter((c) => c > 0 && c < entries.length))].sort((a, b) => a - b);
      let from = 0;
      for (const cut of [...at, entries.length]) {
        await actorIndexProjector.apply(entries.slice(from, cut), store);
        from = cut;
      }
      const batched = await actorIndex(store).find({});
      if (!isDeepStrictEqual(batched, whole)) throw new Error(`batched ${JSON.stringify(batched)} != whole ${JSON.stringify(whole)}`);
    }),
    { numRuns: 60 },
  );
  t.pass('60 step sequences, each batched two ways');
});

t.test('two stores in one process: what the projector remembers of one is not taken for the other', async (t) => {
  const a = await freshStore(t);
  const b = await freshStore(t);
  await actorIndexProjector.apply([entry('counter/d', 1, 'idle', tenant)], a);
  // Store b never saw version 1 of the same key (another platform in the same process).
  await actorIndexProjector.apply([entry('counter/d', 2, 'idle')], b);
  t.match(await actorIndex(b).get('counter/d'), { version: 2, project_id: null, account_id: null });
});
