import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { DIST, removeDir, startPlatform, type Platform } from './platform.js';
import { toolAvailable } from './tools.js';
import { finalOf, invite, udpPeer, until } from './raw-sip.js';

/** Scenario templates of sipp (test/fixtures/sipp/*.xml, read from the source tree next to dist/). */
export const SIPP_FIXTURES = join(DIST, '..', 'test', 'fixtures', 'sipp');
/** Debian's sip-tester pcaps: RFC 2833 digits and G.711 A-law audio. */
export const SIPP_PCAPS = '/usr/share/sip-tester';

export const voiceTools = () =>
  toolAvailable('/usr/bin/sipp', 'sip-tester') && toolAvailable('/usr/bin/espeak-ng', 'espeak-ng') && toolAvailable('/usr/bin/pocketsphinx_continuous', 'pocketsphinx');

/** 8 kHz samples of `text` spoken by espeak-ng (through sox to 8 kHz). */
export function speak(text: string, dir: string, opts: { voice?: string; rate?: number } = {}): Int16Array {
  const raw = join(dir, `speech-${Math.random().toString(36).slice(2)}.raw`);
  const wav = `${raw}.wav`;
  const e = spawnSync('espeak-ng', ['-v', opts.voice ?? 'en-us', '-s', String(opts.rate ?? 140), '-w', wav, text]);
  if (e.status !== 0) throw new Error(`espeak-ng: ${e.stderr}`);
  const s = spawnSync('sox', [wav, '-r', '8000', '-c', '1', '-e', 'signed', '-b', '16', '-t', 'raw', raw]);
  if (s.status !== 0) throw new Error(`sox: ${s.stderr}`);
  const b = readFileSync(raw);
  return new Int16Array(b.buffer, b.byteOffset, b.length / 2);
}

/**
 * Writes RTP packets as a pcap file (Ethernet/IPv4/UDP from 127.0.0.2:6000 to 127.0.0.1:6002), each at its
 * time `t` in ms from the start: what sipp's `play_pcap_audio` replays.
 */
export function writePcap(file: string, pkts: Array<{ t: number; rtp: Buffer }>): void {
  const header = Buffer.alloc(24);
  header.writeUInt32LE(0xa1b2c3d4, 0);
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(4, 6);
  header.writeUInt32LE(65535, 16);
  header.writeUInt32LE(1, 20);
  const chunks: Buffer[] = [header];
  for (const { t, rtp } of pkts) {
    const udp = Buffer.alloc(8);
    udp.writeUInt16BE(6000, 0);
    udp.writeUInt16BE(6002, 2);
    udp.writeUInt16BE(8 + rtp.length, 4);
    const ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip.writeUInt16BE(20 + 8 + rtp.length, 2);
    ip[8] = 64;
    ip[9] = 17;
    Buffer.from([127, 0, 0, 2]).copy(ip, 12);
    Buffer.from([127, 0, 0, 1]).copy(ip, 16);
    const eth = Buffer.alloc(14);
    eth.writeUInt16BE(0x0800, 12);
    const pkt = Buffer.concat([eth, ip, udp, rtp]);
    const rec = Buffer.alloc(16);
    rec.writeUInt32LE(1_700_000_000 + Math.floor(t / 1000), 0);
    rec.writeUInt32LE((t % 1000) * 1000, 4);
    rec.writeUInt32LE(pkt.length, 8);
    rec.writeUInt32LE(pkt.length, 12);
    chunks.push(rec, pkt);
  }
  writeFileSync(file, Buffer.concat(chunks));
}

/**
 * A pcap of RTP packets (Ethernet/IPv4/UDP, 20 ms apart) carrying `pcm` as G.711 µ-law, preceded and
 * followed by silence: what sipp's `play_pcap_audio` sends.
 */
export function rtpPcap(pcm: Int16Array, file: string, opts: { leadMs?: number; tailMs?: number } = {}): void {
  const lead = new Int16Array(((opts.leadMs ?? 200) * 8) | 0);
  const tail = new Int16Array(((opts.tailMs ?? 1200) * 8) | 0);
  const all = new Int16Array(lead.length + pcm.length + tail.length);
  all.set(lead, 0);
  all.set(pcm, lead.length);
  const pkts: Array<{ t: number; rtp: Buffer }> = [];
  let seq = 1000;
  let ts = 160_000;
  let t = 0;
  for (let i = 0; i < all.length; i += 160) {
    const frame = new Int16Array(160);
    frame.set(all.subarray(i, i + 160));
    const payload = Buffer.from(alawmulaw.mulaw.encode(frame));
    const rtp = Buffer.alloc(12 + payload.length);
    rtp[0] = 0x80;
    rtp[1] = i === 0 ? 0x80 : 0;
    rtp.writeUInt16BE(seq++ & 0xffff, 2);
    rtp.writeUInt32BE(ts, 4);
    rtp.writeUInt32BE(0x1234abcd, 8);
    payload.copy(rtp, 12);
    ts += 160;
    pkts.push({ t, rtp });
    t += 20;
  }
  writePcap(file, pkts);
}

/** Whether 20 ms of audio has sound (RMS above 300 on the 16-bit scale). */
export const loud = (pcm: ArrayLike<number>) => {
  let sum = 0;
  for (let i = 0; i < pcm.length; i++) sum += pcm[i] * pcm[i];
  return Math.sqrt(sum / pcm.length) > 300;
};

/**
 * A call from a raw-SIP peer (its From user part `caller`) at 127.0.0.2 to `number` at the gateway's `sipPort`,
 * answered and acknowledged, the caller's media (`callerMedia`) connected; both closed when `t` ends. `hangUp`
 * sends the BYE (CSeq 2); `peer` has what the gateway sent.
 */
export async function answeredCall(t: { teardown(f: () => void): void; match(found: unknown, pattern: RegExp, message: string): void }, sipPort: number, number: string) {
  const caller = await callerMedia();
  const peer = await udpPeer(sipPort);
  t.teardown(() => {
    caller.close();
    peer.socket.close();
  });
  const call = invite({ sipPort, number }, peer, { address: '127.0.0.2', port: caller.port });
  peer.send(call.text);
  const answer = await until(() => finalOf(peer.got, call.callId));
  t.match(answer, /^SIP\/2\.0 200 /, 'the call is answered');
  const toHeader = /^To: (.*)$/im.exec(answer)![1]!.trim();
  peer.send(call.ack(toHeader));
  await caller.connected();
  return { caller, peer, hangUp: () => peer.send(call.request('BYE', 2, toHeader)) };
}

/**
 * The caller's end of the media, played by the test on the socket the SDP names, so that what the caller
 * does can wait for what it hears: sipp's pcap replay runs on a schedule fixed before the call, and the
 * agent's answers come when the platform gets to them, which under load is later by any amount.
 * It hears the agent's RTP (counting its voiced frames) and sends the caller's audio back to where it came
 * from (the gateway takes RTP from any source): G.711 µ-law frames every 20 ms, silence when the caller
 * says nothing (a continuous stream, as a phone sends), and RFC 4733 digits (PT 101, their own SSRC and
 * sequence numbers) as the sipp pcaps did. `onPacket` sees each of the agent's packets too.
 */
export async function callerMedia(o: { onPacket?: (rtp: Buffer) => void } = {}) {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.2', () => r()));
  socket.on('error', () => {});
  let closed = false;
  let gateway: { address: string; port: number } | null = null;
  // voiced: the agent's frames with sound; quiet: how many in a row it has now sent without.
  const heard = { voiced: 0, quiet: 0 };
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  socket.on('message', (m, rinfo) => {
    gateway ??= { address: rinfo.address, port: rinfo.port };
    o.onPacket?.(m);
    if ((m[1] & 0x7f) === 0) {
      if (loud(alawmulaw.mulaw.decode(m.subarray(12)))) {
        heard.voiced++;
        heard.quiet = 0;
      } else heard.quiet++;
    }
    wake();
  });
  /** Resolves once `test` holds (checked at each packet of the agent and each frame of the caller). */
  const until = (test: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => (test() ? resolve() : waiters.push(check));
      check();
    });
  const silence = new Int16Array(160);
  let speech: Int16Array[] = [];
  let once: Int16Array[] = [];
  let spoken = 0;
  let frame = 0;
  let digitSeq = 5000;
  const send = (rtp: Buffer) => gateway && socket.send(rtp, gateway.port, gateway.address);
  const audioFrame = (pcm: Int16Array) => send(rtpOf(0, frame === 0, 1000 + frame, 160_000 + frame * 160, 0x1234abcd, Buffer.from(alawmulaw.mulaw.encode(pcm))));
  // One 20 ms clock, against absolute times: a late timer sends the frames due meanwhile at once, as a
  // network burst would, and the RTP timestamps still say when each was spoken.
  let start = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    if (closed) return;
    while (performance.now() - start >= frame * 20) {
      audioFrame(once.length ? once.shift()! : speech.length ? speech[spoken++ % speech.length] : silence);
      frame++;
    }
    wake();
    timer = setTimeout(tick, Math.max(0, start + frame * 20 - performance.now()));
  };
  return {
    port: socket.address().port,
    heard,
    until,
    /** Once the agent's RTP has come (the call is answered), the caller's stream starts. */
    async connected() {
      await until(() => gateway !== null);
      start = performance.now();
      tick();
    },
    /** Resolves after `n` more of the caller's frames (its own 20 ms clock). */
    frames(n: number) {
      const at = frame + n;
      return until(() => frame >= at);
    },
    /** The caller talks from now on, `pcm` over and over, until `quiet`. */
    talk(pcm: Int16Array) {
      const frames: Int16Array[] = [];
      for (let i = 0; i + 160 <= pcm.length; i += 160) frames.push(pcm.subarray(i, i + 160));
      speech = frames;
      spoken = 0;
    },
    quiet() {
      speech = [];
    },
    /** The caller says `pcm` once, then nothing. */
    say(pcm: Int16Array) {
      const frames: Int16Array[] = [];
      for (let i = 0; i < pcm.length; i += 160) {
        const f = new Int16Array(160);
        f.set(pcm.subarray(i, i + 160));
        frames.push(f);
      }
      once = frames;
    },
    /** Keys `digit` now: 100 ms of RFC 4733 events (start, updates, three end packets), timestamped with the audio. */
    key(digit: string) {
      const code = '0123456789*#'.indexOf(digit);
      const ts = 160_000 + frame * 160;
      for (let j = 0; j < 8; j++) {
        const end = j >= 5;
        const payload = Buffer.from([code, (end ? 0x80 : 0) | 10, 0, 0]);
        payload.writeUInt16BE(Math.min(5, j + 1) * 160, 2);
        const rtp = rtpOf(101, j === 0, digitSeq++, ts, 0x5678ef01, payload);
        setTimeout(() => send(rtp), Math.min(j, 5) * 20);
      }
    },
    /** Hangs up the media (idempotent). */
    close() {
      clearTimeout(timer);
      if (closed) return;
      closed = true;
      socket.close();
    },
  };
}

/** One RTP packet (version 2, no extensions). */
function rtpOf(pt: number, marker: boolean, seq: number, ts: number, ssrc: number, payload: Buffer): Buffer {
  const rtp = Buffer.alloc(12 + payload.length);
  rtp[0] = 0x80;
  rtp[1] = (marker ? 0x80 : 0) | pt;
  rtp.writeUInt16BE(seq & 0xffff, 2);
  rtp.writeUInt32BE(ts >>> 0, 4);
  rtp.writeUInt32BE(ssrc >>> 0, 8);
  payload.copy(rtp, 12);
  return rtp;
}

/** A scenario from test/fixtures/sipp with its `{{NAME}}` placeholders filled, written into `dir`. */
export function scenario(name: string, dir: string, vars: Record<string, string | number> = {}): string {
  let xml = readFileSync(join(SIPP_FIXTURES, name), 'utf8');
  for (const [k, v] of Object.entries(vars)) xml = xml.split(`{{${k}}}`).join(String(v));
  const left = /\{\{([A-Z_]+)\}\}/.exec(xml);
  if (left) throw new Error(`scenario ${name}: no value for ${left[1]}`);
  const file = join(dir, name);
  writeFileSync(file, xml);
  return file;
}

export interface SippRun {
  code: number | null;
  out: string;
}

/** Options of `runSipp`. */
export interface SippOptions {
  scenario: string;
  /** The platform's SIP address: sipp places the calls (a UAC). Without it sipp waits for them (a UAS). */
  target?: string;
  port: number;
  mediaPort?: number;
  calls?: number;
  rate?: number;
  limit?: number;
  transport?: 'u1' | 't1' | 'un';
  extra?: string[];
  timeoutS?: number;
  dir: string;
}

/** How many times `runSipp` starts sipp again when it could not bind its ports. */
const SIPP_BIND_ATTEMPTS = 5;

/**
 * Runs sipp on 127.0.0.2 (the `sip` package answers a synthetic 404 to requests for its own address, so the
 * far end must not share 127.0.0.1) against `target` until its calls are done.
 *
 * A port found free by `quietPort` can be taken before sipp binds it (by a test running beside this one), and
 * sipp then exits at once, having sent nothing: a CI run failed so. sipp is started again then, on fresh
 * ports where the test does not depend on them (its media ports always; its SIP port when it places the
 * calls, as the platform answers wherever the INVITE came from), else on the same ones a moment later.
 * `pid` is the sipp running now.
 */
export function runSipp(o: SippOptions): Promise<SippRun> & { readonly pid: number | undefined } {
  let child = spawnSipp(o);
  const done = (async (): Promise<SippRun> => {
    let current = o;
    for (let attempt = 1; ; attempt++) {
      const startedAt = Date.now();
      const run = await exited(child);
      const unbound = run.code !== 0 && Date.now() - startedAt < 5000 && /Unable to bind/.test(run.out);
      if (!unbound || attempt >= SIPP_BIND_ATTEMPTS) return run;
      process.stderr.write(`sipp could not bind its ports (attempt ${attempt}): ${/[^\n]*Unable to bind[^\n]*/.exec(run.out)?.[0]}\n`);
      await new Promise((r) => setTimeout(r, 200 * attempt));
      current = { ...current, mediaPort: await quietPort(), port: current.target ? await quietPort() : current.port };
      child = spawnSipp(current);
    }
  })();
  return Object.defineProperty(done, 'pid', { get: () => child.pid }) as Promise<SippRun> & { readonly pid: number | undefined };
}

function spawnSipp(o: SippOptions): ChildProcess & { out: string } {
  const args = [
    ...(o.target ? [o.target] : []),
    '-sf', o.scenario,
    '-i', '127.0.0.2',
    '-mi', '127.0.0.2',
    '-p', String(o.port),
    '-mp', String(o.mediaPort ?? o.port + 2),
    '-m', String(o.calls ?? 1),
    '-r', String(o.rate ?? 1),
    '-l', String(o.limit ?? o.calls ?? 1),
    '-t', o.transport ?? 'u1',
    '-timeout', `${o.timeoutS ?? 60}s`,
    '-timeout_error',
    '-nostdin',
    ...(o.extra ?? []),
  ];
  const child = Object.assign(spawn('/usr/bin/sipp', args, { cwd: o.dir, stdio: ['ignore', 'pipe', 'pipe'] }), { out: '' });
  child.stdout!.on('data', (d) => (child.out = (child.out + d).slice(-20_000)));
  child.stderr!.on('data', (d) => (child.out = (child.out + d).slice(-20_000)));
  return child;
}

function exited(child: ChildProcess & { out: string }): Promise<SippRun> {
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out: child.out })));
}

/** The SIP port (UDP and TCP) and TLS port a platform process with the media role printed. */
export function mediaPorts(stdout: string): { sip: number; tls: number | null } {
  const m = /media sip:[^:\s]+:(\d+)/.exec(stdout);
  if (!m) throw new Error(`no media role in: ${stdout}`);
  const tls = /sips (\d+) \(tls\)/.exec(stdout);
  return { sip: Number(m[1]), tls: tls ? Number(tls[1]) : null };
}

/** Environment of a platform with the media role on free ports (no TLS unless asked). */
export const MEDIA_ENV: Record<string, string> = { SIP_PORT: '0', SIP_TLS_PORT: 'off', RTP_PORT_MIN: '0', RTP_PORT_MAX: '0' };

/**
 * Binds `number` to an agent through the Agents API: a SIP trunk (the far end, e.g. sipp) and the number on
 * it. Answers the number's id.
 */
export async function bindNumber(api: (m: string, p: string, b?: unknown) => Promise<{ status: number; body: any; text: string }>, agentId: string, number: string, trunk: { host: string; port: number; transport?: string; transfer?: 'refer' | 'bridge' }): Promise<{ connectorId: string; numberId: string }> {
  const c = await api('POST', `/v1/agents/${agentId}/telephony/connectors`, { name: 'test trunk', host: trunk.host, port: trunk.port, transport: trunk.transport ?? 'udp', ...(trunk.transfer ? { transfer: trunk.transfer } : {}) });
  if (c.status !== 201) throw new Error(`connector: ${c.status} ${c.text}`);
  const n = await api('POST', `/v1/agents/${agentId}/telephony/phone-numbers`, { number, connector_id: c.body.id });
  if (n.status !== 201) throw new Error(`number: ${n.status} ${n.text}`);
  return { connectorId: c.body.id, numberId: n.body.id };
}

/** Whether `port` can be bound now: UDP on every address (what a platform's RTP socket takes), and TCP. */
export async function bindable(port: number): Promise<boolean> {
  const udp = await new Promise<boolean>((resolve) => {
    const u = dgram.createSocket('udp4');
    u.once('error', () => resolve(false));
    u.bind(port, '0.0.0.0', () => u.close(() => resolve(true)));
  });
  if (!udp) return false;
  return new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });
}

/** Where `quietPort` looks by default: sipp's ports. */
export const SIPP_PORTS = { from: 26_000, to: 32_000 };
/** Below sipp's: a platform's fixed RTP range (`voice.dialog`'s one port, free between its calls). */
export const RTP_PORTS = { from: 20_000, to: 26_000 };

/**
 * An even port, with the next two, that no platform of a test running beside this one can be handed: below
 * the kernel's ephemeral range (platforms take their SIP, RTP and HTTP ports from port 0, so from that range)
 * and free now for UDP and TCP. For sipp (its SIP socket, or its media sockets at the port and the port + 2),
 * or, in `RTP_PORTS`, a platform's RTP range. `freePort()` checks TCP only, in the ephemeral range, and another
 * test's platform held the same number for an RTP socket often enough to fail a CI run: sipp could not bind,
 * or the platform's packets went elsewhere.
 */
export async function quietPort(range = SIPP_PORTS): Promise<number> {
  for (;;) {
    const port = range.from + 2 * Math.floor((Math.random() * (range.to - range.from)) / 2);
    if ((await bindable(port)) && (await bindable(port + 1)) && (await bindable(port + 2))) return port;
  }
}

/** A platform with the media role on free ports, its SIP port, and a scratch directory for scenarios and audio. */
export interface VoicePlatform {
  p: Platform;
  sip: number;
  dir: string;
  /** Stops the platform and removes its data and the scratch directory (kept with KEEP=1). */
  stop(): Promise<void>;
}

/** Starts a `VoicePlatform` with `MEDIA_ENV` and `env`; `prefix` names its scratch directory. */
export async function voicePlatform(prefix: string, env: Record<string, string> = {}): Promise<VoicePlatform> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const p = await startPlatform({ env: Object.assign({}, MEDIA_ENV, env) });
  return {
    p,
    sip: mediaPorts(p.stdout()).sip,
    dir,
    async stop() {
      await p.stop();
      removeDir(p.dataDir);
      if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A `VoicePlatform` for a whole test file: started before its tests (when the voice tools are there) and stopped
 * after them; its fields read the running one.
 */
export function voiceSuite(tap: { before(f: () => Promise<void>): void; teardown(f: () => Promise<void> | void): void }, prefix: string, env: Record<string, string> = {}): Omit<VoicePlatform, 'stop'> {
  let voice: VoicePlatform | undefined;
  tap.before(async () => {
    if (voiceTools()) voice = await voicePlatform(prefix, env);
  });
  tap.teardown(() => voice?.stop());
  return {
    get p() {
      return voice!.p;
    },
    get sip() {
      return voice!.sip;
    },
    get dir() {
      return voice!.dir;
    },
  };
}
