import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { isIP } from 'node:net';
import tls from 'node:tls';
import type { Aor, Flow, Remote, SipMessage, SipUri, Stack } from 'sip';
import sip from './sip-package.js';
import digest from 'sip/digest.js';
import { allListening, capturingListeners } from './listening.js';
import { closeFailedHandshakes, sipStreamGuard, TLS_HANDSHAKE_MS } from './stream-guard.js';
import { PerAddress } from './per-address.js';
import { answerDatagram, badRequest, requestFault } from './bad-request.js';
import { utf8 } from '../../platform/utf8.js';

/**
 * The SIP dialog layer of the media gateway, in one place (RFC 3261): a user agent over the `sip` package's
 * transaction and transport layers (UDP, TCP, TLS) that
 * - as UAS takes INVITEs (100 Trying, 180, 200 with the answer retransmitted until the ACK, or a final
 *   error), CANCEL (200, then 487 to the INVITE), and in-dialog BYE, re-INVITE (with an offer, or without one:
 *   our offer in the 200, the answer in the ACK), NOTIFY, OPTIONS and INFO;
 * - as UAC sends INVITEs (answering one 401/407 challenge with digest credentials), ACKs a 2xx, CANCELs
 *   a ringing INVITE, and sends BYE and REFER inside a dialog.
 * Everything about audio lives elsewhere: this file moves SDP bodies, it does not read them.
 */

export type SipTransport = 'udp' | 'tcp' | 'tls';

/** Where a request goes: a trunk, a softphone, another gateway. */
export interface SipTarget {
  host: string;
  port: number;
  transport: SipTransport;
}

export interface SipEndpointOptions {
  /** The address the UA listens on and names in Via and Contact (HOST). */
  host: string;
  /** UDP and TCP. */
  port: number;
  /** TLS, when `tls` is given. */
  tlsPort?: number;
  tls?: { key: string | Buffer; cert: string | Buffer; verifyPeer: boolean };
  /**
   * INVITEs from one address that are neither refused nor ACKed; the next is 503. Each answered
   * INVITE holds an RTP port until its ACK or for `ACK_WAIT_MS`: without a bound, one sender of INVITEs it never
   * ACKs (a spoofed source, say) holds the whole range. A trunk ACKs at once. Default 64.
   */
  pendingInvitesPerAddress?: number;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
}

const tag = () => randomBytes(6).toString('hex');
/** A number or name as a SIP URI's user part: `+` and the other unreserved characters stay as they are (RFC 3261 25.1). */
const userPart = (s: string) => s.replace(/[^A-Za-z0-9\-_.!~*'()&=+$,;?/]/g, (c) => encodeURIComponent(c));
/**
 * The largest request sent over UDP: RFC 3261 18.1.1 sends a request over TCP when it is larger than 1,300 bytes
 * and the path MTU is unknown (200 bytes under Ethernet's 1,500, for the headers a proxy may add).
 */
const UDP_MAX_REQUEST = 1300;
/**
 * How long a large INVITE sent over TCP may get no answer at all before it goes over UDP (see `invite`): a far
 * end that has it answers 100 Trying within 200 ms (RFC 3261 17.2.1); the wait stays well inside a ring timeout.
 */
const TCP_ANSWER_MS = 2000;
/** How long a 200 OK is retransmitted while no ACK comes (64·T1, RFC 3261 13.3.1.4). */
const ACK_WAIT_MS = 32_000;

/** Headers the platform reads or writes itself; the others of an INVITE are the call's SIP headers. */
const CORE_HEADERS = new Set([
  'via', 'to', 'from', 'call-id', 'cseq', 'contact', 'content-type', 'content-length', 'max-forwards', 'record-route', 'route',
  'allow', 'supported', 'user-agent', 'authorization', 'proxy-authorization', 'www-authenticate', 'proxy-authenticate',
  'expires', 'session-expires', 'min-se', 'require', 'accept', 'content-disposition', 'server', 'subject', 'organization', 'prack',
]);

/**
 * A Contact's (or From's) URI as a SIP or SIPS URI with its scheme in lower case, or null when it is none (`*`,
 * `tel:`, absent). A scheme is case-insensitive (RFC 3261 19.1.1: `SIP:` is `sip:`); the `sip` package reads only
 * the lower-case ones.
 */
export function sipUriOf(uri: unknown): string | null {
  if (typeof uri !== 'string') return null;
  const m = /^(sips?):/i.exec(uri.trim());
  return m ? `${m[1]!.toLowerCase()}:${uri.trim().slice(m[0].length)}` : null;
}

/** Whether the `sip` package read each of these Record-Route entries' URIs (it reads no IPv6 literal). */
const routesReadable = (routes: unknown[]): boolean => routes.every((r) => !!(r as Aor | undefined)?.uri && typeof (r as Aor).uri === 'object');

/** An in-dialog request that cannot be sent anywhere: its dialog ends on this side (`Dialog.send`). */
class UnroutableRequest extends Error {}

/** The user part of a To/From header (the dialled or calling number), or ''. */
export function userOf(h: Aor | undefined): string {
  if (!h) return '';
  try {
    const raw = sip.parseUri(h.uri).user ?? '';
    const user = decodeURIComponent(raw);
    // A number or name holds no control characters: one whose escapes decode to some (`%0d%0a`) is kept as
    // written, so that no line break reaches a record, a function or a header made from it.
    return /[\u0000-\u001f\u007f]/.test(user) ? raw : user;
  } catch {
    return '';
  }
}

/*
 * The `sip` stack reads and writes messages as latin1 ("binary") strings, one character per byte, while SIP
 * header values are UTF-8 (RFC 3261, 7.3.1). Header values the platform passes through are converted at this
 * edge: written as their UTF-8 bytes, read back from them.
 */
/** A header value as the stack writes it: its UTF-8 bytes, one character each. */
export function toWire(value: string): string {
  return Buffer.from(value, 'utf8').toString('latin1');
}

/** A header value as the stack read it, decoded from UTF-8; bytes that are not UTF-8 are kept as latin1. */
export function fromWire(value: string): string {
  if (!/[\u0080-\u00ff]/.test(value)) return value;
  return utf8(Buffer.from(value, 'latin1')) ?? value;
}

/** The headers of a request the platform does not interpret, as name → value (names lower-case). */
export function extraHeaders(m: SipMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(m.headers)) {
    if (CORE_HEADERS.has(name) || typeof value !== 'string') continue;
    out[name] = fromWire(value);
  }
  return out;
}

/** An INVITE that came in, not yet answered. */
export class IncomingInvite {
  readonly localTag = tag();
  /** Set when the caller CANCELled before an answer. */
  cancelled = false;
  onCancel: (() => void) | null = null;
  private answered = false;

  /** `settled`: called once, when the INVITE is refused or its 2xx is ACKed (or never will be). */
  constructor(private readonly ua: SipEndpoint, readonly request: SipMessage, readonly remote: Remote, private readonly settled: () => void = () => {}) {}

  get callId(): string {
    return this.request.headers['call-id'];
  }
  get sdp(): string {
    return this.request.content ?? '';
  }
  get fromUser(): string {
    return userOf(this.request.headers.from);
  }
  get toUser(): string {
    return userOf(this.request.headers.to);
  }
  get transport(): SipTransport {
    return this.remote.protocol.toLowerCase() as SipTransport;
  }

  private response(status: number, reason: string, content?: string): SipMessage {
    const rs = sip.makeResponse(this.request, status, reason);
    rs.headers.to = Object.assign({}, this.request.headers.to, { params: Object.assign({}, this.request.headers.to.params, status > 100 ? { tag: this.localTag } : {}) });
    if (status > 100 && status < 300) rs.headers.contact = [{ uri: this.ua.contactUri(this.transport), params: {} }];
    if (this.request.headers['record-route']) rs.headers['record-route'] = this.request.headers['record-route'];
    if (content) {
      rs.headers['content-type'] = 'application/sdp';
      rs.content = content;
    }
    return rs;
  }

  /** 180 Ringing (or another provisional answer). */
  progress(status = 180, reason = 'Ringing'): void {
    if (!this.answered && !this.cancelled) this.ua.stack.send(this.response(status, reason));
  }

  /** 200 OK with our SDP: the dialog starts (its `confirmed` resolves at the ACK). */
  accept(sdp: string): Dialog {
    this.answered = true;
    const rs = this.response(200, 'OK', sdp);
    const h = this.request.headers;
    const dialog = new Dialog(this.ua, {
      callId: this.callId,
      localTag: this.localTag,
      remoteTag: h.from.params?.tag ?? '',
      localAor: h.to,
      remoteAor: h.from,
      // Without a Contact (which RFC 3261 8.1.1.8 asks for), the From's URI; null when that is no SIP URI either.
      remoteTarget: h.contact?.[0] ? sipUriOf(h.contact[0].uri) : sipUriOf(h.from.uri),
      routeSet: h['record-route'] ?? [],
      source: { protocol: this.remote.protocol, address: this.remote.address, port: this.remote.port, local: this.remote.local ?? { address: this.ua.o.host, port: this.ua.o.port } },
      transport: this.transport,
      localSeq: 0,
      remoteSeq: h.cseq.seq,
    });
    this.ua.stack.send(rs);
    dialog.awaitAck(rs);
    void dialog.confirmed().then(this.settled);
    return dialog;
  }

  /** A final error answer (486 Busy Here, 603 Decline, 404, 488 ...). */
  reject(status: number, reason: string): void {
    if (this.answered) return;
    this.answered = true;
    this.ua.stack.send(this.response(status, reason));
    this.settled();
  }

  /** The caller's CANCEL: 487 to the INVITE. */
  cancel(): void {
    if (this.answered) return;
    this.cancelled = true;
    this.reject(487, 'Request Terminated');
    this.onCancel?.();
  }
}

interface DialogState {
  callId: string;
  localTag: string;
  remoteTag: string;
  localAor: Aor;
  remoteAor: Aor;
  /** Where in-dialog requests go (the far end's Contact, a SIP URI); null: nowhere (see `Dialog.request`). */
  remoteTarget: string | null;
  /** Each with a URI the `sip` package read (an object). */
  routeSet: Aor[];
  /**
   * The flow the dialog's requests came from (inbound) or its INVITE went to (outbound, when the trunk's host is an
   * address): where an in-dialog request goes when its next hop is not one the `sip` package can reach (`request`).
   */
  source: Flow | null;
  transport: SipTransport;
  localSeq: number;
  remoteSeq: number;
}

/** An established call's dialog: in-dialog requests both ways. */
export class Dialog {
  /** The far end hung up (BYE), or we did. */
  ended = false;
  onBye: (() => void) | null = null;
  /** A re-INVITE's offer; answer with our SDP (null: refuse with 488). */
  onReinvite: ((sdp: string) => string | null) | null = null;
  /**
   * A re-INVITE without an offer (RFC 3261 14.2): our offer for its 200, and what takes the answer the ACK brings
   * (the ACK's body, '' when it has none; not called when no ACK comes: the dialog ends then). Null: refuse with 488.
   */
  onReoffer: (() => { sdp: string; answered(body: string): void } | null) | null = null;
  /** A NOTIFY's sipfrag status line of a REFER we sent (e.g. 200 when the transfer target answered). */
  onReferProgress: ((status: number) => void) | null = null;
  private ackTimer: NodeJS.Timeout | null = null;
  private ackDeadline: NodeJS.Timeout | null = null;
  private ackWaiters: Array<(acked: boolean) => void> = [];
  acked = false;
  /** The body of the ACK of our 2xx: the answer to the offer a 200 made to a delayed offer (RFC 3261 13.2.2.4). */
  ackBody = '';
  /** The CSeq number of the INVITE whose 2xx awaits its ACK: the ACK carries it (RFC 3261 13.2.2.4). */
  private ackSeq: number | null = null;
  /** What takes the answer to the offer in the 2xx that awaits its ACK (`onReoffer`). */
  private reoffered: ((body: string) => void) | null = null;

  constructor(private readonly ua: SipEndpoint, private readonly s: DialogState) {
    ua.dialogs.set(this.key, this);
  }

  get key(): string {
    return `${this.s.callId}:${this.s.localTag}`;
  }
  get callId(): string {
    return this.s.callId;
  }
  /** The far end's tag: with the Call-ID and ours, the dialog's id (RFC 3261 12). */
  get remoteTag(): string {
    return this.s.remoteTag;
  }
  get transport(): SipTransport {
    return this.s.transport;
  }

  /** Resolves true at the ACK of our 2xx, false when none came in time. */
  confirmed(): Promise<boolean> {
    if (this.acked || !this.ackTimer) return Promise.resolve(this.acked || !this.ackDeadline);
    return new Promise((resolve) => this.ackWaiters.push(resolve));
  }

  /** Retransmits our 2xx (over UDP) until the ACK comes. */
  awaitAck(rs: SipMessage): void {
    this.acked = false;
    this.ackSeq = Number(rs.headers.cseq?.seq);
    const reliable = this.s.transport !== 'udp';
    let interval = 500;
    const resend = () => {
      this.ua.stack.send(rs);
      interval = Math.min(interval * 2, 4000);
      this.ackTimer = setTimeout(resend, interval);
    };
    this.ackTimer = reliable ? setTimeout(() => {}, ACK_WAIT_MS) : setTimeout(resend, interval);
    this.ackDeadline = setTimeout(() => this.ackDone(false), ACK_WAIT_MS);
  }

  private ackDone(acked: boolean): void {
    if (this.ackTimer) clearTimeout(this.ackTimer);
    if (this.ackDeadline) clearTimeout(this.ackDeadline);
    this.ackTimer = null;
    this.ackDeadline = null;
    this.acked = acked;
    if (!acked) this.reoffered = null;
    for (const w of this.ackWaiters.splice(0)) w(acked);
    // No ACK: the far end never saw our answer; the call is over (RFC 3261 13.3.1.4). (`bye` never rejects.)
    if (!acked && !this.ended) void this.bye();
  }

  /**
   * Builds an in-dialog request (RFC 3261 12.2.1.1): to the remote target, through the route set. The `sip` package
   * routes by the next hop's URI and reads only `sip:`/`sips:` URIs whose host is a name or an IPv4 address; a next
   * hop it cannot read (an IPv6 literal, `[::1]`: its parser takes none) or that names this gateway's own address
   * (which it takes for a flow token of its own) is reached through the dialog's `source` instead, the
   * Request-URI staying the remote target. Throws `UnroutableRequest` when there is no way: no remote target, or
   * no source.
   */
  request(method: string, headers: Record<string, unknown> = {}, content?: string): SipMessage {
    const target = this.s.remoteTarget;
    if (target === null) throw new UnroutableRequest('the far end named no SIP URI to reach it at');
    const parsed = sip.parseUri(target) as SipUri | undefined;
    let uri: string | SipUri = parsed ?? target;
    if (parsed && this.s.transport !== 'udp' && !parsed.params.transport) uri = Object.assign({}, parsed, { params: Object.assign({}, parsed.params, { transport: this.s.transport }) });
    const route: Aor[] = this.s.routeSet.map((r) => ({ ...r }));
    const next = route.length ? (route[0]!.uri as SipUri | undefined) : parsed;
    if (!next?.host || next.host === this.ua.stack.hostname()) {
      if (!this.s.source) throw new UnroutableRequest(`no way to reach ${target}`);
      route.unshift({ uri: this.ua.stack.encodeFlowUri(this.s.source), params: {} });
    }
    return {
      method,
      uri,
      headers: {
        to: Object.assign({}, this.s.remoteAor, { params: Object.assign({}, this.s.remoteAor.params, { tag: this.s.remoteTag }) }),
        from: Object.assign({}, this.s.localAor, { params: Object.assign({}, this.s.localAor.params, { tag: this.s.localTag }) }),
        'call-id': this.s.callId,
        cseq: { method, seq: ++this.s.localSeq },
        contact: [{ uri: this.ua.contactUri(this.s.transport), params: {} }],
        'max-forwards': 70,
        ...(route.length ? { route } : {}),
        ...headers,
      },
      ...(content ? { content } : {}),
    };
  }

  /**
   * Sends an in-dialog request; resolves with the final status (408 when nothing answered). Never rejects: a
   * request that cannot be built or sent (`request`: nowhere to send it; the stack throwing on what the far end
   * named) resolves 503, made here, and ends the dialog on this side (a dialog that cannot reach its far end is
   * over). Whatever a far end put in its Contact or Record-Route, nothing of it is thrown out of a timer.
   */
  send(method: string, headers?: Record<string, unknown>): Promise<number> {
    return new Promise((resolve) => {
      try {
        this.ua.stack.send(this.request(method, headers), (rs) => (rs.status ?? 0) >= 200 && resolve(rs.status!));
      } catch (err) {
        this.ua.o.log?.('an in-dialog request could not be sent: the dialog ends here', { method, call_id: this.s.callId, target: this.s.remoteTarget, err: String(err) });
        this.end();
        resolve(503);
      }
    });
  }

  /** Hangs up; resolves once the BYE is answered or given up (`SipEndpoint.byesSettled`). Never rejects. */
  async bye(): Promise<void> {
    if (this.ended) return;
    this.end();
    await this.ua.holdBye(this.send('BYE'));
  }

  /** Asks the far end to call `target` (a SIP URI) instead: blind transfer (RFC 3515). */
  refer(target: string): Promise<number> {
    return this.send('REFER', { 'refer-to': { uri: target, params: {} }, 'referred-by': `<${this.ua.contactUri(this.s.transport)}>` });
  }

  end(): void {
    this.ended = true;
    if (this.ackTimer || this.ackDeadline) {
      if (this.ackTimer) clearTimeout(this.ackTimer);
      if (this.ackDeadline) clearTimeout(this.ackDeadline);
      this.ackTimer = null;
      this.ackDeadline = null;
      for (const w of this.ackWaiters.splice(0)) w(false);
    }
    this.ua.dialogs.delete(this.key);
  }

  /** An in-dialog request from the far end. */
  handle(rq: SipMessage): void {
    const ok = (extension?: { headers?: Record<string, unknown>; content?: string }) => this.ua.stack.send(sip.makeResponse(rq, 200, 'OK', extension));
    // RFC 3261 12.2.2: a request whose CSeq is below the last one the far end sent in this dialog is out of
    // order (ACK and CANCEL carry their INVITE's).
    if (rq.method !== 'ACK' && rq.method !== 'CANCEL') {
      const seq = Number(rq.headers.cseq?.seq);
      if (this.s.remoteSeq > 0 && seq < this.s.remoteSeq) {
        this.ua.stack.send(sip.makeResponse(rq, 500, 'Server Internal Error'));
        return;
      }
      if (Number.isFinite(seq)) this.s.remoteSeq = seq;
      const refused = badExtension(rq);
      if (refused) {
        this.ua.stack.send(refused);
        return;
      }
    }
    switch (rq.method) {
      case 'ACK': {
        // Only the ACK of the 2xx that awaits one: a copy of an earlier 2xx's ACK (sent again when a retransmission
        // of that 2xx crossed it) carries its INVITE's CSeq, and its body is no answer to the offer a later 2xx made.
        if (this.acked || Number(rq.headers.cseq?.seq) !== this.ackSeq) return;
        this.ackBody = rq.content ?? '';
        const answered = this.reoffered;
        this.reoffered = null;
        this.ackDone(true);
        answered?.(this.ackBody);
        return;
      }
      case 'BYE':
        ok();
        if (!this.ended) {
          this.end();
          this.onBye?.();
        }
        return;
      case 'INVITE': {
        // While our 2xx to an earlier INVITE awaits its ACK, that INVITE is still in progress (RFC 3261 14.1 lets
        // no re-INVITE be sent then) and the offer a 2xx made is unanswered: 491, which the far end retries after
        // a random wait (14.1). Answered, the new 2xx would have replaced the one awaiting its ACK.
        if (this.ackDeadline) {
          this.ua.stack.send(sip.makeResponse(rq, 491, 'Request Pending'));
          return;
        }
        const body = rq.content ?? '';
        // Without an offer, the 200 makes one and the ACK brings the answer (RFC 3261 14.2).
        const offerless = body.trim() === '';
        const offer = offerless ? (this.onReoffer?.() ?? null) : null;
        const sdp = offerless ? (offer?.sdp ?? null) : (this.onReinvite?.(body) ?? null);
        if (sdp === null) {
          this.ua.stack.send(sip.makeResponse(rq, 488, 'Not Acceptable Here'));
          return;
        }
        const rs = sip.makeResponse(rq, 200, 'OK', { headers: { contact: [{ uri: this.ua.contactUri(this.s.transport), params: {} }], 'content-type': 'application/sdp' }, content: sdp });
        this.ua.stack.send(rs);
        this.awaitAck(rs);
        this.reoffered = offer?.answered ?? null;
        return;
      }
      case 'NOTIFY': {
        ok();
        const m = /^SIP\/2\.0\s+(\d{3})/m.exec(rq.content ?? '');
        if (m) this.onReferProgress?.(Number(m[1]));
        return;
      }
      case 'INFO':
      case 'CANCEL':
        ok();
        return;
      case 'OPTIONS':
        // Answered as an INVITE would be (RFC 3261 11.2): some far ends audit a session with it.
        ok({ headers: { allow: ALLOW } });
        return;
      default:
        // Nothing else is done within a call: a 200 would tell the far end it was (a REFER taken, say).
        this.ua.stack.send(notAllowed(rq));
    }
  }
}

/**
 * The methods this UA takes: INVITE, ACK, CANCEL and OPTIONS outside a call, and within one re-INVITE, BYE,
 * INFO (answered) and NOTIFY (of a REFER it sent). It sends REFER but takes none.
 */
const ALLOW = 'INVITE, ACK, BYE, CANCEL, OPTIONS, NOTIFY, INFO';
/** Methods of SIP and its extensions that this UA knows but does not take here (405); others are 501. */
const KNOWN_METHODS = new Set(['INVITE', 'ACK', 'BYE', 'CANCEL', 'OPTIONS', 'REGISTER', 'REFER', 'NOTIFY', 'INFO', 'SUBSCRIBE', 'MESSAGE', 'UPDATE', 'PRACK', 'PUBLISH']);

/** 405 with the methods we take (RFC 3261 8.2.1), or 501 for a method this UA does not know (21.5.2). */
function notAllowed(rq: SipMessage): SipMessage {
  if (!KNOWN_METHODS.has(rq.method ?? '')) return sip.makeResponse(rq, 501, 'Not Implemented');
  return sip.makeResponse(rq, 405, 'Method Not Allowed', { headers: { allow: ALLOW } });
}

/**
 * A final response outside any dialog, with the To tag every response but 100 carries (RFC 3261 8.2.6.2):
 * `sip.makeResponse` copies the request's To as it is.
 */
function tagged(rs: SipMessage, tag: string = randomBytes(6).toString('hex')): SipMessage {
  const to = rs.headers.to;
  if (to && typeof to === 'object' && !to.params?.tag) rs.headers.to = Object.assign({}, to, { params: Object.assign({}, to.params, { tag }) });
  return rs;
}

/** What became of an INVITE we sent. */
export type InviteOutcome =
  | { ok: true; dialog: Dialog; sdp: string; response: SipMessage }
  /**
   * `local`: the status was made on this side, not received: the SIP stack's own answer when the target's name did
   * not resolve or nothing answered there (a final response without a To tag, which a UAS must add: RFC 3261
   * 8.2.6.2), a send that failed, TLS off, a CANCEL before anything rang.
   */
  | { ok: false; status: number; reason: string; local?: boolean };

export interface InviteOptions {
  target: SipTarget;
  /** The dialled number or user (the Request-URI's and To's user part). */
  to: string;
  /** The calling number (From's user part). */
  from: string;
  /** Extra headers sent as they are (the call's metadata). */
  headers?: Record<string, string>;
  sdp: string;
  credentials?: { user: string; password: string };
  /** Each provisional answer (180, 183). */
  onProgress?: (status: number) => void;
}

/** An INVITE in flight: its outcome, and a way to CANCEL it. */
export interface OutgoingInvite {
  outcome: Promise<InviteOutcome>;
  /** CANCELs the INVITE (at once if it is ringing, else as soon as a provisional answer comes). */
  cancel(): void;
}

/** The user agent: the `sip` stack started on HOST, with the dialogs it holds. */
export class SipEndpoint {
  stack!: Stack;
  private listeners: Array<{ close(): unknown }> = [];
  readonly dialogs = new Map<string, Dialog>();
  private readonly pending = new Map<string, IncomingInvite>();
  /** The branch of each INVITE taken in the last `ACK_WAIT_MS`, by Call-ID, From tag and CSeq (merged requests). */
  private readonly invitesTaken = new Map<string, string>();
  /** Per source address: INVITEs neither refused nor ACKed (`pendingInvitesPerAddress`). */
  private readonly unsettled = new PerAddress();
  /** Our BYEs not yet answered or given up (`byesSettled`). */
  private readonly byes = new Set<Promise<number>>();
  onInvite: ((invite: IncomingInvite) => void) | null = null;

  constructor(readonly o: SipEndpointOptions) {}

  /** Keeps `bye` (a BYE's transaction, `Dialog.bye`) among the BYEs in flight until it settles. */
  holdBye(bye: Promise<number>): Promise<number> {
    this.byes.add(bye);
    void bye.then(() => this.byes.delete(bye));
    return bye;
  }

  /**
   * Resolves once every BYE in flight is answered or given up, or after `ms`, whichever comes first: what `stop`
   * would cut short, as it destroys the stack with its transactions (a BYE whose first copy was lost is never
   * sent again; one to a far end named by a host name may not have gone out at all, its name still resolving).
   */
  async byesSettled(ms: number): Promise<void> {
    if (this.byes.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.byes), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  /**
   * Starts the stack: resolves once its UDP and TCP (and TLS) sockets listen; rejects with the bind error
   * (EADDRINUSE when the port is taken), after which `stop()` closes what did bind.
   */
  async start(): Promise<void> {
    const { value, listeners } = capturingListeners(() =>
      sip.create(
        {
          address: this.o.host,
          port: this.o.port,
          ...(this.o.tls ? { tls: { key: this.o.tls.key, cert: this.o.tls.cert, rejectUnauthorized: this.o.tls.verifyPeer, handshakeTimeout: TLS_HANDSHAKE_MS }, tls_port: this.o.tlsPort } : {}),
          logger: { error: (e) => this.o.log?.('sip stack error', { err: String(e) }) },
        },
        (rq, remote) => this.onRequest(rq, remote),
      ),
      sipStreamGuard(),
    );
    this.stack = value;
    this.listeners = listeners;
    for (const l of listeners) if (l instanceof tls.Server) closeFailedHandshakes(l);
    // A request the package's UDP transport drops unanswered (no From, To, Call-ID or CSeq) is answered 400 from here.
    for (const l of listeners) if (l instanceof dgram.Socket) l.on('message', (data: Buffer, from: dgram.RemoteInfo) => answerDatagram(l, data, from, this.o.log));
    let started = false;
    await allListening(listeners, (err) => {
      if (started) this.o.log?.('sip socket error', { err: String(err) });
    });
    started = true;
  }

  stop(): void {
    for (const d of [...this.dialogs.values()]) d.end();
    try {
      this.stack?.destroy();
    } catch {
      // A stack whose start failed: closing a socket that never bound throws before the others are closed.
      for (const l of this.listeners) {
        try {
          l.close();
        } catch {
          // never bound, or closed above
        }
      }
    }
  }

  /** Our Contact for a transport. */
  contactUri(transport: SipTransport): string {
    const host = this.o.host.includes(':') ? `[${this.o.host}]` : this.o.host;
    if (transport === 'tls') return `sip:switchboard@${host}:${this.o.tlsPort};transport=tls`;
    return `sip:switchboard@${host}:${this.o.port}${transport === 'tcp' ? ';transport=tcp' : ''}`;
  }

  private onRequest(rq: SipMessage, remote: Remote): void {
    // What the package passed on with a CSeq that is not one (RFC 3261 8.1.1.5): refused before anything reads it.
    const fault = requestFault(rq);
    if (fault) {
      if (rq.method !== 'ACK') this.stack.send(badRequest(rq, fault));
      return;
    }
    const toTag = rq.headers.to?.params?.tag;
    if (toTag) {
      const d = this.dialogs.get(`${rq.headers['call-id']}:${toTag}`);
      // A dialog is its Call-ID and both tags (RFC 3261 12): a request with another From tag is of no dialog here.
      if (d && d.remoteTag === (rq.headers.from?.params?.tag ?? '')) d.handle(rq);
      else if (rq.method !== 'ACK') this.stack.send(sip.makeResponse(rq, 481, 'Call/Transaction Does Not Exist'));
      // (The request's To already carries a tag: the response keeps it.)
      return;
    }
    const key = `${rq.headers['call-id']}:${rq.headers.via?.[0]?.params?.branch ?? ''}`;
    const refused = rq.method === 'INVITE' || rq.method === 'OPTIONS' ? badExtension(rq) : null;
    if (refused) {
      this.stack.send(tagged(refused));
      return;
    }
    switch (rq.method) {
      case 'INVITE': {
        // A copy of an INVITE already taken that came another way (same Call-ID, From tag and CSeq, another branch:
        // forked by a proxy, or sent twice) is a loop, not a second call (RFC 3261 8.2.2.2).
        const merged = `${rq.headers['call-id']}:${rq.headers.from?.params?.tag ?? ''}:${rq.headers.cseq.seq}`;
        const branch = String(rq.headers.via?.[0]?.params?.branch ?? '');
        const first = this.invitesTaken.get(merged);
        if (first !== undefined && first !== branch) {
          this.stack.send(tagged(sip.makeResponse(rq, 482, 'Loop Detected')));
          return;
        }
        if (first === undefined) {
          this.invitesTaken.set(merged, branch);
          setTimeout(() => this.invitesTaken.delete(merged), ACK_WAIT_MS).unref();
        }
        // An offer is SDP: a body of another type is not one this UA can answer (RFC 3261 8.2.3).
        const type = String(rq.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (rq.content && type !== 'application/sdp') {
          this.stack.send(tagged(sip.makeResponse(rq, 415, 'Unsupported Media Type', { headers: { accept: 'application/sdp' } })));
          return;
        }
        const unreachable = dialogFault(rq);
        if (unreachable) {
          this.stack.send(badRequest(rq, unreachable));
          return;
        }
        const invite = this.admit(rq, remote);
        if (!invite) return;
        this.pending.set(key, invite);
        setTimeout(() => this.pending.delete(key), ACK_WAIT_MS).unref();
        this.stack.send(sip.makeResponse(rq, 100, 'Trying'));
        if (this.onInvite) this.onInvite(invite);
        else invite.reject(503, 'Service Unavailable');
        return;
      }
      case 'CANCEL': {
        const invite = this.pending.get(key);
        if (!invite) {
          this.stack.send(tagged(sip.makeResponse(rq, 481, 'Call/Transaction Does Not Exist')));
          return;
        }
        // With the To tag of the INVITE's responses (RFC 3261 9.2).
        this.stack.send(tagged(sip.makeResponse(rq, 200, 'OK'), invite.localTag));
        invite.cancel();
        return;
      }
      case 'ACK':
        return;
      case 'OPTIONS':
        this.stack.send(tagged(sip.makeResponse(rq, 200, 'OK', { headers: { allow: ALLOW } })));
        return;
      case 'BYE':
        // A BYE outside any dialog we have (RFC 3261 15.1.2).
        this.stack.send(tagged(sip.makeResponse(rq, 481, 'Call/Transaction Does Not Exist')));
        return;
      default:
        this.stack.send(tagged(notAllowed(rq)));
    }
  }

  /** A new INVITE, counted against its address until it settles; null (answered 503) when the address is at its bound. */
  private admit(rq: SipMessage, remote: Remote): IncomingInvite | null {
    if (this.unsettled.count(remote.address) >= (this.o.pendingInvitesPerAddress ?? 64)) {
      // Without Retry-After: with one, a proxy takes the whole server to be down for that long (RFC 3261 21.5.4),
      // and a trunk's other calls would go elsewhere; without, only this request is retried elsewhere.
      this.stack.send(tagged(sip.makeResponse(rq, 503, 'Service Unavailable')));
      return null;
    }
    return new IncomingInvite(this, rq, remote, this.unsettled.hold(remote.address));
  }

  /**
   * Sends an INVITE; one digest challenge is answered with `credentials`. An INVITE for a UDP target that is
   * larger than `UDP_MAX_REQUEST` (many metadata headers) goes over TCP to the same host and port, as RFC 3261
   * 18.1.1 asks (a UA must listen on both); a far end that takes no TCP connection gets it over UDP after all.
   */
  invite(o: InviteOptions): OutgoingInvite {
    if (o.target.transport !== 'udp' || this.requestSize(o) <= UDP_MAX_REQUEST) return this.inviteOver(o, o.target.transport);
    // Over UDP after all only while nothing came back over TCP: a refused connection fails at once, one whose
    // packets are dropped (or a TCP side that reads nothing) answers nothing for TCP_ANSWER_MS; once the far end
    // has answered anything (100, 180) it has the INVITE, and sending it again would ring twice.
    let heard = false;
    let cancelled = false;
    let current = this.inviteOver(
      Object.assign({}, o, {
        onProgress: (status: number) => {
          heard = true;
          o.onProgress?.(status);
        },
      }),
      'tcp',
    );
    const silent = setTimeout(() => heard || current.cancel(), TCP_ANSWER_MS);
    silent.unref?.();
    const outcome = current.outcome.then((r) => {
      clearTimeout(silent);
      if (r.ok || !r.local || heard || cancelled) return r;
      this.o.log?.('a large INVITE went over UDP: the far end took no TCP connection', { host: o.target.host, port: o.target.port, reason: r.reason });
      current = this.inviteOver(o, 'udp');
      return current.outcome;
    });
    return {
      outcome,
      cancel: () => {
        cancelled = true;
        current.cancel();
      },
    };
  }

  /**
   * About how many bytes an INVITE of `o` is on the wire, the largest it gets: its core headers and Via, and with
   * `credentials` the Authorization header of the digest answer it may be sent again with.
   */
  private requestSize(o: InviteOptions): number {
    const headers = Object.entries(o.headers ?? {}).reduce((n, [k, v]) => n + k.length + Buffer.byteLength(v) + 4, 0);
    const authorization = o.credentials ? 350 + o.credentials.user.length : 0;
    return 450 + o.to.length * 2 + o.from.length + headers + authorization + Buffer.byteLength(o.sdp);
  }

  private inviteOver(o: InviteOptions, transport: SipTransport): OutgoingInvite {
    if (transport === 'tls' && !this.o.tls) {
      return { outcome: Promise.resolve({ ok: false, status: 503, reason: 'SIP over TLS is off on this media gateway', local: true }), cancel: () => {} };
    }
    const host = o.target.host.includes(':') ? `[${o.target.host}]` : o.target.host;
    const transportParam = transport === 'udp' ? '' : `;transport=${transport}`;
    const uri = `sip:${userPart(o.to)}@${host}:${o.target.port}${transportParam}`;
    const callId = `${randomBytes(12).toString('hex')}@switchboard`;
    const fromAor: Aor = { uri: `sip:${userPart(o.from)}@${this.o.host.includes(':') ? `[${this.o.host}]` : this.o.host}`, params: { tag: tag() } };
    let seq = 1;
    const build = (): SipMessage => ({
      method: 'INVITE',
      uri,
      headers: {
        to: { uri: `sip:${userPart(o.to)}@${host}`, params: {} },
        from: fromAor,
        'call-id': callId,
        cseq: { method: 'INVITE', seq },
        contact: [{ uri: this.contactUri(transport), params: {} }],
        'max-forwards': 70,
        'content-type': 'application/sdp',
        ...Object.fromEntries(Object.entries(o.headers ?? {}).map(([name, value]) => [name, toWire(value)])),
      },
      content: o.sdp,
    });
    let current = build();
    let ringing = false;
    let cancelAsked = false;
    let cancelled = false;
    let settled = false;
    let authTried = false;
    let resolve!: (x: InviteOutcome) => void;
    const outcome = new Promise<InviteOutcome>((r) => (resolve = r));
    const settle = (x: InviteOutcome) => {
      if (settled) return;
      settled = true;
      resolve(x);
    };
    const sendCancel = () => {
      if (cancelled) return;
      cancelled = true;
      this.stack.send({
        method: 'CANCEL',
        uri: current.uri,
        headers: { to: current.headers.to, from: current.headers.from, 'call-id': callId, cseq: { method: 'CANCEL', seq }, via: [current.headers.via[0]], 'max-forwards': 70 },
      });
      // A far end that never answers the INVITE after our CANCEL (no 487): given up after 64·T1 (RFC 3261 9.1).
      setTimeout(() => settle({ ok: false, status: 408, reason: 'Request Timeout', local: true }), ACK_WAIT_MS).unref();
    };
    /** The dialog of our first 2xx: a retransmitted 2xx (our ACK was lost) gets the ACK again, not a new dialog. */
    let answered: Dialog | null = null;
    const ackOf = (dialog: Dialog): SipMessage => {
      // The ACK of a 2xx is its own transaction-less request (RFC 3261 13.2.2.4).
      const ack = dialog.request('ACK');
      ack.headers.cseq = { method: 'ACK', seq };
      ack.headers.via = [];
      return ack;
    };
    /** Sends the ACK of `dialog`'s 2xx; false when it cannot be sent (`Dialog.request`). */
    const sendAck = (dialog: Dialog): boolean => {
      try {
        this.stack.send(ackOf(dialog));
        return true;
      } catch (err) {
        this.o.log?.('the ACK of a 200 OK could not be sent', { call_id: callId, err: String(err) });
        return false;
      }
    };
    const onResponse = (rs: SipMessage) => {
      const status = rs.status ?? 0;
      if (status < 200) {
        ringing = true;
        if (cancelAsked) sendCancel();
        else o.onProgress?.(status);
        return;
      }
      if (status < 300) {
        if (answered) {
          if (!answered.ended) sendAck(answered);
          return;
        }
        const routeSet: Aor[] = [...(rs.headers['record-route'] ?? [])].reverse();
        const dialog = new Dialog(this, {
          callId,
          localTag: fromAor.params.tag as string,
          remoteTag: rs.headers.to?.params?.tag ?? '',
          localAor: { uri: fromAor.uri, params: {} },
          remoteAor: { uri: rs.headers.to.uri, params: {} },
          // A Contact that is no SIP URI (`*`, `tel:`) is taken as none: the INVITE's own target.
          remoteTarget: sipUriOf(rs.headers.contact?.[0]?.uri) ?? (current.uri as string),
          // A Record-Route the stack could not read (an IPv6 literal) leaves no route set to follow: requests go
          // straight to the trunk's address, where the INVITE went.
          routeSet: routesReadable(routeSet) ? routeSet : [],
          source: isIP(o.target.host) ? { protocol: transport.toUpperCase(), address: o.target.host, port: o.target.port, local: { address: this.o.host, port: (transport === 'tls' ? this.o.tlsPort : this.o.port) ?? this.o.port } } : null,
          transport,
          localSeq: seq,
          remoteSeq: 0,
        });
        dialog.acked = true;
        answered = dialog;
        if (!sendAck(dialog)) {
          // No ACK can reach the far end: the call cannot be had (the far end gives up on its 200 after 64·T1).
          dialog.end();
          settle({ ok: false, status: 502, reason: 'the answer named no address its ACK could be sent to', local: true });
          return;
        }
        if (settled || cancelAsked) {
          // Answered while we were giving up: hang up at once.
          void dialog.bye();
          settle({ ok: false, status: 487, reason: 'Request Terminated' });
          return;
        }
        settle({ ok: true, dialog, sdp: rs.content ?? '', response: rs });
        return;
      }
      if ((status === 401 || status === 407) && o.credentials && !authTried) {
        authTried = true;
        const next = build();
        seq++;
        next.headers.cseq = { method: 'INVITE', seq };
        digest.signRequest(null, next, rs, o.credentials);
        current = next;
        this.stack.send(current, onResponse);
        return;
      }
      settle({ ok: false, status, reason: rs.reason ?? '', local: !rs.headers.to?.params?.tag });
    };
    try {
      this.stack.send(current, onResponse);
    } catch (err) {
      settle({ ok: false, status: 503, reason: `could not send: ${err instanceof Error ? err.message : String(err)}`, local: true });
    }
    return {
      outcome,
      cancel: () => {
        if (settled || cancelAsked) return;
        cancelAsked = true;
        if (ringing) sendCancel();
        else {
          // Nothing answered yet: a CANCEL may not be sent (RFC 3261 9.1); give up on it now.
          settle({ ok: false, status: 408, reason: 'Request Timeout', local: true });
        }
      },
    };
  }
}

/**
 * Why an INVITE cannot start a dialog this UA could keep, as a 400's reason phrase, or null: its Contact is no SIP
 * or SIPS URI (`*`, `tel:`; RFC 3261 8.1.1.8 asks for one), so no in-dialog request (our BYE) could be addressed;
 * or a Record-Route URI the `sip` package could not read (it reads no IPv6 literal), which the 200 must echo
 * and every in-dialog request follow.
 */
function dialogFault(rq: SipMessage): string | null {
  const contact: unknown = rq.headers.contact;
  if (Array.isArray(contact) && contact.length > 0 && !sipUriOf(contact[0]?.uri)) return 'Contact Is Not a SIP URI';
  const recordRoute: unknown = rq.headers['record-route'];
  if (Array.isArray(recordRoute) && !routesReadable(recordRoute)) return 'Unreadable Record-Route Header Field';
  return null;
}

/**
 * The 420 for a request that requires options (RFC 3261 8.2.2.3: refused, naming them), or null when it requires
 * none. This UA supports none (no 100rel, no session timers); never asked of ACK and CANCEL. The `Require` header
 * is as the stack read it: a string, several joined with commas.
 */
function badExtension(rq: SipMessage): SipMessage | null {
  const header: unknown = rq.headers.require;
  if (typeof header !== 'string') return null;
  const required = header
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '');
  return required.length ? sip.makeResponse(rq, 420, 'Bad Extension', { headers: { unsupported: required.join(', ') } }) : null;
}
