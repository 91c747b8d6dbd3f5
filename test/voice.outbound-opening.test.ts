/**
 * An outbound call is reported answered once it is connected, not once the agent has made its opening (contract
 * 2.7: the start function runs after the call connects). The media gateway used to answer the dial request only
 * after the conversation's START (the start function, the model's greeting) and the speech of the greeting, so
 * the status read `calling` for as long as the model took, and a model slower than the call actor's wait for the
 * dial (ring timeout plus 30 s) failed a connected call. Here the model greets only once the test has read
 * `success` (or after a while, so that a platform that waits for it still completes the call); the greeting is
 * then spoken and recorded all the same. Needs sipp, espeak-ng and pocketsphinx: skipped locally without them,
 * failed with CI=true.
 */
import t from 'tap';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { http } from './helpers/http.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { admin } from './helpers/tenants.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { eventually } from './helpers/eventually.js';
import { startLlmStandin, type LlmStandin } from './helpers/llm-standin.js';
import { runSipp, scenario, voiceTools, quietPort } from './helpers/voice.js';

/** A fresh options object per test: tap writes a filtered-out test's skip onto the object it is given. */
const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });
t.setTimeout(180_000);

/**
 * How long the model takes to greet when the test does not let it answer sooner: what a platform that waits for
 * the opening shows `calling` for. Less than the far end holds the line (`HOLD_MS`), so that such a platform
 * reads `success` only once the model has answered, not from the far end's hang-up.
 */
const SLOW_MS = 6000;
const HOLD_MS = 12_000;
const GREETING = 'Hello from the model.';

let p: Platform;
let project: ChatProject;
let llm: LlmStandin;
let dir: string;
/** Lets the model's greeting go before `SLOW_MS` (once the test has read `success`), asked for yet or not. */
let release!: () => void;
const released = new Promise<void>((resolve) => (release = resolve));
/** The greeting (the request with no user message yet): whether it was asked for, and answered. */
const greeting = { asked: false, answered: false };

t.before(async () => {
  if (!voiceTools()) return;
  dir = mkdtempSync(join(tmpdir(), 'sb-voice-out-opening-'));
  llm = await startLlmStandin(async (body) => {
    const users = (body.messages as Array<{ role: string }>).filter((x) => x.role === 'user');
    if (users.length) return { text: 'You said something.' };
    greeting.asked = true;
    let slow: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([released, new Promise((resolve) => (slow = setTimeout(resolve, SLOW_MS)))]);
    clearTimeout(slow);
    greeting.answered = true;
    return { text: GREETING };
  });
  p = await startPlatform({ env: { LLM_BASE_URL: llm.url, LLM_TIMEOUT_MS: '60000', OUTBOUND_RING_TIMEOUT_MS: '2500', VOICE_NO_INPUT_MS: '60000' } });
  // No start function: the greeting is the model's.
  project = await chatProject(p, { name: 'Slow Opening Co' });
});
t.teardown(async () => {
  release();
  await p?.stop();
  if (p) removeDir(p.dataDir);
  await llm?.close();
  if (dir && !process.env.KEEP) rmSync(dir, { recursive: true, force: true });
});

/** A trunk at sipp's address and an outbound connector through it; answers the connector's token. */
async function trunkTo(port: number): Promise<string> {
  const c = await project.api('POST', `/v1/agents/${project.agentId}/telephony/connectors`, { name: `sipp ${port}`, host: '127.0.0.2', port, transport: 'udp' });
  if (c.status !== 201) throw new Error(c.text);
  const r = await admin(p)('POST', '/connectors', { account_id: project.accountId, project_id: project.agentId, kind: 'outbound', telephony_connector_id: c.body.id, from_number: '+14155550100' });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.token;
}

const status = (token: string, sid: string) => http(p.edge, 'GET', `/v1/outbound-calling/${sid}/status`, { headers: { 'x-service-auth-token': token } });

t.test('a slow greeting: the status reads success once the call is connected, and the greeting is spoken after', needsTools(), async (t) => {
  const port = await quietPort();
  const token = await trunkTo(port);
  const sink = dgram.createSocket('udp4');
  await new Promise<void>((r) => sink.bind(0, '127.0.0.2', () => r()));
  t.teardown(() => sink.close());
  let voiced = 0;
  sink.on('message', (m) => {
    if (m.length <= 12 || m[0]! >> 6 !== 2) return;
    const pcm = alawmulaw.alaw.decode(m.subarray(12));
    let sum = 0;
    for (const s of pcm) sum += s * s;
    if (Math.sqrt(sum / pcm.length) > 300) voiced++;
  });
  const file = scenario('outbound-answer.xml', dir, { HEADER: 'X-Order', VALUE: 'A-2001', AUDIO_IP: '127.0.0.2', AUDIO_PORT: sink.address().port, RING_MS: 200, HOLD_MS });
  let sippDone = false;
  const sipp = runSipp({ scenario: file, port, mediaPort: await quietPort(), dir });
  void sipp.then(() => (sippDone = true));
  await new Promise((r) => setTimeout(r, 300));
  const placed = await http(p.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123', encryption: 'UDP/RTP', metadata: { 'X-Order': 'A-2001' } }, headers: { 'x-service-auth-token': token } });
  t.equal(placed.status, 200, placed.text);
  const sid = placed.body.call_sid;

  // Polled until it settles; what the model and the far end were doing is taken with the answer that settled it.
  const seen: string[] = [];
  const settled = await eventually(
    async () => {
      const r = await status(token, sid);
      if (seen[seen.length - 1] !== r.body.status) seen.push(r.body.status);
      return r.body.status === 'success' || r.body.status === 'failure' ? { body: r.body, asked: greeting.asked, answered: greeting.answered, hungUp: sippDone } : null;
    },
    60_000,
    'the call settled',
    50,
  );
  release();
  t.same(settled.body, { status: 'success', reason: '' }, `answered (${seen.join(' → ')})`);
  // The model may not even have been asked yet (the START on its way): what counts is that it had not answered.
  t.notOk(settled.answered, 'success was read before the model had greeted', { asked: settled.asked });
  t.notOk(settled.hungUp, 'and while the call was up');

  // The opening ran on: the greeting was spoken to the far end, and recorded as the conversation's first turn.
  const done = await sipp;
  t.equal(done.code, 0, 'sipp saw the ACK and its BYE answered', { out: done.out.slice(-2000) });
  t.ok(voiced > 0, `the greeting reached the far end as RTP before it hung up (${voiced} voiced packets)`);
  t.match((await status(token, sid)).body, { status: 'success' }, 'still success after the hang-up');
  const read = conversationsClient(p, project, await conversationsKey(p, project));
  const conv = await eventually(
    async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((c: any) => c.state?.call_sid === sid && c.in_progress === false),
    60_000,
    'the ended conversation',
  );
  t.equal(conv.turns[0]?.agent_response, GREETING, "the conversation's first turn is the model's greeting");
});
