/**
 * The media gateway's parts without a network: SRTP (RFC 3711's key derivation vector, round trips across
 * the rollover, forgeries refused), RFC 4733 digits, the reordering buffer, SDP offer/answer, turn-taking,
 * the SIP outcome of a dial, REFER targets, and the conversation machine carrying a call's turn fields; and one
 * RTP session on a loopback socket, for what its send tap says of each answer.
 */
import t from 'tap';
import fc from 'fast-check';
import { createActor, fromPromise, waitFor } from 'xstate';
import { SrtpContext, srtpSessionKeys, newSrtpKey, inlineOf, keyOfInline } from '../gateway/media/rtp/srtp.js';
import { readRtp, writeRtp } from '../gateway/media/rtp/packet.js';
import { DtmfReceiver, readDtmf, writeDtmf } from '../gateway/media/rtp/dtmf.js';
import { JitterBuffer } from '../gateway/media/rtp/jitter.js';
import { readSdp, writeSdp } from '../gateway/media/sdp.js';
import { choose } from '../gateway/media/media.js';
import { TurnTaking, type CallerTurn } from '../gateway/media/turn-taking.js';
import { outcomeOf } from '../gateway/media/dial.js';
import { referTarget } from '../gateway/media/call.js';
import { Bridge, bridgeTargetOf } from '../gateway/media/bridge.js';
import type { Dialog } from '../gateway/media/dialog.js';
import { sipStreamGuard } from '../gateway/media/stream-guard.js';
import { RtpPorts, RtpPortsExhausted } from '../gateway/media/rtp/ports.js';
import { userOf } from '../gateway/media/dialog.js';
import net from 'node:net';
import { packetize } from '../gateway/media/rtp/packetizer.js';
import { decode } from '../gateway/media/rtp/codec.js';
import { RtpSession } from '../gateway/media/rtp/session.js';
import { Pacer } from '../gateway/media/rtp/pacer.js';
import dgram from 'node:dgram';
import { conversationMachine, turnInput, type TurnOutcome } from '../machines/conversation.js';

const hex = (s: string) => Buffer.from(s, 'hex');

t.test('SRTP key derivation: RFC 3711 appendix B.3', async (t) => {
  const k = srtpSessionKeys({ key: hex('E1F97A0D3E018BE0D64FA32C06DE4139'), salt: hex('0EC675AD498AFEEBB6960B3AABE6') });
  t.equal(k.encKey.toString('hex').toUpperCase(), 'C61E7A93744F39EE10734AFE3FF7A087');
  t.equal(k.salt.toString('hex').toUpperCase(), '30CBBC08863D8C85D49DB34A9AE1');
  t.equal(k.authKey.toString('hex').toUpperCase(), 'CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4');
});

t.test('SRTP: what one side protects the other unprotects, across the rollover; a changed byte is refused', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 0, max: 0xffff }), fc.uint8Array({ minLength: 1, maxLength: 200 }), async (start, payload) => {
      const key = newSrtpKey();
      const tx = new SrtpContext(key);
      const rx = new SrtpContext(key);
      for (let i = 0; i < 4; i++) {
        const rtp = writeRtp({ payloadType: 0, marker: false, sequence: (start + i) & 0xffff, timestamp: i * 160, ssrc: 42, payload: Buffer.from(payload) });
        const srtp = tx.protect(rtp);
        if (srtp.subarray(12, 12 + payload.length).equals(Buffer.from(payload)) && payload.length > 4) return false;
        const forged = Buffer.from(srtp);
        forged[forged.length - 11] ^= 1;
        if (rx.unprotect(forged) !== null) return false;
        const back = rx.unprotect(srtp);
        if (!back || !back.equals(rtp)) return false;
      }
      return true;
    }),
    { numRuns: 60 },
  );
  const k = newSrtpKey();
  t.same(keyOfInline(`inline:${inlineOf(k)}|2^20|1:32`), k, 'an SDES inline key reads back (lifetime and MKI ignored)');
  t.equal(keyOfInline('inline:AAAA'), null, 'a short key is no key');
});

t.test('SRTP replay window: a packet received once is refused again; late ones within 64 are taken once, older ones never', async (t) => {
  const key = newSrtpKey();
  const tx = new SrtpContext(key);
  const rx = new SrtpContext(key);
  const packet = (seq: number) => tx.protect(writeRtp({ payloadType: 0, marker: false, sequence: seq & 0xffff, timestamp: seq * 160, ssrc: 42, payload: Buffer.alloc(20, seq & 0xff) }));
  const sent = new Map<number, Buffer>();
  for (const seq of [0xfffe, 0xffff, 0x10000, 0x10001, 0x10002, 0x10050, 0x10051]) sent.set(seq, packet(seq));
  const take = (seq: number) => rx.unprotect(sent.get(seq)!) !== null;
  t.ok(take(0xfffe) && take(0xffff), 'in order');
  t.notOk(take(0xffff), 'the same packet again: a replay');
  t.ok(take(0x10001), 'past the rollover, one lost in between');
  t.ok(take(0x10000), 'the one that came late');
  t.notOk(take(0x10000), 'and only once');
  t.ok(take(0x10050) && take(0x10051), 'far ahead');
  t.notOk(take(0x10002), 'older than the window (79 behind): refused though never seen');
  t.notOk(take(0x10051), 'a replay of the newest');

  // Per SSRC (RFC 3711 3.2.3): another stream under the key starts where it starts, and forged packets of
  // made-up SSRCs leave the streams as they were.
  const other = (seq: number, ssrc: number) => tx.protect(writeRtp({ payloadType: 0, marker: false, sequence: seq, timestamp: seq * 160, ssrc, payload: Buffer.alloc(20) }));
  // The first stream is at sequence 0x51 past a rollover: one starting at 10 is 71 packets behind it.
  const first = other(10, 77);
  t.not(rx.unprotect(first), null, 'a second stream starting below the first one\'s window');
  for (let i = 0; i < 20; i++) {
    const forged = Buffer.from(other(30_000 + i, 1000 + i));
    forged[forged.length - 1]! ^= 1;
    t.equal(rx.unprotect(forged), null);
  }
  t.equal(rx.unprotect(first), null, 'still its replay, after forged packets of 20 other SSRCs');
  t.equal(rx.unprotect(sent.get(0x10051)!), null, 'and the first stream\'s too');
});

t.test('RTP session: latched to the first source; another host\'s packets and digits are dropped until a re-INVITE moves the far end', async (t) => {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const digits: string[] = [];
  let audio = 0;
  const rtp = new RtpSession({ socket, codec: 'PCMU', dtmfPayloadType: 101, srtp: null, pacer: new Pacer(), onAudio: () => audio++, onDigit: (d) => digits.push(d) });
  const sender = async (address: string) => {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((r) => s.bind(0, address, () => r()));
    return s;
  };
  const caller = await sender('127.0.0.2');
  const stranger = await sender('127.0.0.9');
  t.teardown(() => {
    rtp.close();
    caller.close();
    stranger.close();
  });
  rtp.setPeer({ address: '127.0.0.2', port: caller.address().port });
  let seq = 1;
  const digit = (from: dgram.Socket, d: string) => {
    const ts = seq * 1000;
    for (const end of [false, true, true]) from.send(writeRtp({ payloadType: 101, marker: !end, sequence: seq++, timestamp: ts, ssrc: 7, payload: writeDtmf({ digit: d, end, volume: 10, duration: 800 }) }), rtp.localPort, '127.0.0.1');
  };
  const settle = () => new Promise((r) => setTimeout(r, 100));
  digit(caller, '1');
  await settle();
  digit(stranger, '9');
  await settle();
  t.same(digits, ['1'], 'the stranger\'s digit is dropped');
  t.ok(rtp.stats.rejected >= 3, 'and counted as rejected');
  rtp.setPeer({ address: '127.0.0.9', port: stranger.address().port });
  digit(stranger, '5');
  await settle();
  digit(caller, '2');
  await settle();
  t.same(digits, ['1', '5'], 'after a re-INVITE the new source is the one taken');
  rtp.setPeer({ address: '127.0.0.2', port: caller.address().port });
  digit(stranger, '6');
  await settle();
  digit(caller, '3');
  await settle();
  digit(stranger, '8');
  await settle();
  t.same(digits, ['1', '5', '6', '3'], "the address the SDP names is taken back whenever it sends (a latched stranger's next digit is dropped)");
  await new Promise((r) => setTimeout(r, 2100));
  digit(stranger, '7');
  await settle();
  t.same(digits, ['1', '5', '6', '3', '7'], 'after 2 s without a packet from the latched source, another source is taken (a NAT binding that moved)');
});

t.test('SIP stream guard: a message begun must be whole in time, a length must frame it, an address holds so many streams', async (t) => {
  const guard = sipStreamGuard({ messageDeadlineMs: 300, maxPerAddress: 3 });
  const server = net.createServer((s) => {
    guard(s);
    s.on('data', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const open = async () => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.on('error', () => {});
    // Read (the guard answers these requests, which lack From and To, 400): a socket with unread data never sees its end.
    s.resume();
    const closed = new Promise<number>((r) => s.on('close', () => r(Date.now())));
    await new Promise<void>((r) => s.on('connect', () => r()));
    return { s, closed };
  };
  const isClosedWithin = (c: { closed: Promise<number> }, ms: number) => Promise.race([c.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
  const whole = 'OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/TCP 1.2.3.4;branch=z9hG4bK1\r\nCall-ID: 1\r\nCSeq: 1 OPTIONS\r\nContent-Length: 4\r\n\r\nbody';

  const steady = await open();
  for (let i = 0; i < 4; i++) {
    steady.s.write(whole);
    await new Promise((r) => setTimeout(r, 150));
  }
  t.notOk(await isClosedWithin(steady, 200), 'whole messages, however long the stream lives: open');
  const slow = await open();
  slow.s.write('OPTIONS sip:a@b SIP/2.0\r\nVia: ');
  for (let i = 0; i < 3 && !slow.s.destroyed; i++) {
    await new Promise((r) => setTimeout(r, 100));
    slow.s.write('x');
  }
  t.ok(await isClosedWithin(slow, 1000), 'a message still not whole at the deadline: closed');
  const unframed = await open();
  unframed.s.write(whole.replace('Content-Length: 4', 'Content-Length: abc'));
  t.ok(await isClosedWithin(unframed, 500), 'a length that frames nothing: closed');

  // A busy stream: each read ends one message and begins the next, for longer than the deadline.
  const busy = await open();
  busy.s.write(whole.slice(0, 30));
  for (let i = 0; i < 6 && !busy.s.destroyed; i++) {
    await new Promise((r) => setTimeout(r, 100));
    busy.s.write(whole.slice(30) + whole.slice(0, 30));
  }
  t.notOk(await isClosedWithin(busy, 150), 'a busy stream whose every message comes whole in time: open');
  // Keep-alive blank lines, nearly the header bound's worth, then messages with bodies split across reads: still
  // in step (kept, the blank lines and the first part of the next message would pass the bound together).
  const idle = busy;
  for (let i = 0; i < 4; i++) {
    idle.s.write('\r\n\r\n'.repeat(3775));
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 50));
  const sdp = whole.replace('Content-Length: 4\r\n\r\nbody', 'Content-Length: 22\r\n\r\nv=0\r\ns=-\r\n\r\nt=0 0\r\n');
  idle.s.write(sdp.slice(0, sdp.length - 10));
  await new Promise((r) => setTimeout(r, 50));
  idle.s.write(sdp.slice(sdp.length - 10) + whole);
  t.notOk(await isClosedWithin(idle, 500), 'after 60 KB of keep-alives, bodies are still framed as bodies');
  idle.s.write(whole.replace('Content-Length: 4', 'Content-Length: abc'));
  t.ok(await isClosedWithin(idle, 500), 'and a length that frames nothing is still seen');

  // The steady one and two more are three; the closed ones no longer count.
  const more = [await open(), await open(), await open()];
  t.ok(await isClosedWithin(more[2]!, 500), 'the fourth stream of one address: closed');
  t.notOk(await isClosedWithin(more[1]!, 100), 'the third: open');
  for (const c of [steady, ...more]) c.s.destroy();
});

t.test("a caller's user part: escapes decoded, unless they decode to control characters", async (t) => {
  t.equal(userOf({ uri: 'sip:%2B14155550123@example.com', params: {} }), '+14155550123');
  t.equal(userOf({ uri: 'sip:J%C3%BCrgen@example.com', params: {} }), 'Jürgen');
  t.equal(userOf({ uri: 'sip:%0d%0aX-Injected@example.com', params: {} }), '%0d%0aX-Injected', 'kept as written');
  t.equal(userOf(undefined), '');
});

t.test('RTP ports: even ports of the range, each call\'s at random (not one after the last); a full range says so', async (t) => {
  const ports = new RtpPorts('127.0.0.1', 41_000, 41_199);
  const taken: dgram.Socket[] = [];
  t.teardown(() => taken.forEach((s) => s.close()));
  for (let i = 0; i < 8; i++) taken.push(await ports.bind());
  const numbers = taken.map((s) => s.address().port);
  t.ok(numbers.every((p) => p % 2 === 0 && p >= 41_000 && p <= 41_199), `even, in the range: ${numbers}`);
  t.equal(new Set(numbers).size, 8, 'each once');
  t.notOk(numbers.slice(1).every((p, i) => p === numbers[i]! + 2), 'not one after another');
  const one = new RtpPorts('127.0.0.1', 41_300, 41_301);
  taken.push(await one.bind());
  await t.rejects(one.bind(), RtpPortsExhausted, 'the one port held: exhausted');
});

/** A plain RTP session on loopback whose far end is a UDP socket of the test's. */
async function withFarEnd(dtmfPayloadType: number | null, pacer: Pacer) {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const far = dgram.createSocket('udp4');
  await new Promise<void>((r) => far.bind(0, '127.0.0.1', () => r()));
  const rtp = new RtpSession({ socket, codec: 'PCMU', dtmfPayloadType, srtp: null, pacer, onAudio: () => {}, onDigit: () => {} });
  rtp.setPeer({ address: '127.0.0.1', port: far.address().port });
  return { rtp, far };
}

t.test("a bridge: the destination's digits, sent under our offer's type, reach the caller under the caller's", async (t) => {
  const pacer = new Pacer();
  const leg = async (dtmfPayloadType: number) => {
    const { rtp, far } = await withFarEnd(dtmfPayloadType, pacer);
    const got: number[] = [];
    far.on('message', (m) => {
      const p = readRtp(m)!;
      if (p.ssrc === 0x0d0d0d0d) got.push(p.payloadType);
    });
    const dialog = { onBye: null, bye: async () => {} } as unknown as Dialog;
    return { rtp, far, got, dialog };
  };
  // The caller named 100; the destination answered our offer (101) with 96, and sends to us under 101.
  const caller = await leg(100);
  const destination = await leg(96);
  const bridge = new Bridge({ dialog: caller.dialog, rtp: caller.rtp }, { dialog: destination.dialog, rtp: destination.rtp, digitsFrom: 101 }, 60_000);
  t.teardown(async () => {
    await bridge.end('shutdown');
    caller.far.close();
    destination.far.close();
  });
  destination.far.send(writeRtp({ payloadType: 101, marker: true, sequence: 1, timestamp: 1, ssrc: 0x0d0d0d0d, payload: writeDtmf({ digit: '4', end: false, volume: 10, duration: 160 }) }), destination.rtp.localPort, '127.0.0.1');
  caller.far.send(writeRtp({ payloadType: 100, marker: true, sequence: 1, timestamp: 1, ssrc: 0x0d0d0d0d, payload: writeDtmf({ digit: '2', end: false, volume: 10, duration: 160 }) }), caller.rtp.localPort, '127.0.0.1');
  for (let i = 0; i < 50 && (caller.got.length < 1 || destination.got.length < 1); i++) await new Promise((r) => setTimeout(r, 10));
  t.same(caller.got, [100], "the destination's digit reaches the caller as 100");
  t.same(destination.got, [96], "the caller's reaches the destination as 96, the type its answer named");
});

t.test('RFC 4733: digits encode and decode; a digit counts once however many packets carry it', async (t) => {
  for (const d of '0123456789*#ABCD') t.equal(readDtmf(writeDtmf({ digit: d, end: true, volume: 10, duration: 800 }))?.digit, d);
  const got: string[] = [];
  const rx = new DtmfReceiver((d) => got.push(d));
  for (const [ts, d, end] of [[100, '4', false], [100, '4', false], [100, '4', true], [100, '4', true], [900, '2', false], [900, '2', true]] as const) rx.receive(ts, writeDtmf({ digit: d, end, volume: 10, duration: 160 }));
  t.same(got, ['4', '2']);
});

t.test('jitter buffer: reorders, skips a lost packet, restarts on a sequence far behind', async (t) => {
  const p = (sequence: number) => ({ payloadType: 0, marker: false, sequence, timestamp: 0, ssrc: 1, payload: Buffer.alloc(1) });
  const j = new JitterBuffer(3);
  const out = [10, 12, 11, 13].flatMap((s) => j.push(p(s)).map((x) => x.sequence));
  t.same(out, [10, 11, 12, 13], 'in order');
  t.same(j.push(p(12)).map((x) => x.sequence), [], 'a late duplicate is dropped');
  const lost = [15, 16, 17, 18].flatMap((s) => j.push(p(s)).map((x) => x.sequence));
  t.same(lost, [15, 16, 17, 18], '14 never came: skipped');
  t.same(j.push(p(65000)).map((x) => x.sequence), [65000], 'a replay from far earlier restarts the stream');
  t.same(readRtp(writeRtp(p(65535)))?.sequence, 65535);
});

t.test('SDP: an offer reads back; the answer takes the first G.711 codec offered; SAVP needs a key', async (t) => {
  const key = newSrtpKey();
  const offer = writeSdp({ address: '127.0.0.1', port: 4000, codecs: ['PCMA', 'PCMU'], dtmfPayloadType: 96, srtp: key, version: 1, sessionId: 7 });
  const read = readSdp(offer)!;
  t.same(read.codecs, ['PCMA', 'PCMU']);
  t.equal(read.dtmfPayloadType, 96);
  t.same(read.srtp, key);
  t.same(choose(read), { codec: 'PCMA', dtmf: 96 });
  t.match(choose(readSdp(offer.replace(/^a=crypto.*\r\n/m, ''))), { error: /SRTP/ }, 'SAVP without a key');
  t.match(choose(readSdp('v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=audio 5 RTP/AVP 18\r\na=rtpmap:18 G729/8000\r\n')), { error: /G\.711/ });
  t.match(choose(readSdp('not sdp')), { error: /no audio/ });
  const audio = (m: string, extra = '') => `v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\n${m}\r\na=rtpmap:0 PCMU/8000\r\n${extra}`;
  for (const port of ['0', '65536', '99999999']) t.match(choose(readSdp(audio(`m=audio ${port} RTP/AVP 0`))), { error: /no audio/ }, `an audio stream on port ${port}: declined or no port`);
  t.equal(readSdp(audio('m=audio 5004 RTP/AVP 0 300', 'a=rtpmap:300 telephone-event/8000\r\n'))!.dtmfPayloadType, null, 'payload type 300 is none');
  t.equal(readSdp(audio('m=audio 5004 RTP/AVP 0 4294967297', 'a=rtpmap:4294967297 telephone-event/8000\r\n'))!.dtmfPayloadType, null);
});

/** 20 ms of a square wave at `level` (0: silence): speech to the energy detector above its level. */
const frame = (level: number) => {
  const f = new Int16Array(160);
  for (let i = 0; i < 160; i++) f[i] = i % 2 ? level : -level;
  return f;
};

t.test('turn-taking: an utterance after speech and silence, barge-in while the agent speaks, digits, silence', async (t) => {
  const turns: CallerTurn[] = [];
  let speaking = true;
  let stopped = 0;
  const tt = new TurnTaking({ speechLevel: 600, speechStartMs: 60, endSilenceMs: 200, noInputMs: 300, interDigitMs: 100, maxUtteranceMs: 5000 }, () => speaking, () => {
    stopped++;
    speaking = false;
  }, (x) => turns.push(x));
  for (let i = 0; i < 20; i++) tt.audio(frame(3000));
  for (let i = 0; i < 10; i++) tt.audio(frame(0));
  t.equal(turns.length, 1);
  t.equal(turns[0].kind, 'speech');
  t.equal((turns[0] as { bargeIn: boolean }).bargeIn, true, 'spoken over the agent');
  t.equal(stopped, 1, 'the agent was stopped');
  tt.digit('1');
  tt.digit('2');
  tt.digit('#');
  t.same(turns[1], { ...turns[1], kind: 'dtmf', digits: '12', bargeIn: false }, '# ends the digits');
  tt.agentDone();
  await new Promise((r) => setTimeout(r, 400));
  t.equal(turns[2]?.kind, 'silence', 'nothing heard after the agent finished');
  for (let i = 0; i < 20; i++) tt.audio(frame(3000));
  await new Promise((r) => setTimeout(r, 300));
  t.equal(turns[3]?.kind, 'speech', 'an utterance whose audio just stops (silence suppression) ends too');
  // Digits keyed on without a pause make turns of 64 at most, not one input that grows as long as they come.
  for (let i = 0; i < 150; i++) tt.digit(String(i % 10));
  await new Promise((r) => setTimeout(r, 200));
  t.same(turns.slice(4).map((x) => (x as { digits: string }).digits.length), [64, 64, 22]);
  tt.close();
});

t.test('turn-taking on hold: what the far end sends makes no turn and no barge-in, an utterance under way is dropped; taken back, the no-input clock runs and speech is a turn', async (t) => {
  const turns: CallerTurn[] = [];
  let speaking = false;
  let stopped = 0;
  const tt = new TurnTaking({ speechLevel: 600, speechStartMs: 60, endSilenceMs: 200, noInputMs: 300, interDigitMs: 100, maxUtteranceMs: 5000 }, () => speaking, () => void stopped++, (x) => turns.push(x));
  t.teardown(() => tt.close());
  tt.agentDone();
  // The caller starts to speak; the far end puts the call on hold mid-utterance, then sends its music.
  for (let i = 0; i < 10; i++) tt.audio(frame(3000));
  tt.hold();
  speaking = true;
  for (let i = 0; i < 50; i++) tt.audio(frame(3000));
  for (let i = 0; i < 20; i++) tt.audio(frame(0));
  await new Promise((r) => setTimeout(r, 400));
  t.same(turns, [], 'no turn: neither the utterance the hold cut nor the music, nor a silence turn');
  t.equal(stopped, 0, 'no barge-in');
  // Taken back: the dropped utterance was no turn, so the caller is still awaited.
  speaking = false;
  tt.resume();
  await new Promise((r) => setTimeout(r, 400));
  t.equal(turns[0]?.kind, 'silence', 'the no-input clock ran again after the hold');
  for (let i = 0; i < 20; i++) tt.audio(frame(3000));
  for (let i = 0; i < 10; i++) tt.audio(frame(0));
  t.equal(turns[1]?.kind, 'speech', 'speech is a turn again');
});

t.test('dial outcomes from SIP statuses', async (t) => {
  t.equal(outcomeOf(486, 'Busy Here', true, false).outcome, 'busy');
  t.equal(outcomeOf(600, 'Busy Everywhere', true, false).outcome, 'busy');
  t.equal(outcomeOf(603, 'Decline', true, false).outcome, 'rejected');
  t.equal(outcomeOf(403, 'Forbidden', false, false).outcome, 'rejected');
  t.equal(outcomeOf(487, 'Request Terminated', true, true).outcome, 'no_answer', 'CANCELled while ringing');
  t.same(outcomeOf(408, 'Request Timeout', false, true), { outcome: 'unreachable', sip_status: null, reason: 'Request Timeout', conversation_id: null }, 'nothing ever answered');
  t.equal(outcomeOf(503, 'Service Unavailable', false, false).outcome, 'unreachable');
  t.equal(outcomeOf(500, 'Server Internal Error', false, false).outcome, 'unreachable', 'any 5xx');
  t.equal(outcomeOf(488, 'Not Acceptable Here', false, false).outcome, 'rejected', 'other refusals');
  t.same(outcomeOf(404, '', false, false, true), { outcome: 'unreachable', sip_status: null, reason: '', conversation_id: null }, "the stack's own 404 (a name that did not resolve): no status came");
  t.same(outcomeOf(503, 'could not send: EHOSTUNREACH', false, false, true).sip_status, null, 'a send that failed');
  t.equal(outcomeOf(486, 'Busy Here', true, false).reason, '486 Busy Here');
});

t.test('handoff destinations as REFER targets', async (t) => {
  t.equal(referTarget('sip:desk@pbx.example.com'), 'sip:desk@pbx.example.com');
  t.equal(referTarget('+442079460000'), 'tel:+442079460000');
  t.equal(referTarget('live_agent'), null, 'a queue name is no SIP target');
  t.equal(referTarget('sip:bad target'), null);
});

t.test('bridged transfers: where the B leg is called', async (t) => {
  const trunk = { host: 'sip.carrier.example', port: 5080, transport: 'tcp' as const, username: 'acme', password: 'pw' };
  t.same(bridgeTargetOf('tel:+442079460000', trunk), { target: { host: 'sip.carrier.example', port: 5080, transport: 'tcp' }, to: '+442079460000', credentials: { user: 'acme', password: 'pw' } }, 'a number through the trunk, with its credentials');
  t.same(bridgeTargetOf('tel:+442079460000', { host: 'h', port: 5060, transport: 'udp' }), { target: { host: 'h', port: 5060, transport: 'udp' }, to: '+442079460000' }, 'none without them');
  t.same(bridgeTargetOf('sip:desk@pbx.example.com', trunk), { target: { host: 'pbx.example.com', port: 5060, transport: 'udp' }, to: 'desk' }, 'a SIP URI at its own host');
  t.same(bridgeTargetOf('sip:desk@10.0.0.9:5999;transport=tcp', trunk)?.target, { host: '10.0.0.9', port: 5999, transport: 'tcp' }, 'its port and transport');
  t.same(bridgeTargetOf('sips:desk@pbx.example.com', trunk)?.target, { host: 'pbx.example.com', port: 5061, transport: 'tls' }, 'sips: over TLS');
  t.equal(bridgeTargetOf('sip:', trunk), null, 'no host: nowhere to call');
  await fc.assert(
    fc.property(fc.string({ maxLength: 40 }), (s) => {
      const target = referTarget(s);
      // Whatever a function hands off to, the B leg's target is read without throwing.
      if (target) bridgeTargetOf(target, trunk);
      return true;
    }),
  );
});

t.test('packetizing: 20 ms G.711 frames, the last padded', async (t) => {
  const pcm = new Int16Array(400).fill(1000);
  const frames = packetize('PCMU', pcm);
  t.equal(frames.length, 3);
  t.ok(frames.every((f) => f.length === 160));
  t.ok(Math.abs(decode('PCMU', frames[0])[0] - 1000) < 40, 'µ-law round trip');
});

t.test('conversation machine: a call turn carries its voice fields to the turn effect', async (t) => {
  const machine = conversationMachine.provide({
    actors: {
      startConversation: fromPromise(async (): Promise<TurnOutcome> => ({ at: 2, turns: [], response: 'hi', state: {}, handoff: null, end: false, oodTurns: 0, functionErrors: 0, variant: null, artifactVersion: null })),
      sleepUntil: fromPromise(() => new Promise<number>(() => {})),
    },
  });
  const a = createActor(machine, { input: { id: 'c' } }).start();
  a.send({ type: 'START', start: { accountId: 'a', projectId: 'p', environment: 'live', channel: 'VOICE-SIP', variantId: null, integrationAttributes: {}, asrLangCode: '', ttsLangCode: '', initialMessage: null, fromNumber: '+1', toNumber: '+2', sipHeaders: { 'x-a': 'b' }, callSid: 'IN-1', at: 1, idleTimeoutMs: 60_000 } });
  await waitFor(a, (s) => s.value === 'idle');
  a.send({ type: 'MESSAGE', message: '', metadata: {}, integrationAttributes: {}, voice: { dtmf: '42', bargeIn: true }, at: 3 });
  // The turn effect is the actor host's (`ActorKind.effect`): it runs with `turnInput` while `turn` is tagged.
  t.ok(a.getSnapshot().hasTag('turn'));
  t.same(turnInput(a.getSnapshot().context).voice, { dtmf: '42', bargeIn: true });
  t.same(a.getSnapshot().context.start?.sipHeaders, { 'x-a': 'b' });
  a.stop();
});

t.test('RTP session: the send tap gets each answer\'s label with its first frame, an answer queued behind another too; none after a barge-in stop', async (t) => {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const sink = dgram.createSocket('udp4');
  await new Promise<void>((r) => sink.bind(0, '127.0.0.1', () => r()));
  const pacer = new Pacer();
  const rtp = new RtpSession({ socket, codec: 'PCMU', dtmfPayloadType: null, srtp: null, pacer, onAudio: () => {}, onDigit: () => {} });
  rtp.setPeer({ address: '127.0.0.1', port: sink.address().port });
  t.teardown(() => {
    rtp.close();
    sink.close();
  });
  const sent: Array<string | undefined> = [];
  rtp.onSent = (_frame, answer) => sent.push(answer);
  const frames = (n: number) => Array.from({ length: n }, () => Buffer.alloc(160, 0x7f));
  rtp.play(frames(3), 'first');
  rtp.play(frames(2), 'second');
  rtp.play(frames(4));
  while (rtp.playing) await new Promise((r) => setTimeout(r, 20));
  t.same(sent, ['first', undefined, undefined, 'second', undefined, '', undefined, undefined, undefined], 'one label per answer, on its first frame');
  sent.length = 0;
  rtp.play(frames(50), 'cut');
  await new Promise((r) => setTimeout(r, 70));
  rtp.stopPlayback();
  rtp.play(frames(1), 'next');
  while (rtp.playing) await new Promise((r) => setTimeout(r, 20));
  t.equal(sent[0], 'cut');
  t.equal(sent[sent.length - 1], 'next', 'the answer after a barge-in starts with its own label');
  t.ok(sent.length < 50, 'the cut answer\'s rest was not sent');
});

t.test('RTP session bridged over SRTP: the other leg\'s packets go out as a new stream, with a rollover counter of their own', async (t) => {
  const pacer = new Pacer();
  const key = newSrtpKey();
  // An agent stream whose sequence numbers are past the middle of their range: a packet of another stream with
  // a low sequence number would otherwise read as a wrap of this one (its rollover counter 1, which the far end,
  // starting the new stream at 0, cannot authenticate). The first sequence number is random: a few sessions are
  // opened until one starts high.
  for (let attempt = 0; attempt < 40; attempt++) {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
    const far = dgram.createSocket('udp4');
    await new Promise<void>((r) => far.bind(0, '127.0.0.1', () => r()));
    const rtp = new RtpSession({ socket, codec: 'PCMU', dtmfPayloadType: null, srtp: { local: key, remote: newSrtpKey() }, pacer, onAudio: () => {}, onDigit: () => {} });
    rtp.setPeer({ address: '127.0.0.1', port: far.address().port });
    const received: Buffer[] = [];
    far.on('message', (m) => received.push(m));
    while (received.length < 2) await new Promise((r) => setTimeout(r, 10));
    const agent = new SrtpContext(key);
    const seqs = received.map((m) => readRtp(agent.unprotect(m)!)!.sequence);
    if (seqs[seqs.length - 1] < 0x9000) {
      rtp.close();
      far.close();
      continue;
    }
    rtp.relay(() => {});
    received.length = 0;
    rtp.forward(writeRtp({ payloadType: 0, marker: true, sequence: 7, timestamp: 1000, ssrc: 0x0b0b0b0b, payload: Buffer.alloc(160, 0xff) }));
    // What the far end takes from the new stream (packets of the agent's stream still in flight are not of it).
    const fromOther = () => received.map((m) => new SrtpContext(key).unprotect(m)).filter((p) => p && readRtp(p)!.ssrc === 0x0b0b0b0b);
    for (let i = 0; i < 50 && fromOther().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const other = fromOther();
    t.equal(other.length, 1, `the forwarded packet authenticates as a new stream's first (the agent's stream was at ${seqs[seqs.length - 1]})`);
    rtp.close();
    far.close();
    return;
  }
  t.fail('no session started its sequence numbers high in 40 tries');
});

t.test("RTP session bridged: the other leg's digits go out under this far end's telephone-event type, or not at all", async (t) => {
  const pacer = new Pacer();
  const open = async (dtmfPayloadType: number | null) => {
    const { rtp, far } = await withFarEnd(dtmfPayloadType, pacer);
    rtp.relay(() => {});
    const received: Array<{ payloadType: number; marker: boolean; ssrc: number }> = [];
    far.on('message', (m) => {
      const p = readRtp(m)!;
      if (p.ssrc === 0x0c0c0c0c) received.push({ payloadType: p.payloadType, marker: p.marker, ssrc: p.ssrc });
    });
    t.teardown(() => {
      rtp.close();
      far.close();
    });
    return { rtp, received };
  };
  const digit = () => writeRtp({ payloadType: 96, marker: true, sequence: 1, timestamp: 1, ssrc: 0x0c0c0c0c, payload: writeDtmf({ digit: '5', end: false, volume: 10, duration: 160 }) });
  const audio = () => writeRtp({ payloadType: 0, marker: false, sequence: 2, timestamp: 161, ssrc: 0x0c0c0c0c, payload: Buffer.alloc(160, 0xff) });
  const named101 = await open(101);
  named101.rtp.forward(digit(), 96);
  named101.rtp.forward(audio(), 96);
  const same96 = await open(96);
  same96.rtp.forward(digit(), 96);
  const none = await open(null);
  none.rtp.forward(digit(), 96);
  none.rtp.forward(audio(), 96);
  for (let i = 0; i < 50 && (named101.received.length < 2 || same96.received.length < 1 || none.received.length < 1); i++) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 30));
  t.same(named101.received.map((p) => [p.payloadType, p.marker]), [[101, true], [0, false]], 'digits renumbered, marker kept, audio as it came');
  t.same(same96.received.map((p) => p.payloadType), [96], 'the same type passes as it is');
  t.same(none.received.map((p) => p.payloadType), [0], 'a far end that named no telephone-event gets the audio only');
});
