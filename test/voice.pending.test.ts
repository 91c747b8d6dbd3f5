/**
 * INVITEs one address has pending (answered but not ACKed, or not answered yet) are bounded
 * (`SIP_PENDING_INVITES_PER_ADDRESS`): each answered INVITE holds an RTP port until its ACK or for 32 s, so a sender
 * that never ACKs (a spoofed source) would otherwise hold the whole range. Past the bound: 503;
 * an ACK gives the address its room back; other addresses are not counted against it.
 */
import t from 'tap';
import dgram from 'node:dgram';
import { chatProject } from './helpers/chat.js';
import { finalOf, invite, udpPeer, until, type UdpPeer } from './helpers/raw-sip.js';
import { bindNumber, voiceSuite, voiceTools } from './helpers/voice.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp or espeak-ng is not installed' });
const NUMBER = '+442079460178';
const BOUND = 2;
const voice = voiceSuite(t, 'sb-voice-pending-', { SIP_PENDING_INVITES_PER_ADDRESS: String(BOUND) });

t.test('past the bound of pending INVITEs from one address: 503, until one is ACKed', needsTools(), async (t) => {
  const project = await chatProject(voice.p, { name: 'Pending Co' });
  await bindNumber(project.api, project.agentId, NUMBER, { host: '127.0.0.2', port: 5 });
  const media = dgram.createSocket('udp4');
  await new Promise<void>((r) => media.bind(0, '127.0.0.3', () => r()));
  const peers: UdpPeer[] = [];
  t.teardown(async () => {
    for (const hangUp of answered) hangUp();
    await new Promise((r) => setTimeout(r, 300));
    media.close();
    for (const p of peers) p.socket.close();
  });
  const peer = async (address: string) => {
    const p = await udpPeer(voice.sip, address);
    peers.push(p);
    return p;
  };
  const to = { sipPort: voice.sip, number: NUMBER };
  const offer = { address: '127.0.0.3', port: media.address().port };
  const answered: Array<() => void> = [];
  const call = async (from: UdpPeer) => {
    const c = invite(to, from, offer);
    from.send(c.text);
    const answer = await until(() => finalOf(from.got, c.callId));
    if (/^SIP\/2\.0 200 /.test(answer)) {
      const toHeader = /^To: (.*)$/im.exec(answer)![1]!.trim();
      // Hung up at the end (an unanswered 200 would hold the platform's stop for the ACK's 32 s).
      answered.push(() => (from.send(c.ack(toHeader)), from.send(c.request('BYE', 2, toHeader))));
    }
    return { c, answer };
  };

  const caller = await peer('127.0.0.2');
  const held: Array<Awaited<ReturnType<typeof call>>> = [];
  for (let i = 0; i < BOUND; i++) {
    const h = await call(caller);
    t.match(h.answer, /^SIP\/2\.0 200 /, `pending INVITE ${i + 1} of ${BOUND}: answered (and not ACKed)`);
    held.push(h);
  }
  const over = await call(caller);
  t.match(over.answer, /^SIP\/2\.0 503 /, 'one more from the same address: 503');
  t.notMatch(over.answer, /^Retry-After:/im, 'without Retry-After (which would say the whole server is down for that long)');
  t.match(over.answer, /^To: .*;tag=/im, 'with a To tag');

  const elsewhere = await call(await peer('127.0.0.4'));
  t.match(elsewhere.answer, /^SIP\/2\.0 200 /, 'another address is not held back');

  const toHeader = /^To: (.*)$/im.exec(held[0]!.answer)![1]!.trim();
  caller.send(held[0]!.c.ack(toHeader));
  // The ACK is taken in its own time: until it has been, another INVITE is still one too many.
  let after = await call(caller);
  for (const end = Date.now() + 5000; /^SIP\/2\.0 503 /.test(after.answer) && Date.now() < end; after = await call(caller)) await new Promise((r) => setTimeout(r, 200));
  t.match(after.answer, /^SIP\/2\.0 200 /, 'once one is ACKed, the address has room again');
});
