/**
 * What an INVITE is answered, with raw SIP and RTP from node sockets: the number it dialled is its Request-URI's
 * (To was read: a diverted call reached the number it was first dialled to), the SRTP answer carries the tag of the
 * offered crypto line it took (RFC 4568 5.1.2), and the answer's direction mirrors the offer's (RFC 3264 6.1): a
 * call the far end holds gets no audio from us and is not hung up for the RTP it does not send. An INVITE without
 * SDP (a delayed offer) is answered with our offer, and the call takes its answer from the ACK.
 */
import t, { type Test } from 'tap';
import dgram from 'node:dgram';
import { audioOffer, finalOf, invite as rawInvite, responseTo, udpPeer, until, type UdpPeer } from './helpers/raw-sip.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { eventually } from './helpers/eventually.js';
import { bindNumber, voiceSuite, voiceTools } from './helpers/voice.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp or espeak-ng is not installed' });
const NUMBER = '+442079460181';
const OTHER = '+442079460182';
/** Short, so that a call the far end holds can be seen to outlive it. */
const MEDIA_TIMEOUT_MS = 1500;
const voice = voiceSuite(t, 'sb-voice-invite-', { VOICE_MEDIA_TIMEOUT_MS: String(MEDIA_TIMEOUT_MS) });
let first: ChatProject;
let second: ChatProject;
t.before(async () => {
  if (!voiceTools()) return;
  first = await chatProject(voice.p, { name: 'First Co' });
  await bindNumber(first.api, first.agentId, NUMBER, { host: '127.0.0.2', port: 5 });
  second = await chatProject(voice.p, { name: 'Second Co' });
  await bindNumber(second.api, second.agentId, OTHER, { host: '127.0.0.2', port: 5 });
});

/**
 * A caller's SIP socket and a media socket on 127.0.0.2, closed after the test; `packets` counts the RTP it is sent,
 * `types` holds the payload types of those packets.
 */
async function caller(t: Test): Promise<{ sip: UdpPeer; media: dgram.Socket; packets: () => number; types: Set<number> }> {
  const sip = await udpPeer(voice.sip);
  const media = dgram.createSocket('udp4');
  await new Promise<void>((r) => media.bind(0, '127.0.0.2', () => r()));
  let packets = 0;
  const types = new Set<number>();
  media.on('message', (m) => {
    packets++;
    types.add(m[1]! & 0x7f);
  });
  t.teardown(() => {
    sip.socket.close();
    media.close();
  });
  return { sip, media, packets: () => packets, types };
}

/** The To header (with the gateway's tag) of a 200. */
const toOf = (answer: string) => /^To: (.*)$/im.exec(answer)![1]!.trim();
/** The SDP body of a message. */
const bodyOf = (m: string) => m.slice(m.indexOf('\r\n\r\n') + 4);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('the dialled number is the Request-URI\'s user part; To is read only when the Request-URI has none', needsTools(), async (t) => {
  const { sip, media } = await caller(t);
  const mediaAt = { address: '127.0.0.2', port: media.address().port };
  const call = async (o: { uri: string; to: string }) => {
    const c = rawInvite({ sipPort: voice.sip, number: NUMBER }, sip, mediaAt, o);
    sip.send(c.text);
    const answer = await until(() => finalOf(sip.got, c.callId));
    if (/^SIP\/2\.0 200 /.test(answer)) {
      sip.send(c.ack(toOf(answer)));
      sip.send(c.request('BYE', 2, toOf(answer)));
      await until(() => sip.got.find((m) => m.includes(c.callId) && /^CSeq: 2 BYE/im.test(m)));
    }
    return answer;
  };
  const at = (n: string) => `sip:${n}@127.0.0.1:${voice.sip}`;
  t.match(await call({ uri: at('+449999999999'), to: `<${at(NUMBER)}>` }), /^SIP\/2\.0 404 /, 'Request-URI unknown, To bound: 404');
  t.match(await call({ uri: at('!!!'), to: `<${at(NUMBER)}>` }), /^SIP\/2\.0 404 /, 'a Request-URI user part that is no number: 404');
  t.match(await call({ uri: at(NUMBER), to: '<sip:+449999999999@127.0.0.1>' }), /^SIP\/2\.0 200 /, 'Request-URI bound, To unknown (a diverted call): answered');
  t.match(await call({ uri: at(OTHER.slice(1)), to: `<${at(NUMBER)}>` }), /^SIP\/2\.0 200 /, 'without its +');
  t.match(await call({ uri: `tel:${OTHER}`, to: `<${at(NUMBER)}>` }), /^SIP\/2\.0 200 /, 'a tel: Request-URI');
  t.match(await call({ uri: `sip:127.0.0.1:${voice.sip}`, to: `<${at(NUMBER)}>` }), /^SIP\/2\.0 200 /, 'a Request-URI without a user part: To\'s');
  t.match(await call({ uri: `sip:127.0.0.1:${voice.sip}`, to: '<sip:+449999999999@127.0.0.1>' }), /^SIP\/2\.0 404 /, '...which is looked up as well');

  // Which agent took each call: the one bound to the Request-URI's number, each call's `to_number` that number.
  for (const [project, number] of [[first, NUMBER], [second, OTHER]] as const) {
    const read = conversationsClient(voice.p, project, await conversationsKey(voice.p, project));
    const rows = await eventually(async () => {
      const got = (await read({ channel: 'VOICE-SIP' })).body.conversations ?? [];
      return got.length >= 2 && got;
    }, 20_000, `the conversations of ${number}`);
    t.same(rows.map((c: { to_number: string }) => c.to_number), [number, number], `${number}'s agent took the two calls to it`);
  }
});

t.test('an SRTP answer carries the tag of the offered crypto line it took', needsTools(), async (t) => {
  const { sip, media } = await caller(t);
  const mediaAt = { address: '127.0.0.2', port: media.address().port };
  const key = (n: number) => Buffer.alloc(n, 7).toString('base64');
  const offer = (crypto: string[]) =>
    audioOffer(mediaAt, [...crypto, 'a=sendrecv']).replace('RTP/AVP', 'RTP/SAVP');
  const answerTo = async (crypto: string[]) => {
    const c = rawInvite({ sipPort: voice.sip, number: NUMBER }, sip, mediaAt, { sdp: offer(crypto) });
    sip.send(c.text);
    const answer = await until(() => finalOf(sip.got, c.callId));
    t.match(answer, /^SIP\/2\.0 200 /, 'answered');
    sip.send(c.ack(toOf(answer)));
    sip.send(c.request('BYE', 2, toOf(answer)));
    return bodyOf(answer).split('\r\n').filter((l) => l.startsWith('a=crypto:'));
  };
  const five = await answerTo([`a=crypto:5 AES_CM_128_HMAC_SHA1_80 inline:${key(30)}`]);
  t.equal(five.length, 1, 'one crypto line');
  t.match(five[0], /^a=crypto:5 AES_CM_128_HMAC_SHA1_80 inline:/, 'tag 5, as offered');
  const second = await answerTo([`a=crypto:1 AES_256_CM_HMAC_SHA1_80 inline:${key(46)}`, `a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:${key(30)}`]);
  t.same(second.map((l) => l.split(' ')[0]), ['a=crypto:2'], 'the second line, of the suite taken: tag 2');
  const unusableFirst = await answerTo([`a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:${key(20)}`, `a=crypto:4 AES_CM_128_HMAC_SHA1_80 inline:${key(30)}`]);
  t.same(unusableFirst.map((l) => l.split(' ')[0]), ['a=crypto:4'], 'of two lines of our suite, the first with a usable key');
});

t.test('the answer mirrors the offer\'s direction; a call the far end holds gets no audio and is not hung up for its silence', needsTools(), async (t) => {
  const { sip, media, packets } = await caller(t);
  const mediaAt = { address: '127.0.0.2', port: media.address().port };
  const directionOf = (m: string) => bodyOf(m).split('\r\n').filter((l) => /^a=(sendrecv|sendonly|recvonly|inactive)$/.test(l));
  // Held from the start: the INVITE offers sendonly.
  const c = rawInvite({ sipPort: voice.sip, number: NUMBER }, sip, mediaAt, { sdp: audioOffer(mediaAt, ['a=sendonly']) });
  sip.send(c.text);
  const answer = await until(() => finalOf(sip.got, c.callId));
  t.match(answer, /^SIP\/2\.0 200 /, 'answered');
  t.same(directionOf(answer), ['a=recvonly'], 'a sendonly offer is answered recvonly');
  const to = toOf(answer);
  sip.send(c.ack(to));
  const bye = () => sip.got.find((m) => m.startsWith('BYE ') && m.includes(c.callId));
  // The caller sends no RTP at all. Twice the media timeout: no audio (not even the greeting) and no hang-up.
  await sleep(2 * MEDIA_TIMEOUT_MS);
  t.equal(packets(), 0, 'no RTP to a far end that takes none');
  t.notOk(bye(), 'not hung up for the silence of a far end that holds the call');

  let cseq = 1;
  const reoffer = async (lines: string[]) => {
    cseq++;
    sip.send(c.reinvite(cseq, to, audioOffer(mediaAt, lines)));
    const rs = await until(() => sip.got.find((m) => /^SIP\/2\.0 [2-6]\d\d /.test(m) && m.includes(c.callId) && new RegExp(`^CSeq: ${cseq} INVITE`, 'im').test(m)));
    t.match(rs, /^SIP\/2\.0 200 /, `${lines.join(' ')} re-INVITE answered`);
    sip.send(c.ack(to, cseq));
    return directionOf(rs);
  };
  t.same(await reoffer(['a=inactive']), ['a=inactive'], 'inactive is answered inactive');
  await sleep(2 * MEDIA_TIMEOUT_MS);
  t.equal(packets(), 0, 'still no RTP');
  t.notOk(bye(), 'still up');
  // recvonly: the far end takes our audio and sends none; we send (the greeting held so far).
  t.same(await reoffer(['a=recvonly']), ['a=sendonly'], 'recvonly is answered sendonly');
  await until(() => (packets() > 0 ? true : undefined));
  t.pass('our audio once the far end takes it');
  t.notOk(bye(), 'and the far end is not hung up for sending nothing');
  // Off hold: from now on its silence counts.
  t.same(await reoffer(['a=sendrecv']), ['a=sendrecv'], 'sendrecv is answered sendrecv');
  await until(bye, 4 * MEDIA_TIMEOUT_MS + 5000);
  t.pass('back to sendrecv and still sending nothing: hung up at the media timeout');
});

t.test('a delayed offer (an INVITE without SDP): our offer in the 200, the answer from the ACK; the audio goes where the answer says, in its codec', needsTools(), async (t) => {
  const delayed = await chatProject(voice.p, { name: 'Delayed Co' });
  const number = '+442079460183';
  await bindNumber(delayed.api, delayed.agentId, number, { host: '127.0.0.2', port: 5 });
  const { sip, media, packets, types } = await caller(t);
  const mediaAt = { address: '127.0.0.2', port: media.address().port };
  const c = rawInvite({ sipPort: voice.sip, number }, sip, mediaAt);
  sip.send(c.bodiless());
  const answer = await until(() => finalOf(sip.got, c.callId));
  t.match(answer, /^SIP\/2\.0 200 /, 'answered');
  t.match(answer, /^Content-Type: application\/sdp/im, 'with an SDP body');
  const offer = bodyOf(answer).split('\r\n');
  t.match(offer.find((l) => l.startsWith('m=audio ')), /^m=audio [1-9]\d* RTP\/AVP 0 8 101$/, 'our offer: both G.711 codecs and telephone-event, plain RTP over UDP');
  t.ok(offer.includes('a=sendrecv'), 'sendrecv');
  t.equal(packets(), 0, 'no audio before the answer');
  // The answer takes A-law only: the second codec of our offer.
  const to = toOf(answer);
  sip.send(c.ack(to, 1, audioOffer(mediaAt).replace('RTP/AVP 0 101', 'RTP/AVP 8 101').replace('a=rtpmap:0 PCMU/8000', 'a=rtpmap:8 PCMA/8000')));
  await until(() => (packets() > 0 ? true : undefined));
  t.same([...types], [8], 'the agent\'s audio reaches the port the answer named, in A-law');
  sip.send(c.request('BYE', 2, to));
  t.match(await until(() => sip.got.find((m) => /^SIP\/2\.0 \d{3} /.test(m) && m.includes(c.callId) && /^CSeq: 2 BYE/im.test(m))), /^SIP\/2\.0 200 /, 'the call was up: its BYE is answered 200');
  const read = conversationsClient(voice.p, delayed, await conversationsKey(voice.p, delayed));
  const c2 = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((r: { in_progress: boolean }) => !r.in_progress), 20_000, 'the call\'s conversation');
  t.equal(c2.to_number, number, 'a conversation ran for the call, and is over');
});

t.test('a delayed offer whose ACK brings no answer the call can take: hung up with a BYE, no audio sent', needsTools(), async (t) => {
  const { sip, media, packets } = await caller(t);
  const mediaAt = { address: '127.0.0.2', port: media.address().port };
  // The caller answers the gateway's BYEs.
  sip.socket.on('message', (m) => {
    const text = m.toString('latin1');
    if (text.startsWith('BYE ')) sip.send(responseTo(text, '200 OK'));
  });
  const acks: Array<[string, string]> = [
    ['no body', ''],
    ['no G.711 codec', audioOffer(mediaAt).replace('RTP/AVP 0 101', 'RTP/AVP 18 101').replace('a=rtpmap:0 PCMU/8000', 'a=rtpmap:18 G729/8000')],
    ['SRTP to a plain RTP offer', audioOffer(mediaAt, [`a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${Buffer.alloc(30, 7).toString('base64')}`, 'a=sendrecv']).replace('RTP/AVP', 'RTP/SAVP')],
  ];
  for (const [what, sdp] of acks) {
    const c = rawInvite({ sipPort: voice.sip, number: NUMBER }, sip, mediaAt);
    sip.send(c.bodiless());
    const answer = await until(() => finalOf(sip.got, c.callId));
    t.match(answer, /^SIP\/2\.0 200 /, `${what}: answered with our offer`);
    sip.send(c.ack(toOf(answer), 1, sdp));
    await until(() => sip.got.find((m) => m.startsWith('BYE ') && m.includes(c.callId)));
    t.pass(`${what}: the gateway hangs up`);
  }
  t.equal(packets(), 0, 'and sent no audio to the address the SDP named');
});
