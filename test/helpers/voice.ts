import { spawn, spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { DIST } from './platform.js';
import { toolAvailable } from './tools.js';

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

/**
 * Runs sipp on 127.0.0.2 (the `sip` package answers a synthetic 404 to requests for its own address, so the
 * far end must not share 127.0.0.1) against `target` until its calls are done.
 */
export function runSipp(o: { scenario: string; target?: string; port: number; mediaPort?: number; calls?: number; rate?: number; limit?: number; transport?: 'u1' | 't1' | 'un'; extra?: string[]; timeoutS?: number; dir: string }): Promise<SippRun> & { pid: number | undefined } {
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
    '-bg',
    ...(o.extra ?? []),
  ].filter((a) => a !== '-bg');
  const child = spawn('/usr/bin/sipp', args, { cwd: o.dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out = (out + d).slice(-20_000)));
  child.stderr!.on('data', (d) => (out = (out + d).slice(-20_000)));
  const done = new Promise<SippRun>((resolve) => child.once('exit', (code) => resolve({ code, out })));
  return Object.assign(done, { pid: child.pid });
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
export async function bindNumber(api: (m: string, p: string, b?: unknown) => Promise<{ status: number; body: any; text: string }>, agentId: string, number: string, trunk: { host: string; port: number; transport?: string }): Promise<{ connectorId: string; numberId: string }> {
  const c = await api('POST', `/v1/agents/${agentId}/telephony/connectors`, { name: 'test trunk', host: trunk.host, port: trunk.port, transport: trunk.transport ?? 'udp' });
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
