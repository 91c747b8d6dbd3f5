/**
 * What a call's conversation holds, through a real call (raw SIP from the test, `callerMedia` for its audio):
 * the built-in state keys (`from_`, `to`, `conversation_id`, `call_sid`) are in `conv.state` for the `start`,
 * `turn` and `end` functions from the start, ordinary variables a function may change or delete, and the record's
 * `state` is what they left. Functions once saw `{}` while the record showed the keys, merged in by its projector.
 * And the call's ASR language code is the recogniser's (`en-US`), which the Concurrent Calls `language` filter
 * finds: calls once had none, and no language filter ever counted them.
 */
import t, { type Test } from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { eventually } from './helpers/eventually.js';
import { finalOf, invite, udpPeer, until } from './helpers/raw-sip.js';
import { answeredCall, bindNumber, voicePlatform, voiceTools, type VoicePlatform } from './helpers/voice.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });
t.setTimeout(240_000);

let v: VoicePlatform | undefined;
t.before(async () => {
  // No silence turns: each test's turns are the ones it keys.
  if (voiceTools()) v = await voicePlatform('sb-voice-conv-', { VOICE_NO_INPUT_MS: '600000' });
});
t.teardown(() => v?.stop());

/** A call to `number`, answered, its audio flowing. */
const placeCall = (t: Test, number: string) => answeredCall(t, v!.sip, number);

/** The VOICE-SIP conversation to `number`, once `test` holds for it. */
async function callTo(project: ChatProject, number: string, test: (c: any) => boolean, what: string): Promise<any> {
  // With `pii`: the transcript holds the numbers the functions read.
  const read = conversationsClient(v!.p, project, await conversationsKey(v!.p, project, ['conversations_data', 'pii']));
  return eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.to_number === number && test(x)), 60_000, what);
}

t.test("a call's functions read the built-in state keys from the start, may change and delete them, and the record shows what they left", needsTools(), async (t) => {
  const number = '+442079460201';
  const project = await chatProject(v!.p, {
    name: 'State Voice Co',
    functions: {
      start: 'function start(conv) { conv.say("start " + [conv.state.from_, conv.state.to, conv.state.call_sid, conv.state.conversation_id].join(" ")); }',
      turn: 'function turn(conv, message) { const seen = [conv.state.from_, conv.state.to, conv.state.call_sid, conv.state.conversation_id].join(" "); conv.state.to = "front desk"; delete conv.state.call_sid; return "turn " + message + " " + seen; }',
      end: 'function end(conv) { conv.state.end_saw = [conv.state.from_, conv.state.to, "call_sid" in conv.state]; }',
    },
  });
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: 5 });
  const { caller, hangUp } = await placeCall(t, number);
  // The opening heard and over (half a second of quiet after it), the caller keys a digit: one turn.
  await caller.until(() => caller.heard.voiced > 0 && caller.heard.quiet >= 25);
  caller.key('5');
  await callTo(project, number, (c) => c.turns.length >= 2, 'the keyed turn');
  hangUp();

  const c = await callTo(project, number, (x) => x.in_progress === false, 'the ended call');
  t.equal(c.from_number, 'caller', "the INVITE's From user part");
  const opening = /^start caller (\+\d+) (IN-[0-9a-f-]+) (\S+)$/.exec(c.turns[0].agent_response);
  t.ok(opening, `the start function read every built-in key (${c.turns[0].agent_response})`);
  if (!opening) return;
  t.equal(opening[1], number, 'to');
  t.equal(opening[3], c.id, 'conversation_id');
  const sid = opening[2];
  t.same(c.turns.map((x: any) => [x.user_input_dtmf, x.agent_response]).slice(1), [['5', `turn 5 caller ${number} ${sid} ${c.id}`]], 'the turn function read them too');
  t.same(c.state, { from_: 'caller', to: 'front desk', conversation_id: c.id, end_saw: ['caller', 'front desk', false] }, 'the end function saw what the turn left: one state, the record’s');
});

t.test("a call's ASR language is its recogniser's (pocketsphinx: en-US): the concurrency `language` filter counts it", needsTools(), async (t) => {
  const number = '+442079460202';
  const project = await chatProject(v!.p, { name: 'Language Voice Co' });
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: 5 });
  const { caller, hangUp } = await placeCall(t, number);
  await caller.until(() => caller.heard.voiced > 0);
  const going = await callTo(project, number, (x) => x.in_progress === true, 'the call in progress');

  // Counts need no conversation data: a key without permissions.
  const read = conversationsClient(v!.p, project, await conversationsKey(v!.p, project, []));
  const at = Date.parse(going.started_at);
  const range = { start_time: new Date(at - 60_000).toISOString(), end_time: new Date(at + 60_000).toISOString() };
  const peak = async (query: Record<string, string>) => {
    const r = await read({ ...range, ...query }, { version: 'v1', path: '/concurrency' });
    t.equal(r.status, 200, 'answered', { body: r.text });
    return Math.max(0, ...(r.body.intervals ?? []).map((i: any) => i.max_concurrent_conversations));
  };
  t.equal(await peak({ language: 'en' }), 1, 'in progress: counted as English');
  hangUp();
  await callTo(project, number, (x) => x.in_progress === false, 'the ended call');
  t.equal(await peak({}), 1, 'ended: the call counts');
  t.equal(await peak({ language: 'en' }), 1, 'as English');
  t.equal(await peak({ language: 'en-US' }), 1, 'as US English');
  t.equal(await peak({ language: 'en-GB' }), 0, 'not as another English');
  t.equal(await peak({ language: 'fr' }), 0, 'nor as French');
});
