import t from 'tap';
import type { Store } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { conversationV3 } from '../actors/conversation/view.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { eventually } from './helpers/eventually.js';
import { admin } from './helpers/tenants.js';
import { waitForProjections } from './helpers/projections.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

const FUNCTIONS = {
  start: `function start(conv) {
    conv.state.turns = 0;
    conv.state.customer = conv.integration_attributes.customer ?? null;
  }`,
  turn: `function turn(conv, message) {
    conv.state.turns += 1;
    if (message === 'count') return 'turns=' + conv.state.turns;
    if (message === 'who am i') return 'customer=' + conv.state.customer + ' tier=' + (conv.integration_attributes.tier ?? 'none');
    if (message === 'meta') return 'ref=' + conv.metadata.ref;
    if (message === 'hours') return 'open at ' + conv.variables.open_hour;
    if (message === 'explode') throw new Error('boom');
    if (message === 'spin') { while (true) {} }
    if (message === 'variant') return 'variant=' + (conv.variant ? conv.variant.name : 'none');
    if (message === 'builtins') return JSON.stringify([conv.state.from_, conv.state.to, conv.state.conversation_id, 'call_sid' in conv.state]);
  }`,
  end: `function end(conv) { conv.state.ended_by_function = true; }`,
};

let p: Platform;
let c: ChatProject;
let store: Store;
let records: ReturnType<typeof conversationRecords>;

t.before(async () => {
  ({ p, store } = await startPlatformWithStore({ env: { CONVERSATION_IDLE_MS: '1500', FUNCTION_TIMEOUT_MS: '1000' } }));
  c = await chatProject(p, { functions: FUNCTIONS, variants: ['London', 'Paris'] });
  // The test reads what the conversation actor recorded, from the same data dir (LMDB is multi-process).
  records = conversationRecords(store);
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

/** The conversation record, once the projections have caught up with the journal. */
const record = async (id: string) => {
  await waitForProjections(p);
  return records.get(id);
};

t.test('a full chat: greeting, knowledge answers, out-of-domain, goodbye, and the record', async (t) => {
  const created = await c.chat('create', { integration_attributes: { customer: 'C-42' } });
  t.equal(created.status, 200, created.text);
  t.match(created.body, { conversation_id: String, response: 'Hello, welcome to Acme Dental!' });
  const id = created.body.conversation_id;
  const r1 = await c.chat('respond', { conversation_id: id, message: 'When are you opening on Monday?' });
  t.same(r1.body, { conversation_id: id, response: 'We are open from 9am to 5pm, Monday to Friday.', end_conversation: false });
  const r2 = await c.chat('respond', { conversation_id: id, message: 'Is there somewhere to park the car?' });
  t.equal(r2.body.response, 'Free parking is available behind the building.', 'word forms: park/parking');
  const ood = await c.chat('respond', { conversation_id: id, message: 'What is the capital of Peru?' });
  t.match(ood.body.response, /can't help/);
  const bye = await c.chat('respond', { conversation_id: id, message: 'Thanks, goodbye!' });
  t.equal(bye.body.end_conversation, true);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hello?' })).status, 409, 'respond to an ended conversation is a 4xx');

  const rec = (await record(id))!;
  t.match(rec, {
    id, account_id: c.accountId, project_id: c.agentId, environment: 'live', channel: 'CHAT', in_progress: false,
    num_turns: 5, num_ood: 1, handoff: false, handoff_reason: '', handoff_destination: '', num_silences: 0,
    variant_id: String, variant_name: 'London', end_reason: 'agent',
  });
  t.match(rec.started_at, /^\d{4}-\d\d-\d\dT/);
  t.ok(rec.total_duration >= 0 && typeof rec.polyai_duration === 'number');
  t.same(rec.turns.map((x) => x.user_input), ['', 'When are you opening on Monday?', 'Is there somewhere to park the car?', 'What is the capital of Peru?', 'Thanks, goodbye!']);
  t.same(rec.turns.map((x) => x.is_ood), [false, false, false, true, false]);
  t.ok(rec.turns.every((x) => typeof x.latency === 'number' && x.agent_response_datetime >= x.user_input_datetime));
  t.same(rec.turns[1].intents, ['topic:Opening hours']);
  t.same(conversationV3(rec, { version: 'v3', showTranscripts: false, includeLatency: false }).metrics.CALL_TURN, rec.turns.map((x) => x.user_input_datetime));
  t.type(rec.metrics.CALL_DURATION, 'string');
  t.match(rec.state, { customer: 'C-42', turns: 4, ended_by_function: true, conversation_id: id });
});

t.test('handoff when the user asks for a person', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  const r = await c.chat('respond', { conversation_id: id, message: 'Can I speak to a real person please' });
  t.same(r.body.handoff, { destination: 'live_agent', reason: 'user_requested' });
  t.equal(r.body.end_conversation, false);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' })).status, 409, 'handed off');
  t.match(await record(id), { handoff: true, handoff_destination: 'live_agent', handoff_reason: 'user_requested', in_progress: true });
  t.same((await c.chat('close', { conversation_id: id })).body, { success: true });
  t.match(await record(id), { in_progress: false, end_reason: 'closed' });
});

t.test('handoff destination and reason come from real-time config', async (t) => {
  await c.api('PATCH', `/v1/agents/${c.agentId}/real-time-configs/live/variables`, { variables: { handoff_destination: '+441234567890', handoff_reason: 'billing' } });
  const id = (await c.chat('create', {})).body.conversation_id;
  const r = await c.chat('respond', { conversation_id: id, message: 'I need a human' });
  t.same(r.body.handoff, { destination: '+441234567890', reason: 'billing' });
  await c.api('PATCH', `/v1/agents/${c.agentId}/real-time-configs/live/variables`, { variables: { handoff_destination: null, handoff_reason: null } });
});

t.test('functions: state across turns, integration attributes, metadata', async (t) => {
  const id = (await c.chat('create', { integration_attributes: { customer: 'C-7' } })).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'count' })).body.response, 'turns=1');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'count' })).body.response, 'turns=2');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'who am i' })).body.response, 'customer=C-7 tier=none', 'attributes from the first turn, kept in state');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'who am i', integration_attributes: { tier: 'gold' } })).body.response, 'customer=C-7 tier=gold', 'later turns may add');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'meta', metadata: { ref: 'R9' } })).body.response, 'ref=R9', "this message's metadata");
  const rec = (await record(id))!;
  t.same(rec.turns[5].metadata, { ref: 'R9' });
  t.same(rec.integration_attributes, { customer: 'C-7', tier: 'gold' });
});

t.test("functions: a chat's state starts with the built-in keys (no numbers, no call sid); the record shows the same", async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'builtins' })).body.response, JSON.stringify(['', '', id, false]), 'conv.state in a turn');
  t.same((await record(id))!.state, { from_: '', to: '', conversation_id: id, turns: 1, customer: null });
});

t.test('a throwing or looping function is a function error and the conversation carries on', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  const boom = await c.chat('respond', { conversation_id: id, message: 'explode' });
  t.equal(boom.status, 200);
  t.match(boom.body.response, /can't help/, 'the responder answered instead');
  const spin = await c.chat('respond', { conversation_id: id, message: 'spin' });
  t.equal(spin.status, 200);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'count' })).body.response, 'turns=1', 'state survived: the failed turns changed nothing');
  t.equal((await record(id))!.function_errors, 2);
});

t.test('real-time config changes apply at the next turn, without a publish', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  await c.api('PATCH', `/v1/agents/${c.agentId}/real-time-configs/live/variables`, { variables: { open_hour: 9 } });
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours' })).body.response, 'open at 9');
  await c.api('PATCH', `/v1/agents/${c.agentId}/real-time-configs/live/variables`, { variables: { open_hour: 7 } });
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours' })).body.response, 'open at 7');
});

t.test('variants: the default, a requested one, an unknown one', async (t) => {
  const variants = (await c.api('GET', `/v1/agents/${c.agentId}/branches/main/variants`)).body.variants;
  const paris = variants.find((v: any) => v.name === 'Paris');
  const def = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: def, message: 'variant' })).body.response, 'variant=London');
  const chosen = (await c.chat('create', { variant_id: paris.id })).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: chosen, message: 'variant' })).body.response, 'variant=Paris');
  t.match(await record(chosen), { variant_id: paris.id, variant_name: 'Paris' });
  t.equal((await c.chat('create', { variant_id: 'var_nope' })).status, 400);
  // a connector may fix the variant
  const conn = await admin(p)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'chat', environment: 'live', variant_id: paris.id });
  const viaConnector = (await c.chat('create', {}, { token: conn.body.token })).body.conversation_id;
  t.equal((await record(viaConnector))!.variant_name, 'Paris');
});

t.test('channels, languages, initial message, slugs', async (t) => {
  const web = await c.chat('create', { channel: 'webchat', asr_lang_code: 'en', tts_lang_code: 'en-GB', initial_message: 'When do you open?' });
  t.equal(web.status, 200);
  t.equal(web.body.response, 'We are open from 9am to 5pm, Monday to Friday.', 'the reply to the initial message');
  t.match(await record(web.body.conversation_id), { channel: 'WEBCHAT', asr_lang_code: 'en', tts_lang_code: 'en-GB', num_turns: 2 });
  for (const [channel, label] of [['sms', 'SMS'], ['whatsapp', 'WHATSAPP'], ['api', 'API']]) {
    const r = await c.chat('create', { channel });
    t.equal((await record(r.body.conversation_id))!.channel, label);
  }
  t.equal((await c.chat('create', { channel: 'fax' })).status, 400);
  t.equal((await c.chat('create', { tts_lang_code: 'not a code' })).status, 400);
  t.equal((await c.chat('create', { tts_lang_code: 'en' })).status, 400, 'tts_lang_code needs a region (contract 4.6)');
  t.equal((await c.chat('create', { tts_lang_code: 'es-419' })).status, 200, 'a numeric region is one');
  const slugs = await c.chat('create', {}, { account: c.accountSlug, project: c.agentSlug });
  t.equal(slugs.status, 200, 'slug forms of account and project');
});

t.test('errors', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { message: 'hi' })).status, 400, 'missing conversation_id');
  t.match((await c.chat('respond', { message: 'hi' })).body, { error_message: /conversation_id is required/ });
  // Each refusal says what is wrong with the field, at the limits docs/chat.md gives.
  for (const [body, said] of [
    [{ conversation_id: 123, message: 'hi' }, /conversation_id must be a string/],
    [{ conversation_id: 'x'.repeat(129), message: 'hi' }, /conversation_id is at most 128 characters/],
    [{ conversation_id: id, message: 'x'.repeat(32_769) }, /message is at most 32768 characters/],
  ] as const) {
    const r = await c.chat('respond', body);
    t.equal(r.status, 400);
    t.match(r.body.error_message, said);
  }
  t.match((await c.chat('create', { initial_message: 'x'.repeat(32_769) })).body.error_message, /initial_message is at most 32768 characters/);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'x'.repeat(32_768) })).status, 200, 'a message of 32,768 characters is taken');
  t.equal((await c.chat('respond', { conversation_id: 'nope', message: 'hi' })).status, 404, 'unknown conversation');
  t.equal((await c.chat('close', { conversation_id: 'nope' })).status, 404);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' }, { key: 'sbk_bad' })).status, 401, 'bad key');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' }, { token: 'sbc_bad' })).status, 401, 'bad token');
  const other = await chatProject(p, { name: 'Other Co' });
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' }, { token: other.token })).status, 401, "another project's token");
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' })).status, 200, 'its own project may (the edge now knows it)');
  t.equal((await other.chat('respond', { conversation_id: id, message: 'hi' })).status, 404, "another project's conversation is unknown");
  t.equal((await c.chat('create', {}, { version: 'v9' })).status, 404);
  t.equal((await c.chat('create', {}, { project: 'agent-nope' })).status, 404);
  t.same((await c.chat('close', { conversation_id: id })).body, { success: true });
  t.same((await c.chat('close', { conversation_id: id })).body, { success: true }, 'closing twice is fine');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' })).status, 409);
});

t.test("a connector reaches only its own environment's conversations (contract 5, rule 2)", async (t) => {
  const sandbox = (await admin(p)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'chat', environment: 'sandbox' })).body.token;
  const live = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: live, message: 'hi' }, { token: sandbox })).status, 404, "the sandbox connector: a live conversation is unknown");
  t.equal((await c.chat('close', { conversation_id: live }, { token: sandbox })).status, 404, 'nor can it close it');
  t.equal((await c.chat('respond', { conversation_id: live, message: 'hi' })).status, 200, 'the live connector carries on');
  const created = await c.chat('create', {}, { token: sandbox });
  t.equal(created.status, 200, 'the sandbox connector starts its own');
  const own = created.body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: own, message: 'hi' })).status, 404, 'which the live connector does not reach');
  t.equal((await c.chat('respond', { conversation_id: own, message: 'hi' }, { token: sandbox })).status, 200, 'and the sandbox connector does');
});

t.test('a new conversation runs what is active in its environment: promoted, then rolled back (contract 3.2)', async (t) => {
  const v = await chatProject(p, { name: 'Versions Co', behavior: 'Hello from version one.' });
  const base = `/v1/agents/${v.agentId}`;
  const greeting = async () => (await v.chat('create', {})).body.response as string;
  t.match(await greeting(), /version one/);
  const first = (await v.api('GET', `${base}/deployments/active`)).body.activeDeployments.live;
  await v.api('PATCH', `${base}/branches/main/behavior`, { behavior: 'Hello from version two.' });
  const published = (await v.api('POST', `${base}/deployments/publish`, {})).body.deployment;
  t.match(await greeting(), /version one/, 'published to sandbox only: live runs what it ran');
  await v.api('POST', `${base}/deployments/${published.id}/promote`);
  t.match(await greeting(), /version one/, 'promoted to pre-release: live still runs what it ran');
  await v.api('POST', `${base}/deployments/${published.id}/promote`);
  t.match(await greeting(), /version two/, 'promoted again: it moved on to live');
  const rolled = await v.api('POST', `${base}/deployments/${first.id}/rollback`, { deploymentMessage: 'back' });
  t.equal(rolled.body.deployment.id, first.id, 'live reverted to the given deployment');
  t.match(await greeting(), /version one/, 'and new conversations run it');
});

t.test('nothing deployed: each turn runs main\'s draft as it is then; a deployment made meanwhile is taken up at the next turn, and kept', async (t) => {
  const agentId = (await c.api('POST', '/v1/agents', { name: 'Drafted' })).body.agentId;
  const base = `/v1/agents/${agentId}`;
  const says = (what: string) => c.api('PUT', `${base}/branches/main/functions/turn`, { code: `function turn(conv, message) { return '${what}'; }` });
  await says('draft one');
  const a = admin(p);
  const key = (await a('POST', '/keys', { account_id: c.accountId, scope: 'chat', project_id: agentId })).body.key;
  const token = (await a('POST', '/connectors', { account_id: c.accountId, project_id: agentId, kind: 'chat', environment: 'live' })).body.token;
  const opts = { key, token, project: agentId };
  const id = (await c.chat('create', {}, opts)).body.conversation_id;
  const respond = async () => (await c.chat('respond', { conversation_id: id, message: 'hi' }, opts)).body.response;
  t.equal(await respond(), 'draft one');
  await says('draft two');
  t.equal(await respond(), 'draft two', 'an edit of main is run at the next turn');
  const published = (await c.api('POST', `${base}/deployments/publish`, {})).body.deployment;
  for (let i = 0; i < 2; i++) await c.api('POST', `${base}/deployments/${published.id}/promote`);
  await says('draft three');
  t.equal(await respond(), 'draft two', 'a deployment to its environment is taken up at the next turn');
  const next = (await c.api('POST', `${base}/deployments/publish`, {})).body.deployment;
  for (let i = 0; i < 2; i++) await c.api('POST', `${base}/deployments/${next.id}/promote`);
  t.equal(await respond(), 'draft two', 'and kept from then on, as one the conversation started on');
});

t.test('nothing deployed: the deployment a turn takes up lacks the variant the draft gave: the variant is picked again from it', async (t) => {
  const agentId = (await c.api('POST', '/v1/agents', { name: 'Varied draft' })).body.agentId;
  const base = `/v1/agents/${agentId}`;
  await c.api('PUT', `${base}/branches/main/functions/turn`, { code: FUNCTIONS.turn.replace('conv.state.turns += 1;', '') });
  t.equal((await c.api('POST', `${base}/branches/main/variants`, { name: 'Paris' })).status, 201);
  // Deployed to sandbox while main has Paris only; main then gets London, its default: live runs the draft.
  const older = (await c.api('POST', `${base}/deployments/publish`, { environment: 'sandbox' })).body.deployment;
  t.equal((await c.api('POST', `${base}/branches/main/variants`, { name: 'London', isDefault: true })).status, 201);
  const a = admin(p);
  const key = (await a('POST', '/keys', { account_id: c.accountId, scope: 'chat', project_id: agentId })).body.key;
  const token = (await a('POST', '/connectors', { account_id: c.accountId, project_id: agentId, kind: 'chat', environment: 'live' })).body.token;
  const opts = { key, token, project: agentId };
  const id = (await c.chat('create', {}, opts)).body.conversation_id;
  const variant = async () => (await c.chat('respond', { conversation_id: id, message: 'variant' }, opts)).body.response;
  t.equal(await variant(), 'variant=London', "the draft's default");
  // The older deployment, without London, reaches live: the next turn pins it.
  for (let i = 0; i < 2; i++) t.equal((await c.api('POST', `${base}/deployments/${older.id}/promote`)).status, 200);
  t.equal(await variant(), 'variant=Paris', "the deployment's default, as a conversation started on it has");
  t.equal(await variant(), 'variant=Paris', 'and kept');
  t.match(await record(id), { variant_name: 'Paris' });
});

t.test('an idle chat ends by itself (durable timer)', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await record(id))!.in_progress, true);
  const ended = await eventually(async () => (await record(id))?.in_progress === false, 20_000);
  t.ok(ended, 'ended without any request');
  t.equal((await record(id))!.end_reason, 'idle');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' })).status, 409);
});

t.test('a handed-off chat also ends once idle', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  await c.chat('respond', { conversation_id: id, message: 'let me talk to a human' });
  t.equal((await record(id))!.handoff, true);
  const ended = await eventually(async () => (await record(id))?.in_progress === false, 20_000);
  t.ok(ended);
  t.equal((await record(id))!.end_reason, 'idle');
});
