/**
 * The media gateway against a hostile network, with raw SIP and RTP from node sockets: a TCP stream whose
 * Content-Length cannot frame a message is closed (the `sip` package's parser buffered it until the process
 * died), an answered INVITE gets no audio before its ACK (one datagram naming a stranger's address was 32 s
 * of RTP to it), INVITEs that hold every RTP port are answered 503 (overload), not 500, and requests this UA
 * does not take are refused as RFC 3261 says (420, 405 with Allow, 501, 481 (a BYE with another From tag too), 482 for
 * a merged INVITE, 500 for an out-of-order CSeq), and so are requests without the header fields every request has or
 * with a CSeq that is none (400, over UDP, TCP and TLS), in a SIP version other than 2.0 (505), with Max-Forwards 0
 * (483) or, over UDP, a Content-Length the datagram lacks (400).
 */
import t, { type Test } from 'tap';
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import { randomBytes } from 'node:crypto';
import { http } from './helpers/http.js';
import { admin } from './helpers/tenants.js';
import { finalOf, invite as rawInvite, udpPeer as rawUdpPeer, until } from './helpers/raw-sip.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { bindNumber, mediaPorts, quietPort, RTP_PORTS, voicePlatform, voiceTools, type VoicePlatform } from './helpers/voice.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp or espeak-ng is not installed' });
const NUMBER = '+442079460177';
let voice: VoicePlatform;
let project: ChatProject;
t.before(async () => {
  if (!voiceTools()) return;
  // One RTP port in the range (from `RTP_PORTS`, which no other test's platform or sipp takes from): a call
  // waiting for its ACK holds the range.
  const rtpPort = await quietPort(RTP_PORTS);
  voice = await voicePlatform('sb-voice-hostile-', { RTP_PORT_MIN: String(rtpPort), RTP_PORT_MAX: String(rtpPort + 1), SIP_TLS_PORT: '0' });
  project = await chatProject(voice.p, { name: 'Hostile Co' });
  await bindNumber(project.api, project.agentId, NUMBER, { host: '127.0.0.2', port: 5 });
});
t.teardown(() => voice?.stop());

const udpPeer = () => rawUdpPeer(voice.sip);
const invite = (from: { port: number }, media: { address: string; port: number }) => rawInvite({ sipPort: voice.sip, number: NUMBER }, { address: '127.0.0.2', port: from.port }, media);

t.test('INVITEs: no audio before the ACK; with every RTP port held, the next is 503', needsTools(), async (t) => {
  const caller = await udpPeer();
  const media = dgram.createSocket('udp4');
  await new Promise<void>((r) => media.bind(0, '127.0.0.3', () => r()));
  let packets = 0;
  media.on('message', () => packets++);
  t.teardown(() => {
    caller.socket.close();
    media.close();
  });
  const first = invite(caller, { address: '127.0.0.3', port: media.address().port });
  caller.send(first.text);
  const answer = await until(() => finalOf(caller.got, first.callId));
  t.match(answer, /^SIP\/2\.0 200 /, 'answered');
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(packets, 0, 'no RTP to the offer\'s address while the 200 waits for its ACK');

  // The range's one port is held by the call waiting for its ACK.
  const second = invite(caller, { address: '127.0.0.3', port: media.address().port });
  caller.send(second.text);
  t.match(await until(() => finalOf(caller.got, second.callId)), /^SIP\/2\.0 503 /, 'out of RTP ports: 503, the overload answer');

  const to = /^To: (.*)$/im.exec(answer)![1]!.trim();
  caller.send(first.ack(to));
  await until(() => (packets > 0 ? true : undefined));
  t.pass('audio once the ACK came');

  // Within the dialog: requests in CSeq order only (RFC 3261 12.2.2); nothing is said to be done that is not.
  const answerTo = async (method: string, cseq: number) => {
    caller.send(first.request(method, cseq, to));
    return until(() => caller.got.find((m) => /^SIP\/2\.0 \d{3} /.test(m) && m.includes(first.callId) && new RegExp(`^CSeq: ${cseq} ${method}`, 'im').test(m)));
  };
  t.match(await answerTo('INFO', 5), /^SIP\/2\.0 200 /, 'INFO');
  t.match(await answerTo('INFO', 3), /^SIP\/2\.0 500 /, 'a CSeq below the last one: out of order, 500');
  const refer = await answerTo('REFER', 6);
  t.match(refer, /^SIP\/2\.0 405 /, 'a REFER within the call is not taken (a 200 would say it was)');
  t.match(refer, /^Allow: .*INVITE/im, 'with the methods that are');
  t.match(await answerTo('FOO', 7), /^SIP\/2\.0 501 /, 'an unknown method: 501');
  t.match(await answerTo('OPTIONS', 8), /^SIP\/2\.0 200 /, 'OPTIONS within the call: answered as an INVITE would be');
  caller.send(first.request('INFO', 9, to).replace('Content-Length: 0', 'Require: timer\r\nContent-Length: 0'));
  t.match(await until(() => caller.got.find((m) => m.includes(first.callId) && /^CSeq: 9 INFO/im.test(m))), /^SIP\/2\.0 420 /, 'a required option within the call too');
  t.match(await answerTo('BYE', 10), /^SIP\/2\.0 200 /, 'BYE');
});

t.test('outside any dialog: unsupported options, methods and dialogs are refused by RFC 3261, each final answer with a To tag', needsTools(), async (t) => {
  const peer = await udpPeer();
  t.teardown(() => peer.socket.close());
  const ask = async (method: string, extra = '') => {
    const callId = `${randomBytes(8).toString('hex')}@127.0.0.2`;
    peer.send(
      `${method} sip:127.0.0.1:${voice.sip} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.2:${peer.port};branch=z9hG4bK${randomBytes(6).toString('hex')}\r\nMax-Forwards: 70\r\n` +
        `From: <sip:a@127.0.0.2>;tag=1\r\nTo: <sip:b@127.0.0.1>\r\nCall-ID: ${callId}\r\nCSeq: 1 ${method}\r\n${extra}Content-Length: 0\r\n\r\n`,
    );
    const rs = await until(() => finalOf(peer.got, callId));
    t.match(rs, /^To: .*;tag=/im, `${method}: the answer has a To tag`);
    return rs;
  };
  t.match(await ask('OPTIONS'), /^SIP\/2\.0 200 /);
  const required = await ask('OPTIONS', 'Require: x-unknown-ext\r\n');
  t.match(required, /^SIP\/2\.0 420 /, 'a required option this UA lacks: 420');
  t.match(required, /^Unsupported: x-unknown-ext/im, 'naming it');
  const register = await ask('REGISTER');
  t.match(register, /^SIP\/2\.0 405 /);
  t.match(register, /^Allow: /im, 'a 405 says what is allowed');
  t.match(await ask('FOO'), /^SIP\/2\.0 501 /, 'an unknown method');
  t.match(await ask('BYE'), /^SIP\/2\.0 481 /, 'a BYE of no dialog');
  t.match(await ask('CANCEL'), /^SIP\/2\.0 481 /, 'a CANCEL of no INVITE');
  const notSdp = await ask('INVITE', 'Content-Type: text/plain\r\n');
  t.notMatch(notSdp, /^SIP\/2\.0 415 /, 'an INVITE without a body is not refused for its type');
});

t.test('merged INVITEs are 482, not a second call; a BYE with the dialog\'s To tag but another From tag is 481', needsTools(), async (t) => {
  const caller = await udpPeer();
  t.teardown(() => caller.socket.close());
  const first = invite(caller, { address: '127.0.0.2', port: 9 });
  // The same INVITE (Call-ID, From tag, CSeq) by another way: another branch (RFC 3261 8.2.2.2).
  const copy = first.text.replace(/branch=z9hG4bK[0-9a-f]+/, `branch=z9hG4bK${randomBytes(6).toString('hex')}`);
  caller.send(first.text);
  caller.send(copy);
  const finals = await until(() => {
    const all = caller.got.filter((m) => /^SIP\/2\.0 [2-6]\d\d /.test(m) && m.includes(first.callId));
    return all.length >= 2 ? all : undefined;
  });
  t.same(finals.map((m) => m.slice(0, 12)).sort(), ['SIP/2.0 200 ', 'SIP/2.0 482 '], 'one answered, the copy 482 Loop Detected');
  const answer = finals.find((m) => m.startsWith('SIP/2.0 200 '))!;
  const to = /^To: (.*)$/im.exec(answer)![1]!.trim();
  caller.send(first.ack(to));
  const answerTo = async (text: string, cseq: number) => {
    caller.send(text);
    return until(() => caller.got.find((m) => /^SIP\/2\.0 \d{3} /.test(m) && m.includes(first.callId) && new RegExp(`^CSeq: ${cseq} BYE`, 'im').test(m)));
  };
  // The dialog is the Call-ID and both tags (RFC 3261 12).
  const stranger = first.request('BYE', 2, to).replace(/^(From: [^\r]*;tag=)[^;\r]+/m, '$1not-the-callers');
  t.match(await answerTo(stranger, 2), /^SIP\/2\.0 481 /, 'a BYE with another From tag: 481, the call goes on');
  t.match(await answerTo(first.request('BYE', 3, to), 3), /^SIP\/2\.0 200 /, 'the caller\'s BYE: 200');
});

t.test('an INVITE whose body is not SDP: 415, naming what is accepted', needsTools(), async (t) => {
  const peer = await udpPeer();
  t.teardown(() => peer.socket.close());
  const call = invite(peer, { address: '127.0.0.2', port: 9 });
  peer.send(call.text.replace('Content-Type: application/sdp', 'Content-Type: text/plain'));
  const rs = await until(() => finalOf(peer.got, call.callId));
  t.match(rs, /^SIP\/2\.0 415 /);
  t.match(rs, /^Accept: application\/sdp/im);
});

t.test('a TCP stream whose Content-Length cannot frame a message is closed; the next connection is served', needsTools(), async (t) => {
  const options = (length: string) =>
    `OPTIONS sip:127.0.0.1:${voice.sip} SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.2:1;branch=z9hG4bK${randomBytes(6).toString('hex')}\r\nMax-Forwards: 70\r\n` +
    `From: <sip:a@127.0.0.2>;tag=1\r\nTo: <sip:b@127.0.0.1>\r\nCall-ID: ${randomBytes(6).toString('hex')}\r\nCSeq: 1 OPTIONS\r\nContent-Length: ${length}\r\n\r\n`;
  for (const length of ['abc', '-5', '1.5']) {
    const s = net.connect({ host: '127.0.0.1', port: voice.sip, localAddress: '127.0.0.2' });
    const closed = new Promise<void>((r) => s.on('close', () => r()));
    s.on('error', () => {});
    await new Promise<void>((r) => s.on('connect', () => r()));
    s.write(options(length));
    // Then, in later reads, a little more: what the stack's parser would keep waiting on as a body it can never
    // finish (abc), or read as the next message's start (-5, 1.5), holding the connection open either way.
    // (Past 60,480 bytes in one read the stack would close it itself, as a header flood.)
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < 8 && !s.destroyed; i++) {
      s.write('A'.repeat(1024));
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.race([closed, new Promise((_r, reject) => setTimeout(() => reject(new Error(`Content-Length ${length}: the connection stayed open`)), 5000))]);
    t.pass(`Content-Length ${length}: closed`);
  }
  const s = net.connect({ host: '127.0.0.1', port: voice.sip, localAddress: '127.0.0.2' });
  let got = '';
  s.on('data', (d) => (got += d.toString('latin1')));
  await new Promise<void>((r) => s.on('connect', () => r()));
  s.write(options('0'));
  await until(() => (/^SIP\/2\.0 200 /m.test(got) ? true : undefined));
  s.destroy();
  t.pass('a well-framed OPTIONS on a new connection: 200');
  t.equal((await http(voice.p.edge, 'GET', '/healthz')).status, 200, 'the process serves on');
});

t.test('a trunk over TCP whose answer cannot be framed: the stream the gateway opened is closed, the process serves on', needsTools(), async (t) => {
  // The far end of an outbound call is a tenant's trunk: a hostile one answers the INVITE with a length that is
  // no number, then keeps sending. The stack's parser would buffer it until the process died.
  let closed!: () => void;
  const ended = new Promise<void>((r) => (closed = r));
  let invites = 0;
  const trunk = net.createServer((s) => {
    s.on('error', () => {});
    s.on('close', () => closed());
    s.once('data', async (d) => {
      if (/^INVITE /.test(d.toString('latin1'))) invites++;
      const via = /^Via: .*$/im.exec(d.toString('latin1'))?.[0] ?? '';
      s.write(`SIP/2.0 180 Ringing\r\n${via}\r\nCSeq: 1 INVITE\r\nCall-ID: x\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nContent-Length: abc\r\n\r\n`);
      for (let i = 0; i < 64 && !s.destroyed; i++) {
        s.write('A'.repeat(1024));
        await new Promise((r) => setTimeout(r, 5));
      }
    });
  });
  await new Promise<void>((r) => trunk.listen(0, '127.0.0.2', () => r()));
  t.teardown(() => void trunk.close());
  const connector = await project.api('POST', `/v1/agents/${project.agentId}/telephony/connectors`, { name: 'Hostile trunk', host: '127.0.0.2', port: (trunk.address() as net.AddressInfo).port, transport: 'tcp' });
  t.equal(connector.status, 201, connector.text);
  const outbound = await admin(voice.p)('POST', '/connectors', { account_id: project.accountId, project_id: project.agentId, kind: 'outbound', telephony_connector_id: connector.body.id, from_number: '+14155550100' });
  t.equal(outbound.status, 201, outbound.text);
  const call = await http(voice.p.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123', encryption: 'UDP/RTP' }, headers: { 'x-service-auth-token': outbound.body.token } });
  t.equal(call.status, 200, call.text);
  await Promise.race([ended, new Promise((_r, reject) => setTimeout(() => reject(new Error('the gateway kept the trunk\'s stream open')), 10_000))]);
  t.equal(invites, 1, 'the INVITE went over the trunk\'s TCP stream');
  t.pass('the stream the gateway opened to the trunk: closed');
  t.equal((await http(voice.p.edge, 'GET', '/healthz')).status, 200, 'the process serves on');
});

t.test('a TLS connection that never begins its handshake is closed', needsTools(), async (t) => {
  const port = mediaPorts(voice.p.stdout()).tls!;
  const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  s.on('error', () => {});
  const opened = Date.now();
  await new Promise<void>((r) => s.on('connect', () => r()));
  // Past the gateway's handshake bound (10 s) by a margin; Node's own 120 s would have passed this, but Node
  // leaves such a connection open for ever when nothing listens for the failure.
  await Promise.race([new Promise<void>((r) => s.on('close', () => r())), new Promise((_r, reject) => setTimeout(() => reject(new Error('still open')), 20_000))]);
  t.ok(Date.now() - opened >= 5_000, 'not at once: the peer had time to begin');
  t.pass('closed');
});

/**
 * A request that parses as SIP but lacks a header field every request has (RFC 3261 8.1.1), or whose CSeq is no
 * CSeq: `omit` leaves header fields out, `set` replaces or adds them. Its Via names `branch`, which the answer echoes.
 */
function malformed(o: { method?: string; transport: 'UDP' | 'TCP' | 'TLS'; port: number; branch: string; omit?: string[]; set?: Record<string, string> }): string {
  const method = o.method ?? 'OPTIONS';
  const headers: Record<string, string> = {
    Via: `SIP/2.0/${o.transport} 127.0.0.2:${o.port};branch=${o.branch}`,
    'Max-Forwards': '70',
    From: '<sip:a@127.0.0.2>;tag=1',
    To: '<sip:b@127.0.0.1>',
    'Call-ID': `${o.branch}@127.0.0.2`,
    CSeq: `1 ${method}`,
    'Content-Length': '0',
    ...o.set,
  };
  for (const name of o.omit ?? []) delete headers[name];
  return `${method} sip:b@127.0.0.1:${voice.sip} SIP/2.0\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}

/** The malformed requests, with the reason phrase of the 400 each gets (null: none, as it cannot be routed back). */
const MALFORMED: Array<{ what: string; omit?: string[]; set?: Record<string, string>; method?: string; reason: RegExp | null }> = [
  { what: 'no Call-ID', omit: ['Call-ID'], reason: /Missing Call-ID/ },
  { what: 'no From', omit: ['From'], reason: /Missing or Malformed From/ },
  { what: 'no To', omit: ['To'], reason: /Missing or Malformed To/ },
  { what: 'no CSeq', omit: ['CSeq'], reason: /Missing or Malformed CSeq/ },
  { what: 'a CSeq without a number', set: { CSeq: 'abc OPTIONS' }, reason: /Missing or Malformed CSeq/ },
  { what: 'a CSeq without a method', set: { CSeq: '1' }, reason: /Missing or Malformed CSeq/ },
  { what: "a CSeq naming another method", set: { CSeq: '1 BYE' }, reason: /CSeq Method Does Not Match/ },
  { what: 'a CSeq number of 2^31', set: { CSeq: '2147483648 OPTIONS' }, reason: /Malformed CSeq/ },
  { what: 'an INVITE without From', method: 'INVITE', omit: ['From'], reason: /Missing or Malformed From/ },
  { what: 'an INVITE without Call-ID and To', method: 'INVITE', omit: ['Call-ID', 'To'], reason: /Missing or Malformed To/ },
  { what: 'no Via', omit: ['Via'], reason: null },
  { what: 'an ACK without CSeq (an ACK is never answered)', method: 'ACK', omit: ['CSeq'], reason: null },
];

/** Checks the answers `got` (wire text) against MALFORMED sent with `branches`; `marker` is a well-formed request's branch sent after them. */
function checkAnswers(t: Test, got: () => string, branches: string[], marker: string, transport: string) {
  const messages = got().split(/(?=^SIP\/2\.0 )/m);
  t.ok(messages.some((m) => /^SIP\/2\.0 200 /.test(m) && m.includes(marker)), `${transport}: a well-formed request after them is answered 200`);
  MALFORMED.forEach((c, i) => {
    const answers = messages.filter((m) => m.includes(branches[i]!));
    if (c.reason === null) t.same(answers, [], `${transport}, ${c.what}: no answer`);
    else {
      t.equal(answers.length, 1, `${transport}, ${c.what}: one answer`);
      t.match(answers[0] ?? '', /^SIP\/2\.0 400 /, `${transport}, ${c.what}: 400`);
      t.match(/^SIP\/2\.0 400 (.*)$/m.exec(answers[0] ?? '')?.[1] ?? '', c.reason, 'naming the problem');
      if (!c.omit?.includes('To')) t.match(answers[0] ?? '', /^To: .*;tag=/im, 'with a To tag');
    }
  });
}

t.test('requests that lack a header field every request has, or whose CSeq is none: 400 naming it, over UDP, TCP and TLS', needsTools(), async (t) => {
  const branch = () => `z9hG4bK${randomBytes(6).toString('hex')}`;
  const marker = (transport: 'UDP' | 'TCP' | 'TLS', port: number, b: string) => malformed({ transport, port, branch: b });

  const peer = await udpPeer();
  t.teardown(() => peer.socket.close());
  const udpBranches = MALFORMED.map(() => branch());
  MALFORMED.forEach((c, i) => peer.send(malformed({ ...c, transport: 'UDP', port: peer.port, branch: udpBranches[i]! })));
  const udpMarker = branch();
  peer.send(marker('UDP', peer.port, udpMarker));
  // Datagrams are taken in order: once the last one is answered, every one before it has been.
  await until(() => (peer.got.some((m) => m.includes(udpMarker)) ? true : undefined));
  checkAnswers(t, () => peer.got.join(''), udpBranches, udpMarker, 'UDP');

  for (const transport of ['TCP', 'TLS'] as const) {
    const port = transport === 'TCP' ? voice.sip : mediaPorts(voice.p.stdout()).tls!;
    const s = transport === 'TCP'
      ? net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' })
      : tls.connect({ socket: net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' }), rejectUnauthorized: false });
    s.on('error', () => {});
    t.teardown(() => void s.destroy());
    let got = '';
    s.on('data', (d) => (got += d.toString('latin1')));
    await new Promise<void>((r) => s.once(transport === 'TCP' ? 'connect' : 'secureConnect', () => r()));
    const branches = MALFORMED.map(() => branch());
    const local = s.localPort!;
    for (const [i, c] of MALFORMED.entries()) s.write(malformed({ ...c, transport, port: local, branch: branches[i]! }));
    // On a stream the length frames a message (RFC 3261 18.3): without one the stack drops it, so it is a 400 too.
    const unframed = branch();
    s.write(malformed({ transport, port: local, branch: unframed, omit: ['Content-Length'] }));
    const last = branch();
    s.write(marker(transport, local, last));
    await until(() => (got.includes(last) ? true : undefined));
    checkAnswers(t, () => got, branches, last, transport);
    t.match(got.split(/(?=^SIP\/2\.0 )/m).find((m) => m.includes(unframed)) ?? '', /^SIP\/2\.0 400 Missing Content-Length/, `${transport}: no Content-Length on a stream: 400`);
    t.notOk(s.destroyed, `${transport}: the connection stays open`);
  }
  t.equal((await http(voice.p.edge, 'GET', '/healthz')).status, 200, 'the process serves on');
});

t.test('a SIP version other than 2.0: 505; Max-Forwards 0: 483; over UDP a Content-Length the datagram does not hold, or no number: 400', needsTools(), async (t) => {
  const peer = await udpPeer();
  t.teardown(() => peer.socket.close());
  const branch = () => `z9hG4bK${randomBytes(6).toString('hex')}`;
  const answerTo = async (text: string, b: string) => {
    peer.send(text);
    return until(() => peer.got.find((m) => /^SIP\/2\.0 [2-6]\d\d /.test(m) && m.includes(b)));
  };
  const options = (o: { set?: Record<string, string>; body?: string } = {}) => {
    const b = branch();
    return { b, text: malformed({ transport: 'UDP', port: peer.port, branch: b, ...(o.set ? { set: o.set } : {}) }) + (o.body ?? '') };
  };

  const v3 = options();
  const three = await answerTo(v3.text.replace(/ SIP\/2\.0\r\n/, ' SIP/3.0\r\n'), v3.b);
  t.match(three, /^SIP\/2\.0 505 /, 'SIP/3.0: 505, in SIP/2.0');
  t.match(three, /^To: .*;tag=/im, 'with a To tag');
  const call = invite(peer, { address: '127.0.0.2', port: 9 });
  const v3Invite = call.text.replace(/ SIP\/2\.0\r\n/, ' SIP/3.0\r\n');
  peer.send(v3Invite);
  t.match(await until(() => finalOf(peer.got, call.callId)), /^SIP\/2\.0 505 /, 'a SIP/3.0 INVITE of a bound number: 505');

  const hops = invite(peer, { address: '127.0.0.2', port: 9 });
  peer.send(hops.text.replace('Max-Forwards: 70', 'Max-Forwards: 0'));
  t.match(await until(() => finalOf(peer.got, hops.callId)), /^SIP\/2\.0 483 /, 'an INVITE of a bound number with Max-Forwards 0: 483');
  const ping = options({ set: { 'Max-Forwards': '0' } });
  t.match(await answerTo(ping.text, ping.b), /^SIP\/2\.0 200 /, 'an OPTIONS with Max-Forwards 0 is answered by the UA itself');

  for (const [length, body] of [['50', 'v=0\r\n'], ['abc', ''], ['-1', '']] as const) {
    const o = options({ set: { 'Content-Length': length }, body });
    const rs = await answerTo(o.text, o.b);
    t.match(rs, /^SIP\/2\.0 400 /, `Content-Length ${length} with ${body.length} bytes of body: 400`);
    t.match(/^SIP\/2\.0 400 (.*)$/m.exec(rs)?.[1] ?? '', /Content-Length/, 'naming it');
  }
  const whole = options({ set: { 'Content-Length': '5' }, body: 'v=0\r\nmore' });
  t.match(await answerTo(whole.text, whole.b), /^SIP\/2\.0 200 /, 'a datagram longer than its Content-Length: the rest is dropped, the request taken');
});
