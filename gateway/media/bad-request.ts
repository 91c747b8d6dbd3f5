import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:dgram';
import type { SipMessage } from 'sip';
import sip from 'sip';

/**
 * Requests that parse as SIP but cannot be taken: a `400 Bad Request` whose reason phrase names the problem
 * (RFC 3261 8.2, 16.3 and 21.4.1), a `505 Version Not Supported` for a SIP version other than 2.0 (21.5.7), a
 * `483 Too Many Hops` for a request that would start or change something with `Max-Forwards: 0` (16.3, 21.4.21),
 * sent when it can be routed back, i.e. the request has a top Via (a response is matched to its request by that
 * Via, and goes back the way the request came: RFC 18.2.2).
 *
 * The `sip` package drops a message without Via, From, To, Call-ID or CSeq (or with one it could not parse) in its
 * transport, unanswered (its `checkMessage`), and so a message on a stream without Content-Length: the UA never
 * sees them, so they are answered here, from the socket or stream they came on (`answerDatagram`,
 * `answerStreamMessage`). What the package passes on with a CSeq that is not one (a number of 2^31 or more, a
 * method other than the request's) the UA answers through the stack (`requestFault` in `SipEndpoint`).
 */

/** The largest CSeq number (RFC 3261 8.1.1.5: below 2^31). */
const MAX_CSEQ = 2 ** 31 - 1;

/** Why a request cannot be taken: the status of its refusal and the reason phrase naming the problem. */
export interface RequestFault {
  status: 400 | 483 | 505;
  reason: string;
}

/**
 * Methods that only end something or ask about the UA (RFC 3261 16.3 lets even a proxy answer OPTIONS itself): a
 * `Max-Forwards: 0` does not refuse them (a CANCEL or BYE refused would leave a call ringing or up). An ACK is
 * never answered.
 */
const HOPLESS = new Set(['ACK', 'CANCEL', 'BYE', 'OPTIONS']);

/**
 * Why the request `m` (as the `sip` package parsed it) cannot be taken; null when it can (or is not a request).
 * `stream`: it came over TCP or TLS, where Content-Length frames a message (RFC 3261 18.3); over UDP the package
 * cuts a body to its Content-Length, so a datagram whose body is shorter than that (or whose length is no number)
 * is known by a body shorter than the length.
 */
export function requestFault(m: SipMessage, o: { stream?: boolean } = {}): RequestFault | null {
  if (!m.method) return null;
  const bad = (reason: string): RequestFault => ({ status: 400, reason });
  if (m.version !== undefined && m.version !== '2.0') return { status: 505, reason: 'Version Not Supported' };
  const h = m.headers;
  if (!Array.isArray(h.via) || h.via.length === 0) return bad('Missing Via Header Field');
  if (!h.from) return bad('Missing or Malformed From Header Field');
  if (!h.to) return bad('Missing or Malformed To Header Field');
  if (!h['call-id']) return bad('Missing Call-ID Header Field');
  if (!h.cseq) return bad('Missing or Malformed CSeq Header Field');
  const seq: unknown = h.cseq.seq;
  if (typeof seq !== 'number' || !Number.isInteger(seq) || seq < 0 || seq > MAX_CSEQ) return bad('Malformed CSeq Header Field');
  if (h.cseq.method !== m.method) return bad('CSeq Method Does Not Match the Request');
  const length: unknown = h['content-length'];
  if (o.stream && length === undefined) return bad('Missing Content-Length Header Field');
  if (length !== undefined && (typeof length !== 'number' || !Number.isInteger(length) || length < 0)) return bad('Malformed Content-Length Header Field');
  if (typeof length === 'number' && length > (m.content ?? '').length) return bad('Content-Length Larger Than the Message Body');
  if (!HOPLESS.has(m.method) && /^0+$/.test(String(h['max-forwards'] ?? '').trim())) return { status: 483, reason: 'Too Many Hops' };
  return null;
}

/** Whether the `sip` package passes the message on to the UA (its transport's `checkMessage`, and on a stream its parser's need of a length). */
function passedOn(m: SipMessage, stream: boolean): boolean {
  const h = m.headers;
  return Array.isArray(h.via) && h.via.length > 0 && !!h['call-id'] && !!h.to && !!h.from && !!h.cseq && (!stream || h['content-length'] !== undefined);
}

/**
 * The refusal of `m` for `fault` (a bare reason phrase: a 400), with a To tag when it has a To (a final answer
 * carries one: RFC 3261 8.2.6.2), in SIP/2.0 whatever version the request named.
 */
export function badRequest(m: SipMessage, fault: RequestFault | string): SipMessage {
  const { status, reason } = typeof fault === 'string' ? { status: 400, reason: fault } : fault;
  const rs = sip.makeResponse(m, status, reason);
  rs.version = '2.0';
  const to = rs.headers.to;
  if (to && typeof to === 'object' && !to.params?.tag) rs.headers.to = Object.assign({}, to, { params: Object.assign({}, to.params, { tag: randomBytes(6).toString('hex') }) });
  return rs;
}

/**
 * The 400 (or 505, `requestFault`) as text for a message the `sip` package drops unanswered: a request with a top
 * Via (else it cannot be routed) that lacks a header field it needs; null for anything else (a well-formed request, an ACK, which is never
 * answered, a response, what does not parse).
 */
function answerToDropped(m: SipMessage | undefined, stream: boolean, received?: { address: string; port: number }): string | null {
  if (!m?.method || m.method === 'ACK' || passedOn(m, stream)) return null;
  const via = Array.isArray(m.headers.via) ? m.headers.via[0] : undefined;
  if (!via?.host) return null;
  const fault = requestFault(m, { stream });
  if (!fault) return null;
  if (received) {
    // As the package marks every request it takes (RFC 3261 18.2.1, RFC 3581).
    via.params = Object.assign({}, via.params, { received: received.address }, 'rport' in (via.params ?? {}) ? { rport: String(received.port) } : {});
  }
  return sip.stringify(badRequest(m, fault));
}

/**
 * Answers a datagram that the `sip` package's UDP transport will drop (see `answerToDropped`), to where it came from,
 * as the package answers every request over UDP. Never throws: a datagram is only ever answered or not.
 */
export function answerDatagram(socket: Socket, data: Buffer, from: { address: string; port: number }, log?: (msg: string, extra?: Record<string, unknown>) => void): void {
  try {
    const answer = answerToDropped(sip.parse(data.toString('latin1')), false, from);
    if (answer) socket.send(Buffer.from(answer, 'latin1'), from.port, from.address);
  } catch (err) {
    log?.('could not answer a malformed SIP request', { err: String(err) });
  }
}

/**
 * Answers, on its stream, a message that the package's stream parser will drop (see `answerToDropped`): `m` is its
 * header block as `sip.parse` read it, the stream framed by it (`stream-guard.ts`).
 */
export function answerStreamMessage(stream: { write(s: string, encoding: 'latin1'): unknown; destroyed: boolean }, m: SipMessage | undefined): void {
  try {
    const answer = answerToDropped(m, true);
    if (answer && !stream.destroyed) stream.write(answer, 'latin1');
  } catch {
    // Only ever answered or not.
  }
}
