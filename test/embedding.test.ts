import t from 'tap';
import { createEmbedderFromEnv, createOfflineEmbedder, createOpenAiEmbedder, dequantise, quantise, similarity } from '../actors/conversation/embedding.js';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { startEmbeddingsStandin } from './helpers/embeddings-standin.js';
import { platformFor } from './helpers/platform.js';

const cos = (e: Float32Array, f: Float32Array) => similarity(e, dequantise(quantise(f)));

t.test('offline embedder: unit vectors, shared words and word forms are close', async (t) => {
  const e = createOfflineEmbedder();
  const [a, b, c, empty] = await e.embed(['Where can I park my car?', 'Is there parking for cars nearby?', 'My invoice is wrong', 'the a of']);
  t.ok(Math.abs(a.reduce((s, x) => s + x * x, 0) - 1) < 1e-5, 'L2-normalised');
  t.ok(cos(a, b) > 0.3, `park/parking close: ${cos(a, b)}`);
  t.ok(cos(a, b) > cos(a, c) + 0.2, 'unrelated texts far');
  t.ok(empty.every((x) => x === 0), 'stop words only: the zero vector');
  t.same(Array.from((await e.embed(['Where can I park my car?']))[0]), Array.from(a), 'deterministic');
  t.equal(createEmbedderFromEnv({}).model, e.model, 'offline by default');
});

t.test('OpenAI-compatible adapter against a local stand-in', async (t) => {
  const standin = await startEmbeddingsStandin();
  t.teardown(() => standin.close());
  const e = createOpenAiEmbedder({ baseUrl: standin.url, apiKey: 'sk-test', model: 'embed-small' });
  const [park, invoice] = await e.embed(['park park', 'invoice']);
  t.same(standin.requests[0], { model: 'embed-small', input: ['park park', 'invoice'] });
  t.equal(standin.headers[0].authorization, 'Bearer sk-test');
  t.ok(park[0] > 0.99, 'data is placed by index, normalised');
  t.ok(invoice[1] > 0.99);
  t.same(await e.embed([]), [], 'nothing asked, nothing sent');
  t.equal(standin.requests.length, 1);
  standin.failWith = 500;
  await t.rejects(e.embed(['x']), /500/);
  standin.failWith = null;
  const fromEnv = createEmbedderFromEnv({ EMBEDDINGS_BASE_URL: standin.url, EMBEDDINGS_MODEL: 'm2' });
  t.equal(fromEnv.model, 'openai:m2');
});

t.test('semantic search through the adapter: a platform with EMBEDDINGS_BASE_URL', async (t) => {
  const standin = await startEmbeddingsStandin();
  t.teardown(() => standin.close());
  const p = await platformFor(t, { env: { EMBEDDINGS_BASE_URL: standin.url, EMBEDDINGS_API_KEY: 'sk-platform' } });
  const c = await chatProject(p, { name: 'Embed Co' });
  const get = conversationsClient(p, c, await conversationsKey(p, c));
  const since = new Date(Date.now() - 1000).toISOString();
  const park = (await c.chat('create', { initial_message: 'Where do I park? Is parking free?' })).body.conversation_id;
  const bill = (await c.chat('create', { initial_message: 'My invoice is wrong' })).body.conversation_id;
  await c.chat('close', { conversation_id: bill });
  const range = { start_time: since, end_time: new Date(Date.now() + 60_000).toISOString(), query_type: 'semantic' };
  // Vectors are written when the stand-in answers, after the turn; wait until both are searchable.
  let ids: string[] = [];
  for (let i = 0; i < 50 && ids.length < 2; i++) {
    ids = (await get({ ...range, query: 'parking' })).body.conversations.map((x: any) => x.id);
    if (ids.length < 2) await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(ids[0], park, 'most similar first');
  t.equal((await get({ ...range, query: 'invoice' })).body.conversations[0].id, bill, 'an ended conversation, from its final vector');
  t.ok(standin.headers.every((h) => h.authorization === 'Bearer sk-platform'));
  t.ok(standin.requests.some((r) => r.input[0] === 'parking'), 'the query is embedded by the same model');
});
