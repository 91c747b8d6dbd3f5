import type dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import { decode, FRAME_SAMPLES, PAYLOAD_TYPE, type Codec } from './codec.js';
import { DtmfReceiver, writeDtmf } from './dtmf.js';
import { JitterBuffer } from './jitter.js';
import { readRtp, writeRtp } from './packet.js';
import type { Pacer } from './pacer.js';
import { SrtpContext, type SrtpKey } from './srtp.js';
import type { Direction } from '../sdp.js';

/** 20 ms of silence in each codec. */
const SILENCE: Record<Codec, Buffer> = { PCMU: Buffer.alloc(FRAME_SAMPLES, 0xff), PCMA: Buffer.alloc(FRAME_SAMPLES, 0xd5) };
/**
 * How long the latched source may send nothing before another source takes its place: a NAT binding or media
 * relay that moved without a re-INVITE is heard again after this. (A phone that suppresses silence may pause
 * longer; the address its SDP names is taken back at once whenever it sends.)
 */
const RELATCH_MS = 2000;

export interface RtpPeer {
  address: string;
  port: number;
}

export interface RtpSessionOptions {
  socket: dgram.Socket;
  codec: Codec;
  /** The payload type the far end uses for telephone-event (null: none negotiated). */
  dtmfPayloadType: number | null;
  /** Keys for SRTP: ours (what we send with) and theirs; null for plain RTP. */
  srtp: { local: SrtpKey; remote: SrtpKey } | null;
  pacer: Pacer;
  /** 20 ms of the caller's audio, decoded, in order. */
  onAudio: (pcm: Int16Array) => void;
  onDigit: (digit: string) => void;
}

/**
 * One call's RTP stream: receives (SRTP unprotect, reorder, decode, DTMF) and sends the agent's frames at
 * 20 ms pace through the process's `Pacer`. While nothing is queued it sends silence frames, so the stream
 * is continuous; each answer starts with the marker bit.
 */
export class RtpSession {
  readonly localPort: number;
  private peer: RtpPeer | null = null;
  private readonly ssrc = randomInt(0, 0xffffffff);
  private seq = randomInt(0, 0xffff);
  private ts = randomInt(0, 0x7fffffff);
  private readonly queue: Buffer[] = [];
  /** Each queued frame's answer label: the label `play` was given on an answer's first frame, else undefined. */
  private readonly labels: Array<string | undefined> = [];
  private marker = true;
  private readonly jitter = new JitterBuffer();
  private readonly dtmf: DtmfReceiver;
  private send?: SrtpContext;
  private receive?: SrtpContext;
  /** The far end's SRTP key, which `receive` reads its packets with. */
  private remoteKey: SrtpKey | null = null;
  private stopPacing: () => void;
  private closed = false;
  /** Set once the stream is bridged to another leg (`relay`): where the far end's packets go instead. */
  private relayTo: ((rtp: Buffer) => void) | null = null;
  private held = false;
  /**
   * Where the far end's packets come from (`address:port`), latched from the first one taken: packets from
   * anywhere else are dropped, so that no other host can speak or key digits into the call. It moves to the
   * address and port the far end's SDP names whenever a packet comes from there, to the next source after
   * `setPeer` (a re-INVITE), and to another source once the latched one has sent nothing for `RELATCH_MS` (a NAT
   * binding or a media relay that changed without a re-INVITE).
   */
  private source: string | null = null;
  /** Called when a queued utterance has been sent entirely. */
  onDrained: (() => void) | null = null;
  /** Called when the far end stops or starts taking our audio (`setDirection`): a hold, and its end. */
  onFarEndReceives: ((receives: boolean) => void) | null = null;
  /**
   * Called with every frame sent (for per-direction taps, e.g. recordings); the first frame of each answer (each
   * `play`) comes with that answer's label (empty when it was given none), so a tap knows where answers begin even
   * when one is queued right behind another.
   */
  onSent: ((payload: Buffer, answer?: string) => void) | null = null;
  /**
   * Called with every frame of the caller's audio received, decoded, in order, before `onAudio`, with its RTP
   * timestamp (for per-direction taps: recordings place it by that clock, not by when it arrived).
   */
  onReceived: ((pcm: Int16Array, timestamp: number) => void) | null = null;
  /** Called with every digit received, before `onDigit`, with its RTP timestamp (the same taps' use). */
  onDigitReceived: ((digit: string, timestamp: number) => void) | null = null;
  /** Counts for tests and the benchmark. */
  readonly stats = { received: 0, sent: 0, rejected: 0 };
  /** When the far end's last packet came (performance.now), or when the session opened: its media's liveness. */
  lastReceivedAt = performance.now();
  /** The direction the far end's SDP gives the stream (RFC 3264 6.1): whether we may send, whether it should. */
  private farEnd: Direction = 'sendrecv';
  /** When the far end last came back to sending both ways (`setDirection`): its silence is counted from then on. */
  private resumedAt = 0;

  /** Whether the stream is SRTP. */
  readonly secure: boolean;

  constructor(private readonly o: RtpSessionOptions) {
    this.localPort = o.socket.address().port;
    this.secure = o.srtp !== null;
    this.dtmf = new DtmfReceiver((digit, timestamp) => {
      this.onDigitReceived?.(digit, timestamp);
      o.onDigit(digit);
    });
    if (o.srtp) {
      this.send = new SrtpContext(o.srtp.local);
      this.receive = new SrtpContext(o.srtp.remote);
      this.remoteKey = o.srtp.remote;
    }
    o.socket.on('message', (msg, rinfo) => this.onPacket(msg, rinfo));
    o.socket.on('error', () => {});
    this.stopPacing = o.pacer.add(() => this.tick());
  }

  /** Sends nothing (not even silence) until `release`: an answered INVITE waiting for its ACK. */
  hold(): void {
    this.held = true;
  }

  release(): void {
    this.held = false;
  }

  /**
   * What the far end's SDP (an offer, a re-INVITE's, or its answer) says of the stream: while it takes no audio
   * (`sendonly`, a hold, or `inactive`) nothing is sent, not even silence, and the agent's queued words wait for
   * the stream to come back; while it holds the call (anything but `sendrecv`) its silence is no sign it is gone.
   */
  setDirection(d: Direction): void {
    if (d === 'sendrecv' && this.farEnd !== 'sendrecv') this.resumedAt = performance.now();
    if (this.farEnd !== 'sendrecv' && (d === 'sendrecv' || d === 'recvonly')) this.marker = true;
    const receives = this.farEndReceives;
    this.farEnd = d;
    if (this.farEndReceives !== receives) this.onFarEndReceives?.(this.farEndReceives);
  }

  /** Whether the far end takes our audio (its SDP is `sendrecv` or `recvonly`). */
  get farEndReceives(): boolean {
    return this.farEnd === 'sendrecv' || this.farEnd === 'recvonly';
  }

  /**
   * How long the far end has sent nothing although its SDP says it sends both ways: 0 while it holds the call (a
   * hold need send nothing), else from the later of its last packet and its coming back (the media timeout's clock).
   */
  silentForMs(now = performance.now()): number {
    return this.farEnd === 'sendrecv' ? now - Math.max(this.lastReceivedAt, this.resumedAt) : 0;
  }

  /**
   * The far end's SRTP key as a new answer of its gives it: a key it changed is read with from now on, with a new
   * crypto context (RFC 3711 3.2: a context is per master key); the same key keeps the context and its streams'
   * rollover counters. Nothing for a plain RTP session.
   */
  setRemoteKey(key: SrtpKey): void {
    if (!this.receive || !this.remoteKey || (key.key.equals(this.remoteKey.key) && key.salt.equals(this.remoteKey.salt))) return;
    this.receive = new SrtpContext(key);
    this.remoteKey = key;
  }

  /** Where to send: the address and port of the far end's SDP (updated by a re-INVITE). */
  setPeer(peer: RtpPeer): void {
    this.peer = peer;
    this.source = null;
  }

  /**
   * Queues one answer's G.711 frames (already encoded for this call's codec) to be sent one per 20 ms; `label`
   * names the answer to the taps (`onSent`); null: the frames go on the answer played before (its next piece).
   */
  play(frames: Buffer[], label: string | null = ''): void {
    if (this.queue.length === 0) this.marker = true;
    frames.forEach((frame, i) => {
      this.queue.push(frame);
      this.labels.push(i === 0 && label !== null ? label : undefined);
    });
  }

  /** How many frames are queued, not sent yet. */
  get queued(): number {
    return this.queue.length;
  }

  /** Drops what is still queued (barge-in). */
  stopPlayback(): void {
    this.queue.length = 0;
    this.labels.length = 0;
  }

  /** The payload type this far end sends and takes RFC 4733 digits under (its SDP's telephone-event), or null. */
  get dtmfPayloadType(): number | null {
    return this.o.dtmfPayloadType;
  }

  get playing(): boolean {
    return this.queue.length > 0;
  }

  /**
   * Bridges this stream to another call leg's (a handoff by bridging, `gateway/media/bridge.ts`): from now on it
   * sends nothing of its own, not even silence (the other leg's packets take the agent's place, through
   * `forward`), and every packet the far end sends goes to `to` as plain RTP, as it came (its SSRC, sequence
   * and timestamps), instead of being decoded: the bridged parties hear each other, nobody listens in.
   */
  relay(to: (rtp: Buffer) => void): void {
    this.relayTo = to;
    // The other leg's packets are a stream of their own (its SSRC, its sequence numbers): SRTP keeps a rollover
    // counter per stream (RFC 3711 3.3.1), and the far end starts the new one at 0, so ours starts afresh too.
    if (this.o.srtp) this.send = new SrtpContext(this.o.srtp.local);
    this.stopPacing();
    this.stopPacing = () => {};
    this.stopPlayback();
  }

  /**
   * Sends a plain RTP packet of the other leg of a bridge to this far end (protected when this leg is SRTP).
   * `digitsAs` is the payload type the other leg's far end sends its RFC 4733 digits under: each side named its
   * own in its SDP, so such a packet goes out under the type this far end named, and is dropped when it named
   * none (it would not know what the packet is).
   */
  forward(rtp: Buffer, digitsAs: number | null = null): void {
    if (!this.peer || this.closed || this.held || !this.farEndReceives) return;
    const ours = this.o.dtmfPayloadType;
    if (digitsAs !== null && digitsAs !== ours && rtp.length > 1 && (rtp[1]! & 0x7f) === digitsAs) {
      if (ours === null) return;
      rtp[1] = (rtp[1]! & 0x80) | ours;
    }
    this.o.socket.send(this.send ? this.send.protect(rtp) : rtp, this.peer.port, this.peer.address);
    this.stats.sent++;
  }

  /** Sends a digit as RFC 4733 events (start, updates, three end packets) out of the audio pacing. */
  sendDigit(digit: string, durationMs = 100): void {
    if (this.o.dtmfPayloadType === null) return;
    const pt = this.o.dtmfPayloadType;
    const ts = this.ts;
    const samples = (durationMs * 8) | 0;
    const steps = Math.max(1, Math.round(durationMs / 20));
    for (let i = 1; i <= steps + 2; i++) {
      const end = i > steps;
      const payload = writeDtmf({ digit, end, volume: 10, duration: Math.min(samples, i * FRAME_SAMPLES) });
      this.sendPacket({ payloadType: pt, marker: i === 1, sequence: this.seq++ & 0xffff, timestamp: ts, ssrc: this.ssrc, payload });
    }
  }

  private tick(): void {
    if (!this.farEndReceives) {
      // On hold: the clock runs on (the far end sees a gap in timestamps, not a shifted stream); the words wait.
      this.ts = (this.ts + FRAME_SAMPLES) >>> 0;
      return;
    }
    const frame = this.queue.shift();
    if (frame) {
      const label = this.labels.shift();
      this.sendPacket({ payloadType: PAYLOAD_TYPE[this.o.codec], marker: this.marker, sequence: this.seq++ & 0xffff, timestamp: this.ts, ssrc: this.ssrc, payload: frame });
      this.marker = false;
      this.onSent?.(frame, label);
      if (this.queue.length === 0) this.onDrained?.();
    } else {
      // A continuous stream: silence between answers, as a phone sends it (keeps NAT bindings open and lets
      // the far end's end-of-speech detection see quiet rather than nothing).
      this.sendPacket({ payloadType: PAYLOAD_TYPE[this.o.codec], marker: false, sequence: this.seq++ & 0xffff, timestamp: this.ts, ssrc: this.ssrc, payload: SILENCE[this.o.codec] });
      this.marker = true;
    }
    this.ts = (this.ts + FRAME_SAMPLES) >>> 0;
  }

  private sendPacket(p: Parameters<typeof writeRtp>[0]): void {
    if (!this.peer || this.closed || this.held || !this.farEndReceives) return;
    const raw = writeRtp(p);
    const out = this.send ? this.send.protect(raw) : raw;
    this.o.socket.send(out, this.peer.port, this.peer.address);
    this.stats.sent++;
  }

  private onPacket(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    const plain = this.receive ? this.receive.unprotect(msg) : msg;
    if (!plain) {
      this.stats.rejected++;
      return;
    }
    const p = readRtp(plain);
    if (!p) return;
    const from = `${rinfo.address}:${rinfo.port}`;
    if (from !== this.source) {
      const fromPeer = this.peer !== null && rinfo.address === this.peer.address && rinfo.port === this.peer.port;
      if (this.source !== null && !fromPeer && performance.now() - this.lastReceivedAt < RELATCH_MS) {
        this.stats.rejected++;
        return;
      }
      this.source = from;
    }
    // Symmetric RTP: answer where the audio comes from when the SDP named no usable address.
    if (!this.peer) this.peer = { address: rinfo.address, port: rinfo.port };
    this.stats.received++;
    this.lastReceivedAt = performance.now();
    if (this.relayTo) {
      this.relayTo(plain);
      return;
    }
    if (this.o.dtmfPayloadType !== null && p.payloadType === this.o.dtmfPayloadType) {
      this.dtmf.receive(p.timestamp, p.payload);
      return;
    }
    for (const q of this.jitter.push(p)) {
      const codec = q.payloadType === PAYLOAD_TYPE.PCMU ? 'PCMU' : q.payloadType === PAYLOAD_TYPE.PCMA ? 'PCMA' : null;
      if (!codec) continue;
      const pcm = decode(codec, q.payload);
      this.onReceived?.(pcm, q.timestamp);
      this.o.onAudio(pcm);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopPacing();
    this.queue.length = 0;
    try {
      this.o.socket.close();
    } catch {
      // already closed
    }
  }
}
