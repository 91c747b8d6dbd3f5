/**
 * SIP over TLS and SRTP, with the platform's own media gateway as the far end (Debian's sipp has no TLS):
 * platform A places an outbound call (`TLS/SRTP`) through a `tls` trunk that is platform B's TLS port, to a
 * number bound on B. B greets, A's agent asks a question; B's agent must have heard it (over SRTP) and answered.
 */
import t from 'tap';
import { http } from './helpers/http.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { admin } from './helpers/tenants.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { bindNumber, mediaPorts, voiceTools } from './helpers/voice.js';

const needs = voiceTools() ? {} : { skip: 'espeak-ng or pocketsphinx is not installed' };

t.test('an outbound TLS/SRTP call from one platform to another: headers over TLS, speech both ways over SRTP', needs, async (t) => {
  const env = { LOG_LEVEL: 'info', VOICE_NO_INPUT_MS: '60000', OUTBOUND_RING_TIMEOUT_MS: '8000' };
  // Two hosts on loopback: the `sip` package cannot send to its own address.
  const a: Platform = await startPlatform({ env: { ...env, SIP_TLS_VERIFY: 'false' } });
  const b: Platform = await startPlatform({ env: { ...env, HOST: '127.0.0.3' } });
  t.teardown(async () => {
    await a.stop();
    await b.stop();
    removeDir(a.dataDir);
    removeDir(b.dataDir);
  });
  const bTls = mediaPorts(b.stdout()).tls!;
  t.ok(bTls, 'B listens for SIP over TLS');

  const callee = await chatProject(b, {
    name: 'Callee Co',
    functions: { start: 'function start(conv) { conv.say("Acme here, about order " + conv.sip_headers.get("X-Order") + "."); }' },
  });
  // B's number is bound to a trunk (its calls would go back to A); the inbound lookup needs only the binding.
  await bindNumber(callee.api, callee.agentId, '+442079460127', { host: '127.0.0.1', port: 5060, transport: 'tls' });

  const caller = await chatProject(a, {
    name: 'Caller Co',
    functions: {
      // A waits for B's greeting and asks its question, twice, then hangs up after B's next answer. Twice: B may
      // take A's "Hi." as an utterance of its own and answer it, and A, taking that answer as the one to its
      // question, hung up while B was still hearing the question (seen on a loaded CI machine).
      start: 'function start(conv) { conv.say("Hi."); }',
      turn: 'function turn(conv, message) { conv.state.n = (conv.state.n || 0) + 1; if (conv.state.n >= 3) { conv.end(); return "Thank you, goodbye."; } return "Opening hours?"; }',
    },
  });
  const trunk = await caller.api('POST', `/v1/agents/${caller.agentId}/telephony/connectors`, { name: 'B over TLS', host: '127.0.0.3', port: bTls, transport: 'tls' });
  const out = await admin(a)('POST', '/connectors', { account_id: caller.accountId, project_id: caller.agentId, kind: 'outbound', telephony_connector_id: trunk.body.id, from_number: '+14155550100' });
  const token = out.body.token;
  const r = await http(a.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+442079460127', encryption: 'TLS/SRTP', metadata: { 'X-Order': 'B-2002' } }, headers: { 'x-service-auth-token': token } });
  t.equal(r.status, 200, r.text);

  const read = conversationsClient(b, callee, await conversationsKey(b, callee));
  let conv: any = null;
  for (let i = 0; i < 250 && !conv; i++) {
    const rows = (await read({ channel: 'VOICE-SIP' })).body.conversations ?? [];
    conv = rows.find((c: any) => c.in_progress === false) ?? null;
    if (!conv) await new Promise((res) => setTimeout(res, 100));
  }
  if (!conv) {
    const noise = (p: Platform) => p.stdout().split('\n').filter((l) => !/request completed|incoming request/.test(l)).join('\n').slice(-3000);
    t.comment(`A: ${noise(a)}\nB: ${noise(b)}`);
    await a.stop();
    await b.stop();
    t.comment(a.stdout().split('\n').filter((l) => l.includes('call ended') || l.includes('"level":40')).join('\n'));
    t.comment(b.stdout().split('\n').filter((l) => l.includes('call ended') || l.includes('"level":40')).join('\n'));
    t.comment(JSON.stringify((await http(a.edge, 'GET', `/v1/outbound-calling/${r.body.call_sid}/status`, { headers: { 'x-service-auth-token': token } })).body));
  }
  t.ok(conv, 'B took the call and it ended');
  t.match(conv.turns[0].agent_response, /order B-2002/, "the caller's metadata arrived as a SIP header over TLS");
  t.equal(conv.from_number, '+14155550100');
  // The free recogniser on synthetic speech gets "open" reliably, rarely the whole question: enough to
  // show the SRTP audio arrived whole and decodable (the topic answer is test/voice.inbound.test.ts's).
  const heard = conv.turns.slice(1).find((x: any) => /open/.test(x.user_input));
  t.ok(heard, `B recognised A's question (${conv.turns.map((x: any) => x.user_input).join(' | ')})`);
  const ended = (p: Platform) => p.stdout().split('\n').filter((l) => l.includes('"call ended"')).map((l) => JSON.parse(l));
  for (const [name, p] of [['A', a], ['B', b]] as const) {
    const lines = ended(p);
    t.equal(lines.length, 1, `${name} logged the call's end`);
    t.equal(lines[0]?.srtp, true, `${name}'s audio was SRTP`);
    t.equal(lines[0]?.sip_transport, 'tls', `${name}'s signalling was TLS`);
    t.ok(lines[0]?.rtp_received > 50, `${name} received and authenticated the other's audio`);
    t.equal(lines[0]?.rtp_rejected, 0, `${name} rejected no packet`);
  }
});
