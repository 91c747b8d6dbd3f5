/**
 * The far end's Contact and Record-Route as the media gateway addresses its requests by them, with raw SIP over UDP
 * from 127.0.0.2: URIs the `sip` package cannot read (an IPv6 literal, an upper-case `SIP:` scheme) or that are no
 * SIP URI at all (`*`, `tel:`) once crashed the whole process when the gateway sent its BYE after an ACK that never
 * came (the stack threw out of a timer, an unhandled rejection). Each answered INVITE here is never ACKed: after the
 * ACK wait (64·T1, 32 s) the gateway hangs up, reaching the far end where it can, ending the dialog on its side where
 * it cannot, and serves on. A trunk whose 200 names such a Contact gets its ACK (the call once stayed `calling`).
 */
import t from 'tap';
import dgram from 'node:dgram';
import { http } from './helpers/http.js';
import { admin } from './helpers/tenants.js';
import { logged } from './helpers/eventually.js';
import { finalOf, invite as rawInvite, udpPeer, until, type UdpPeer } from './helpers/raw-sip.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { bindNumber, voiceSuite, voiceTools } from './helpers/voice.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp or espeak-ng is not installed' });
const NUMBER = '+442079460178';
// Three answered INVITEs wait for their ACK at once: a fourth from the same address is 503 until they are given up on.
const voice = voiceSuite(t, 'sb-voice-contact-', { SIP_PENDING_INVITES_PER_ADDRESS: '3', LOG_LEVEL: 'info' });

let project: ChatProject;
t.before(async () => {
  if (!voiceTools()) return;
  project = await chatProject(voice.p, { name: 'Contact Co' });
  await bindNumber(project.api, project.agentId, NUMBER, { host: '127.0.0.2', port: 5 });
});

/** An INVITE from `peer` whose Contact line is `contact` (none when ''); `edit` changes its text further. */
const inviteWith = (peer: UdpPeer, contact: string, edit = (s: string) => s) => {
  const call = rawInvite({ sipPort: voice.sip, number: NUMBER }, { address: '127.0.0.2', port: peer.port }, { address: '127.0.0.2', port: 9 });
  const text = edit(call.text.replace(/^Contact: .*\r\n/m, contact ? `Contact: ${contact}\r\n` : ''));
  peer.send(text);
  return call;
};
const byeOf = (peer: UdpPeer, callId: string) => peer.got.find((m) => m.startsWith('BYE ') && m.includes(callId));

t.test('Contacts and Record-Routes the stack cannot read: no crash after the ACK wait; the BYE reaches the far end where it can', needsTools(), async (t) => {
  const peers = await Promise.all([udpPeer(voice.sip), udpPeer(voice.sip), udpPeer(voice.sip), udpPeer(voice.sip)]);
  t.teardown(() => peers.forEach((p) => p.socket.close()));
  const [v6, upper, none, other] = peers as [UdpPeer, UdpPeer, UdpPeer, UdpPeer];

  // No SIP URI to address a BYE to, or a route the stack cannot follow: refused at once (RFC 3261 8.1.1.8).
  const star = inviteWith(other, '*');
  t.match(await until(() => finalOf(other.got, star.callId)), /^SIP\/2\.0 400 Contact Is Not a SIP URI/, 'Contact: * is 400');
  const tel = inviteWith(other, '<tel:+15550001111>');
  t.match(await until(() => finalOf(other.got, tel.callId)), /^SIP\/2\.0 400 Contact Is Not a SIP URI/, 'a tel: Contact is 400');
  const rr = inviteWith(other, `<sip:caller@127.0.0.2:${other.port}>`, (s) => s.replace('Max-Forwards: 70\r\n', 'Max-Forwards: 70\r\nRecord-Route: <sip:[::1]:5060;lr>\r\n'));
  t.match(await until(() => finalOf(other.got, rr.callId)), /^SIP\/2\.0 400 Unreadable Record-Route/, 'a Record-Route the stack cannot read is 400');

  // Answered, never ACKed.
  const a = inviteWith(v6, `<sip:caller@[::1]:${v6.port}>`);
  const b = inviteWith(upper, `<SIP:caller@127.0.0.2:${upper.port}>`);
  // No Contact, and a From that is no SIP URI either: nowhere to send the BYE.
  const c = inviteWith(none, '', (s) => s.replace('From: <sip:caller@127.0.0.2>', 'From: <tel:+15550001111>'));
  for (const [peer, call, what] of [[v6, a, 'IPv6'], [upper, b, 'upper-case'], [none, c, 'none']] as const) {
    t.match(await until(() => finalOf(peer.got, call.callId)), /^SIP\/2\.0 200 /, `Contact ${what}: answered`);
  }
  const held = inviteWith(other, `<sip:caller@127.0.0.2:${other.port}>`);
  t.match(await until(() => finalOf(other.got, held.callId)), /^SIP\/2\.0 503 /, 'three INVITEs wait for their ACK: the next is 503');

  // After the ACK wait (32 s), the BYE: to the IPv6 Contact's dialog through the address its INVITE came from, the
  // Request-URI still the Contact; to the upper-case one at its Contact, read as the `sip:` it is.
  const byeV6 = await until(() => byeOf(v6, a.callId), 45_000);
  t.match(byeV6, new RegExp(`^BYE sip:caller@\\[::1\\]:${v6.port} SIP/2\\.0\\r\\n`), 'IPv6 Contact: the BYE reaches the far end, addressed to its Contact');
  t.notMatch(byeV6, /^Route:/im, 'with no Route of the gateway\'s making');
  const byeUpper = await until(() => byeOf(upper, b.callId), 10_000);
  t.match(byeUpper, new RegExp(`^BYE sip:caller@127\\.0\\.0\\.2:${upper.port} SIP/2\\.0\\r\\n`), 'upper-case scheme: the BYE reaches its Contact');
  t.ok(await logged(() => voice.p.stdout(), /"msg":"an in-dialog request could not be sent: the dialog ends here"/, 10_000), 'no SIP URI at all: the dialog ends on this side');

  const health = await http(voice.p.edge, 'GET', '/healthz');
  t.equal(health.status, 200, 'the platform serves on');
  const next = inviteWith(other, `<sip:caller@127.0.0.2:${other.port}>`);
  const answer = await until(() => finalOf(other.got, next.callId));
  t.match(answer, /^SIP\/2\.0 200 /, 'the given-up INVITEs hold nothing: the next is answered');
  const to = /^To: (.*)$/im.exec(answer)![1]!.trim();
  other.send(next.ack(to));
  other.send(next.request('BYE', 2, to));
  t.match(await until(() => other.got.find((m) => m.includes(next.callId) && /^CSeq: 2 BYE/im.test(m))), /^SIP\/2\.0 200 /, 'and hung up');
});

t.test('an outbound call whose trunk answers 200 with a Contact the stack cannot read gets its ACK there, and goes on', needsTools(), async (t) => {
  // A UDP trunk on 127.0.0.2 that answers each INVITE 200 with `contact` (its own port in place of PORT).
  const trunk = dgram.createSocket('udp4');
  await new Promise<void>((r) => trunk.bind(0, '127.0.0.2', () => r()));
  t.teardown(() => trunk.close());
  const port = trunk.address().port;
  const got: string[] = [];
  let contact = '';
  let answered: { callId: string; from: string; to: string; source: dgram.RemoteInfo } | null = null;
  trunk.on('message', (m, source) => {
    const text = m.toString('latin1');
    got.push(text);
    if (!text.startsWith('INVITE ')) return;
    const h = (name: string) => new RegExp(`^${name}: .*$`, 'im').exec(text)![0];
    const to = `${h('To')};tag=trunk${port}`;
    const sdp = 'v=0\r\no=- 1 1 IN IP4 127.0.0.2\r\ns=-\r\nc=IN IP4 127.0.0.2\r\nt=0 0\r\nm=audio 9 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n';
    const headers = [h('Via'), h('From'), to, h('Call-ID'), h('CSeq'), `Contact: ${contact.replace('PORT', String(port))}`, 'Content-Type: application/sdp', `Content-Length: ${sdp.length}`];
    answered = { callId: h('Call-ID').slice(9).trim(), from: h('From').slice(6), to: to.slice(4), source };
    trunk.send(Buffer.from(`SIP/2.0 200 OK\r\n${headers.join('\r\n')}\r\n\r\n${sdp}`, 'latin1'), source.port, source.address);
  });
  const connector = await project.api('POST', `/v1/agents/${project.agentId}/telephony/connectors`, { name: 'IPv6 trunk', host: '127.0.0.2', port, transport: 'udp' });
  t.equal(connector.status, 201, connector.text);
  const outbound = await admin(voice.p)('POST', '/connectors', { account_id: project.accountId, project_id: project.agentId, kind: 'outbound', telephony_connector_id: connector.body.id, from_number: '+14155550100' });
  t.equal(outbound.status, 201, outbound.text);

  for (const [what, form, uri] of [
    ['an IPv6 literal', '<sip:trunk@[::1]:PORT>', `sip:trunk@\\[::1\\]:${port}`],
    ['an upper-case scheme', '<SIP:trunk@127.0.0.2:PORT>', `sip:trunk@127\\.0\\.0\\.2:${port}`],
  ] as const) {
    contact = form;
    answered = null;
    got.length = 0;
    const call = await http(voice.p.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123', encryption: 'UDP/RTP' }, headers: { 'x-service-auth-token': outbound.body.token } });
    t.equal(call.status, 200, call.text);
    const ack = await until(() => got.find((m) => m.startsWith('ACK ')));
    t.match(ack, new RegExp(`^ACK ${uri} SIP/2\\.0\\r\\n`), `Contact ${what}: the ACK comes, addressed to the Contact`);
    // The call is up: the trunk hangs up, and the gateway answers its BYE within the dialog.
    const a = answered!;
    const bye = `BYE sip:switchboard@127.0.0.1:${voice.sip} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.2:${port};branch=z9hG4bKbye${Date.now()}\r\nMax-Forwards: 70\r\nFrom: ${a.to}\r\nTo: ${a.from}\r\nCall-ID: ${a.callId}\r\nCSeq: 1 BYE\r\nContent-Length: 0\r\n\r\n`;
    trunk.send(Buffer.from(bye, 'latin1'), a.source.port, a.source.address);
    t.match(await until(() => got.find((m) => /^SIP\/2\.0 \d{3} /.test(m) && /^CSeq: 1 BYE/im.test(m))), /^SIP\/2\.0 200 /, 'the call was up: the trunk\'s BYE is answered 200');
  }
});
