/**
 * A model slower than the media gateway's ask timeout (the larger of ASK_TIMEOUT_MS and four LEASE_TTL_MS): a
 * call's start and its turns are waited for as long as the agent may take (`Config.turnWaitMs`), as a chat's
 * and a messaging session's are. Given up at the ask timeout, the start hung up on the caller while the
 * conversation went on greeting, and a turn's answer, which the conversation went on to record, was never spoken.
 * The call is placed by hand (raw SIP from the test, `callerMedia` for its audio), so that the caller keys its
 * digit once the greeting has been heard, however long the model took.
 */
import t from 'tap';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { eventually } from './helpers/eventually.js';
import { startLlmStandin } from './helpers/llm-standin.js';
import { until } from './helpers/raw-sip.js';
import { answeredCall, bindNumber, voicePlatform, voiceTools, type VoicePlatform } from './helpers/voice.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });
t.setTimeout(240_000);

/** How long the stand-in model takes to greet and to answer: more than twice the ask timeout below (4 s). */
const SLOW_MS = 9000;
const NUMBER = '+442079460190';

let v: VoicePlatform | undefined;
let llm: Awaited<ReturnType<typeof startLlmStandin>> | undefined;
t.before(async () => {
  if (!voiceTools()) return;
  llm = await startLlmStandin((body) => {
    const users = (body.messages as Array<{ role: string; content: string }>).filter((x) => x.role === 'user');
    const last = users[users.length - 1]?.content ?? '';
    return { delayMs: SLOW_MS, text: users.length ? `You keyed ${last}.` : 'Hello from the model.' };
  });
  // The media gateway's ask timeout is max(2 s, 4 × 1 s): the model takes more than twice that.
  v = await voicePlatform('sb-voice-slow-', { LLM_BASE_URL: llm.url, LLM_TIMEOUT_MS: '30000', ASK_TIMEOUT_MS: '2000', LEASE_TTL_MS: '1000', VOICE_NO_INPUT_MS: '600000' });
});
t.teardown(async () => {
  await v?.stop();
  await llm?.close();
});

t.test('a slow model: the greeting and the answer to a keyed digit are waited for and spoken', needsTools(), async (t) => {
  const p = v!.p;
  const project = await chatProject(p, { name: 'Slow Voice Co' });
  await bindNumber(project.api, project.agentId, NUMBER, { host: '127.0.0.2', port: 5 });
  const { caller, peer, hangUp } = await answeredCall(t, v!.sip, NUMBER);

  const gaveUp = (line: RegExp) => line.test(p.stdout());
  const byeFromUs = () => peer.got.some((m) => /^BYE /.test(m));
  // Either the greeting is heard, or the call gave up on its start (and hung up): whichever comes first.
  await eventually(async () => caller.heard.voiced > 0 || gaveUp(/could not start its conversation/) || byeFromUs(), 120_000, 'the greeting or the give-up', 100);
  t.notOk(gaveUp(/could not start its conversation/), 'the start was waited for', { platform: p.stdout().slice(-3000) });
  t.notOk(byeFromUs(), 'the caller was not hung up on');
  t.ok(caller.heard.voiced > 0, 'the greeting was spoken');
  if (caller.heard.voiced === 0) return;

  // The greeting over (half a second of quiet after it), the caller keys a digit: one turn, answered slowly.
  await caller.until(() => caller.heard.quiet >= 25);
  const before = caller.heard.voiced;
  caller.key('7');
  await eventually(async () => caller.heard.voiced > before || gaveUp(/call turn failed/) || byeFromUs(), 120_000, 'the answer or the give-up', 100);
  t.notOk(gaveUp(/call turn failed/), 'the turn was waited for', { platform: p.stdout().slice(-3000) });
  t.ok(caller.heard.voiced > before, 'its answer was spoken');

  hangUp();
  const read = conversationsClient(p, project, await conversationsKey(p, project));
  const c = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.to_number === NUMBER && x.in_progress === false), 60_000, 'the ended call');
  t.same(
    c.turns.map((x: any) => [x.user_input_dtmf, x.agent_response]),
    [['', 'Hello from the model.'], ['7', 'You keyed 7.']],
    'the greeting and the one turn, each answered once',
  );
});

t.test('a caller who hangs up while the slow model prepares the greeting: the conversation ends once it is ready', needsTools(), async (t) => {
  const p = v!.p;
  const project = await chatProject(p, { name: 'Slow Hangup Co' });
  const number = '+442079460191';
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: 5 });
  const { caller, peer, hangUp } = await answeredCall(t, v!.sip, number);
  // Gone before the model has greeted.
  hangUp();
  await until(() => peer.got.find((m) => /^SIP\/2\.0 200 /.test(m) && /^CSeq: 2 BYE/im.test(m)));
  t.equal(caller.heard.voiced, 0, 'hung up before the greeting was spoken');

  const read = conversationsClient(p, project, await conversationsKey(p, project));
  const notClosed = /could not close the conversation of a call/;
  const c = await eventually(
    async () => (notClosed.test(p.stdout()) ? { closed: false } : ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.to_number === number && x.in_progress === false)),
    120_000,
    'the ended conversation or the failed close',
  );
  t.notOk(notClosed.test(p.stdout()), 'the close was taken', { platform: p.stdout().slice(-3000) });
  t.equal(c.in_progress, false, 'the conversation ended with the call');
  t.same(c.turns?.map((x: any) => x.agent_response), ['Hello from the model.'], 'its greeting recorded (no one heard it)');
});
