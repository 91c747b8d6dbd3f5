/**
 * A poisoned journal entry, with the platform's own projection thread: an entry whose projection throws every
 * time is set aside after its retries, and the projector goes on past it, the others untouched; the admin API's
 * projection status counts it, and the error log names it without the entry's content.
 */
import t from 'tap';
import { join } from 'node:path';
import { poisonAppliedOf } from './helpers/poison-projector.js';
import { http } from './helpers/http.js';
import { waitForProjections } from './helpers/projections.js';
import { DIST, removeDir, startPlatformWithStore } from './helpers/platform.js';

const POISON = join(DIST, 'test', 'helpers', 'poison-projector.js');

t.test('an entry a projector fails on every time is set aside: the projector goes on, the status counts it', async (t) => {
  const { p, store } = await startPlatformWithStore({ env: { PROJECTION_MODULES: POISON } });
  t.teardown(async () => {
    await p.stop();
    await store.close();
    removeDir(p.dataDir);
  });
  const append = (id: string, text: string) => store.journal.append({ key: `poison/${id}`, kind: 'poison', id, shard: -1, version: 0, value: null, events: [{ type: 'said', data: { text } }] });
  await append('good-1', 'hello');
  await append('bad', 'a tenant text that trips the projector');
  await append('good-2', 'goodbye');
  const entries = (await store.journal.read(0, 10_000)).filter((e) => e.kind === 'poison');
  const bad = entries.find((e) => e.id === 'bad')!;

  // The runner retries with its backoff (about a second and a half in all), then sets the entry aside.
  await waitForProjections(p);
  const res = await http(p.edge, 'GET', '/admin/v1/runtime/projections', { headers: { authorization: `Bearer ${p.operatorToken}` } });
  t.equal(res.status, 200);
  t.match(res.body, { caughtUp: true });
  const poison = res.body.projections.find((x: { name: string }) => x.name === 'test-poison');
  t.match(poison, { name: 'test-poison', checkpoint: res.body.head, behind: 0, skipped: 1 }, 'past the entry, which is counted');
  for (const other of res.body.projections.filter((x: { name: string }) => x.name !== 'test-poison')) {
    t.match(other, { checkpoint: res.body.head, skipped: 0 }, `${other.name}: untouched`);
  }
  store.refresh();
  t.same((await poisonAppliedOf(store).find({}, { sort: { id: 1 } })).map((d) => Number(d.id)).sort((a, b) => a - b), entries.filter((e) => e.id !== 'bad').map((e) => e.seq), 'the entries around it applied');

  const lines = p.stdout().split('\n').filter((l) => l.includes('projection entry set aside'));
  t.equal(lines.length, 1, 'logged once');
  t.match(JSON.parse(lines[0]), { level: 50, projector: 'test-poison', seq: bad.seq, key: 'poison/bad', err: 'RangeError: Maximum call stack size exceeded' }, 'at error level, with the projection, the entry and the error');
  t.notMatch(p.stdout(), /tenant text/, 'and none of the entry\'s content');
});
