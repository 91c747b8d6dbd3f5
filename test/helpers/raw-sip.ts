/** SIP written by hand, from node sockets: what a hostile or broken peer sends, which sipp cannot. */
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';

export interface UdpPeer {
  socket: dgram.Socket;
  /** Every datagram it was sent, as latin1 text. */
  got: string[];
  address: string;
  port: number;
  send(text: string): void;
}

/** A UDP SIP peer on `address` that records what it is sent and sends to the gateway's `sipPort` on 127.0.0.1. */
export async function udpPeer(sipPort: number, address = '127.0.0.2'): Promise<UdpPeer> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, address, () => r()));
  const got: string[] = [];
  socket.on('message', (m) => got.push(m.toString('latin1')));
  return { socket, got, address, port: socket.address().port, send: (text: string) => void socket.send(Buffer.from(text, 'latin1'), sipPort, '127.0.0.1') };
}

/** An audio offer (G.711 µ-law and telephone-event) for `media`; `lines` go at the end of its m-line (a direction, say). */
export const audioOffer = (media: { address: string; port: number }, lines: string[] = ['a=sendrecv']) =>
  `v=0\r\no=- 1 1 IN IP4 ${media.address}\r\ns=-\r\nc=IN IP4 ${media.address}\r\nt=0 0\r\nm=audio ${media.port} RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n${lines.map((l) => `${l}\r\n`).join('')}`;

/**
 * An INVITE from `from` to `number` at the gateway, with an audio offer for `media`, and the requests of its dialog.
 * `o.uri`: the Request-URI of its requests (default `sip:<number>@127.0.0.1:<sipPort>`); `o.to`: its To header; `o.sdp`: its offer.
 */
export function invite(to: { sipPort: number; number: string }, from: { address: string; port: number }, media: { address: string; port: number }, o: { uri?: string; to?: string; sdp?: string } = {}) {
  const callId = `${randomBytes(8).toString('hex')}@${from.address}`;
  const tag = randomBytes(4).toString('hex');
  const sdp = o.sdp ?? audioOffer(media);
  const head = (method: string, cseq: number, toHeader = o.to ?? `<sip:${to.number}@127.0.0.1>`) =>
    `${method} ${o.uri ?? `sip:${to.number}@127.0.0.1:${to.sipPort}`} SIP/2.0\r\nVia: SIP/2.0/UDP ${from.address}:${from.port};branch=z9hG4bK${randomBytes(6).toString('hex')};rport\r\nMax-Forwards: 70\r\n` +
    `From: <sip:caller@${from.address}>;tag=${tag}\r\nTo: ${toHeader}\r\nCall-ID: ${callId}\r\nCSeq: ${cseq} ${method}\r\nContact: <sip:caller@${from.address}:${from.port}>\r\n`;
  return {
    callId,
    text: `${head('INVITE', 1)}Content-Type: application/sdp\r\nContent-Length: ${sdp.length}\r\n\r\n${sdp}`,
    /** The ACK of the 200 whose To is `toHeader`; with `sdp`, carrying it (the answer to an offer the 200 made). */
    ack: (toHeader: string, cseq = 1, sdp = '') =>
      `${head('ACK', cseq, toHeader)}${sdp ? 'Content-Type: application/sdp\r\n' : ''}Content-Length: ${sdp.length}\r\n\r\n${sdp}`,
    /** The INVITE without a body: a delayed offer (RFC 3261 13.2.1); with `toHeader`, a re-INVITE without one (14.2). */
    bodiless: (cseq = 1, toHeader?: string) => `${head('INVITE', cseq, toHeader)}Content-Length: 0\r\n\r\n`,
    request: (method: string, cseq: number, toHeader: string) => `${head(method, cseq, toHeader)}Content-Length: 0\r\n\r\n`,
    /** A re-INVITE within the dialog (To with the gateway's tag) offering `offer`. */
    reinvite: (cseq: number, toHeader: string, offer: string) => `${head('INVITE', cseq, toHeader)}Content-Type: application/sdp\r\nContent-Length: ${offer.length}\r\n\r\n${offer}`,
  };
}

/** The final response (2xx to 6xx) among `got` of the call `callId`. */
export const finalOf = (got: string[], callId: string) => got.find((m) => /^SIP\/2\.0 [2-6]\d\d /.test(m) && m.includes(callId));

/** Polls `f` every 20 ms until it gives a value; throws after `ms`. */
export const until = async <T>(f: () => T | undefined, ms = 10_000): Promise<T> => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
    const v = f();
    if (v !== undefined) return v;
  }
  throw new Error('timed out');
};

/**
 * A response to `request` (as its text) from a hand-written UAS: its Via, From, To (given `toTag` when it has none),
 * Call-ID and CSeq, a Contact when given, and `sdp` as its body.
 */
export function responseTo(request: string, status: string, o: { toTag?: string; contact?: string; sdp?: string } = {}): string {
  const head = request.slice(0, request.indexOf('\r\n\r\n')).split('\r\n').slice(1);
  const named = (...names: string[]) => head.filter((l) => names.includes(l.slice(0, l.indexOf(':')).trim().toLowerCase()));
  const to = named('to', 't').map((l) => (o.toTag && !/;\s*tag=/i.test(l) ? `${l};tag=${o.toTag}` : l));
  const body = o.sdp ?? '';
  return [
    `SIP/2.0 ${status}`,
    ...named('via', 'v'),
    ...named('from', 'f'),
    ...to,
    ...named('call-id', 'i'),
    ...named('cseq'),
    ...(o.contact ? [`Contact: <${o.contact}>`] : []),
    ...(body ? ['Content-Type: application/sdp'] : []),
    `Content-Length: ${body.length}`,
    '',
    body,
  ].join('\r\n');
}
