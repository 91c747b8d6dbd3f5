import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { decode, encode, type Runtime, type Subscription } from '../../actors/mod.js';
import { callEndedEvent, CALL_KIND, MEDIA_DIAL_QUEUE, MEDIA_DIAL_SUBJECT, type DialRequest, type DialResult } from '../../actors/call/mod.js';
import { uuidv7 } from '../../platform/ids.js';
import type { SipTransport } from './dialog.js';
import { choose, followReinvites, offerOf, openLeg, readSdp, sessionOf } from './media.js';
import type { MediaGateway } from './server.js';

/** The unspecified address (`0.0.0.0`, `::`): as a listening address every interface, as a destination this machine. */
const unspecified = (address: string): boolean => address === '0.0.0.0' || /^[0:]+$/.test(address);

/** Whether `address` is this machine's: a loopback address or one of its interfaces'. */
function isLocal(address: string): boolean {
  if (address.startsWith('127.') || address === '::1' || unspecified(address)) return true;
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address === address));
}

/**
 * Whether a trunk's host is this gateway's SIP address, directly or by a name that resolves to it; or, at one of
 * the gateway's SIP ports, the unspecified address (`0.0.0.0`, `::`), which as a destination is this machine; or,
 * when the gateway listens on every interface (`HOST=0.0.0.0`), any address of this machine at one of its ports.
 */
async function isOwnAddress(host: string, own: string, port: number, ownPorts: Array<number | undefined>): Promise<boolean> {
  if (host === own) return true;
  const atOwnPort = ownPorts.includes(port);
  const self = (address: string) => address === own || (atOwnPort && (unspecified(address) || (unspecified(own) && isLocal(address))));
  if (isIP(host)) return self(host);
  try {
    return (await lookup(host, { all: true })).some((a) => self(a.address));
  } catch {
    // Does not resolve: the stack finds that out again and the call is unreachable.
    return false;
  }
}

/** How long a placed call's result is remembered for a repeated request of the same call_sid. */
const REMEMBER_MS = 10 * 60_000;

/**
 * The DialResult of a SIP final status that is not a 2xx; `local` when this side made it (`InviteOutcome`): no
 * status arrived, so none is reported (a name that did not resolve is not the far end's 404).
 */
export function outcomeOf(status: number, reason: string, rang: boolean, gaveUp: boolean, local = false): DialResult {
  const r = (outcome: DialResult['outcome'], sip: number | null = status): DialResult => ({ outcome, sip_status: sip, reason: sip ? `${status} ${reason}`.trim() : reason, conversation_id: null });
  if (gaveUp) return rang ? r('no_answer', status || 487) : r('unreachable', null);
  if (local) return r('unreachable', null);
  if (status === 486 || status === 600) return r('busy');
  if (status === 403 || status === 603) return r('rejected');
  if (status === 480 || status === 487) return r('no_answer');
  // Any 5xx: the far end's server failed, whatever its reason (500 too, not a refusal of the call).
  if (status === 408 || status === 404 || status === 410 || status === 484 || (status >= 500 && status < 600)) return r('unreachable');
  return r('rejected');
}

/**
 * Answers dial requests of the call actor (`MEDIA_DIAL_SUBJECT`, queue group `media`: one gateway takes
 * each): an INVITE through the request's trunk with its headers as SIP headers, CANCELled when nobody
 * answers within the ring timeout; on 200 OK the result goes back once the call is connected (media chosen,
 * the call made), while the conversation starts (its start function runs after connect) and speaks its
 * opening; the call then runs like an inbound one, and its end is told to the call actor. Idempotent by
 * call_sid: a repeated request joins the attempt in progress or gets the remembered result, and never dials
 * twice.
 */
export function answerDialRequests(gw: MediaGateway, runtime: Runtime): Subscription {
  const attempts = new Map<string, Promise<DialResult>>();
  const sub = runtime.transport.subscribe(
    MEDIA_DIAL_SUBJECT,
    (data, respond) => {
      let req: DialRequest;
      try {
        req = decode<DialRequest>(data);
      } catch {
        respond?.(encode({ outcome: 'error', sip_status: null, reason: 'malformed dial request', conversation_id: null } satisfies DialResult));
        return;
      }
      let attempt = attempts.get(req.call_sid);
      if (!attempt) {
        attempt = dial(gw, runtime, req).catch((err): DialResult => {
          gw.o.log('warn', 'dial failed', { call_sid: req.call_sid, err: String(err) });
          return { outcome: 'error', sip_status: null, reason: String(err instanceof Error ? err.message : err), conversation_id: null };
        });
        attempts.set(req.call_sid, attempt);
        void attempt.then(() => setTimeout(() => attempts.delete(req.call_sid), REMEMBER_MS).unref());
      }
      void attempt.then((result) => respond?.(encode(result)));
    },
    { queue: MEDIA_DIAL_QUEUE },
  );
  return sub;
}

async function dial(gw: MediaGateway, runtime: Runtime, req: DialRequest): Promise<DialResult> {
  const secure = req.encryption.endsWith('/SRTP');
  // The trunk's configured transport carries the signalling (a trunk listens on one); the encryption's
  // media part decides SRTP. TLS/* on a trunk that is not `tls` is logged: its SDES keys travel in clear SIP.
  const transport: SipTransport = req.trunk.transport;
  if (req.encryption.startsWith('TLS/') && transport !== 'tls') gw.o.log('info', 'TLS asked for a call through a trunk without TLS: signalling goes over its own transport', { call_sid: req.call_sid, transport });
  // The SIP stack takes a request to its own host for one to itself (it answers 404 without sending anything),
  // whatever the port: a trunk there cannot be dialled, and the reason says so rather than "404".
  // A name is resolved first (`localhost`, or any that points here), as the stack would.
  if (await isOwnAddress(req.trunk.host, gw.ua.o.host, req.trunk.port, [gw.ua.o.port, gw.ua.o.tlsPort])) return { outcome: 'trunk_unusable', sip_status: null, reason: 'the trunk is on this gateway\'s own SIP address', conversation_id: null };
  const speech = await gw.agentSpeech(req.project_id, req.environment);
  if (!speech) return { outcome: 'error', sip_status: null, reason: 'the agent has nothing deployed to run', conversation_id: null };
  const leg = await openLeg(gw.ports, secure);
  let rang = false;
  let gaveUp = false;
  const invite = gw.ua.invite({
    target: { host: req.trunk.host, port: req.trunk.port, transport },
    to: req.to,
    from: req.from,
    headers: req.headers,
    sdp: offerOf(leg, gw.mediaAddress),
    credentials: req.trunk.username && req.trunk.password ? { user: req.trunk.username, password: req.trunk.password } : undefined,
    onProgress: () => void (rang = true),
  });
  const ring = setTimeout(() => {
    gaveUp = true;
    invite.cancel();
  }, req.ring_timeout_ms);
  const outcome = await invite.outcome;
  clearTimeout(ring);
  if (!outcome.ok) {
    leg.socket.close();
    return outcomeOf(outcome.status, outcome.reason, rang, gaveUp, outcome.local);
  }
  const answer = readSdp(outcome.sdp);
  const chosen = choose(answer);
  if ('error' in chosen || (secure && !answer!.srtp)) {
    await outcome.dialog.bye();
    leg.socket.close();
    // Refused here after a 200 OK, with a BYE: the far end sent no error status, so none is reported.
    return { outcome: 'error', sip_status: null, reason: `answered with unusable media: ${'error' in chosen ? chosen.error : 'no SRTP key'}`, conversation_id: null };
  }
  const sink = { audio: (_: Int16Array) => {}, digit: (_: string) => {} };
  const rtp = sessionOf(leg, answer!, chosen.codec, chosen.dtmf, gw.pacer, { audio: (p) => sink.audio(p), digit: (d) => sink.digit(d) });
  // The far end may move its media or hold the call (a re-INVITE, with an offer or without one), as a caller may.
  followReinvites(outcome.dialog, leg, rtp, gw.mediaAddress, chosen.codec, chosen.dtmf, gw.reinviteLog);
  const conversationId = uuidv7();
  const call = gw.callOf(
    { conversationId, callSid: req.call_sid, accountId: req.account_id, projectId: req.project_id, environment: req.environment, variantId: req.variant_id, fromNumber: req.from, toNumber: req.to, sipHeaders: req.headers, trunk: req.trunk },
    chosen.codec,
    speech,
    outcome.dialog,
    rtp,
    (end) =>
      void runtime.client.ask(CALL_KIND, req.call_sid, callEndedEvent(end.at, conversationId, 200), { eventId: `${req.call_sid}:ended` }).catch((err) =>
        gw.o.log('warn', 'could not tell the call actor that a call ended', { call_sid: req.call_sid, err: String(err) }),
      ),
  );
  sink.audio = (p) => call.audio(p);
  sink.digit = (d) => call.digit(d);
  // Connected: the conversation starts now (its start function runs after connect), and the answer goes back
  // at once rather than after the opening, which runs the start function and the model and speaks the greeting
  // (up to the hang-up when the start ends the call): awaited, the status read `calling` as long as the agent
  // took, and an opening slower than the call actor's wait (ring timeout + DIAL_GRACE_MS) failed a connected
  // call. A failed opening hangs up (`VoiceCall.opening`), and its CALL_ENDED ends the call as any hang-up.
  void call.start().catch((err) => gw.o.log('warn', 'call opening failed', { call_sid: req.call_sid, err: String(err) }));
  return { outcome: 'answered', sip_status: 200, reason: '', conversation_id: conversationId };
}
