/**
 * A create that does not store its agent leaves no claim on its names (builder/names.ts `release`): its retry
 * gets the plain slug, and its names are free as an `agentId` at once, not a minute later. The edge is built
 * in-process on a store whose `agents` inserts the test can fail or hold (as a full disk, or a create racing
 * another edge's, would), and is reached over HTTP like the platform's.
 */
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { type Collection, type CollectionSpec, type Doc, type Store } from '../store/mod.js';
import { builderRecords, type BuilderRecords } from '../builder/records.js';
import { createBuilder } from '../builder/mod.js';
import { client, http } from './helpers/http.js';
import { inProcessEdge, type InProcessEdge } from './helpers/in-process-edge.js';

const TOKEN = 'agents-claims-test-operator-token';
const dir = mkdtempSync(join(tmpdir(), 'sb-claims-'));

/** What the next `agents` insert meets: an error (a store fault), or a wait the test ends (`null`: none). */
let nextInsert: ((doc: Doc) => Promise<void>) | null = null;

/** The store, its `agents` collection's inserts going through `nextInsert` first. */
function faultyAgents(store: Store): Store {
  const collection = <T extends Doc>(spec: CollectionSpec): Collection<T> => {
    const inner = store.collection<T>(spec);
    if (spec.name !== 'agents') return inner;
    return Object.assign(Object.create(inner) as Collection<T>, {
      insert: async (doc: T) => {
        const before = nextInsert;
        nextInsert = null;
        if (before) await before(doc);
        return inner.insert(doc);
      },
    });
  };
  return new Proxy(store, { get: (target, key) => (key === 'collection' ? collection : Reflect.get(target, key)) });
}

let records: BuilderRecords;
let built: InProcessEdge | undefined;
let api: ReturnType<typeof client>;
let accountId: string;

t.before(async () => {
  built = await inProcessEdge(dir, { operatorToken: TOKEN, servicesStore: faultyAgents });
  records = builderRecords(built.store);
  await built.edge.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(built.edge.server.address() as AddressInfo).port}`;
  const admin = (path: string, body: unknown) => http(base, 'POST', `/admin/v1${path}`, { body, headers: { authorization: `Bearer ${TOKEN}` } });
  accountId = (await admin('/accounts', { name: 'Claims' })).body.id;
  api = client(base, { 'x-api-key': (await admin('/keys', { account_id: accountId, scope: 'agents' })).body.key });
});
t.teardown(async () => {
  await built?.close();
});

/** The claims left on the account's names, by name. */
const claimsOn = async (...names: string[]) => (await records.nameClaims.find({ account_id: accountId })).filter((c) => names.includes(c.name)).map((c) => c.name);

t.test('a create whose agent the store fails to write leaves its names free: the retry has the plain slug, an agentId of them is made', async (t) => {
  nextInsert = async () => {
    throw new Error('EIO: the disk failed the write');
  };
  const failed = await api('POST', '/v1/agents', { name: 'Front desk' });
  t.equal(failed.status, 500, failed.text);
  t.same(await claimsOn('front-desk'), [], 'no claim left on the slug');
  const retried = await api('POST', '/v1/agents', { name: 'Front desk' });
  t.equal(retried.status, 201, retried.text);
  t.equal(retried.body.slug, 'front-desk', 'the retry has the plain slug');

  nextInsert = async () => {
    throw new Error('EIO: the disk failed the write');
  };
  t.equal((await api('POST', '/v1/agents', { name: 'Back office', agentId: 'bo-1' })).status, 500);
  t.same(await claimsOn('bo-1', 'back-office'), [], 'no claim left on the chosen id or the slug');
  const byId = await api('POST', '/v1/agents', { name: 'Other', agentId: 'back-office' });
  t.equal(byId.status, 201, `the failed create's slug is free as an agentId: ${byId.text}`);
  const bySlug = await api('POST', '/v1/agents', { name: 'bo-1' });
  t.equal(bySlug.body.slug, 'bo-1', "the failed create's id is free as a slug");
});

t.test('two creates of one agentId: the one that loses leaves its slug free, the one stored keeps both its names', async (t) => {
  // The first create to reach its insert waits there until the second has reached its own: both have claimed
  // their names, and the store decides between them by the id.
  let second: () => void = () => undefined;
  const bothThere = new Promise<void>((resolve) => (second = resolve));
  nextInsert = async () => {
    nextInsert = async () => second();
    await bothThere;
  };
  // An edge runs an account's creates one after another, so the race is between two edges (processes): the
  // second create goes through a builder of its own over the same store, as another edge's would.
  const otherEdge = createBuilder(faultyAgents(built!.store));
  const viaOtherEdge = otherEdge.agents.create({ accountId, projectId: null, keyId: 'other-edge' }, { name: 'Beta', description: '', agentId: 'raced' }).then(
    (r) => ({ status: 201, text: JSON.stringify(r.agent) }),
    (err: { statusCode?: number; message?: string }) => ({ status: err.statusCode ?? 500, text: String(err.message) }),
  );
  const [alpha, beta] = await Promise.all([api('POST', '/v1/agents', { name: 'Alpha', agentId: 'raced' }), viaOtherEdge]);
  t.same([alpha.status, beta.status].sort(), [201, 409], `one stored, the other 409: ${alpha.text} ${beta.text}`);
  const [won, lost] = alpha.status === 201 ? ['alpha', 'beta'] : ['beta', 'alpha'];
  t.same((await claimsOn('raced', 'alpha', 'beta')).sort(), [won, 'raced'].sort(), "the stored agent's claims, and only those");
  t.equal((await api('GET', `/v1/agents/${won}`)).body.agentId, 'raced', 'the stored agent answers to its slug');
  const byId = await api('POST', '/v1/agents', { name: 'Other', agentId: lost });
  t.equal(byId.status, 201, `the slug of the create that lost is free as an agentId: ${byId.text}`);
});
