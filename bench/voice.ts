/**
 * Voice benchmark: concurrent calls on one media gateway process, sipp generating the calls (each asks a
 * recorded question three times and hears the agent's answers: audio both ways), at 10, 50 and 200
 * concurrent calls. Reported per level: CPU per call (the platform process, all roles, with the espeak-ng
 * and pocketsphinx children it ran), the p99 jitter of the agent's RTP send intervals (|interval − 20 ms| as
 * received on loopback), and the response latency (end of the caller's speech → the first packet of the
 * answer; the gateway's own measurement, logged per turn) p50/p99. The baseline, in the same run at the same
 * level: sipp calling sipp (`-rtp_echo` on the answering side), with the caller's pcap audio measured at the
 * same sink: sipp's CPU per call and its own RTP send jitter.
 *
 * `node dist/bench/voice.js [levels=10,50,200] [holdSeconds]`
 */
import dgram from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chatProject } from '../test/helpers/chat.js';
import { freePort } from '../test/helpers/nats.js';
import { removeDir, startPlatform } from '../test/helpers/platform.js';
import { bindNumber, MEDIA_ENV, mediaPorts, rtpPcap, runSipp, scenario, speak } from '../test/helpers/voice.js';
import { cpuSeconds } from './proc.js';
import { latencyRecorder } from './stats.js';

const levels = (process.argv[2] ?? '10,50,200').split(',').map(Number);
/** CPU seconds of a process and its waited-for children. */
const cpuOf = (pid: number): number => cpuSeconds(pid, { children: true });

/** A UDP sink: per-SSRC send intervals of the RTP it receives. */
async function sink() {
  const socket = dgram.createSocket('udp4');
  socket.on('error', () => {});
  await new Promise<void>((r) => socket.bind(0, '127.0.0.2', () => r()));
  const last = new Map<number, number>();
  const jitter = latencyRecorder();
  let packets = 0;
  socket.on('message', (m) => {
    if (m.length < 12) return;
    const now = performance.now();
    const ssrc = m.readUInt32BE(8);
    const prev = last.get(ssrc);
    last.set(ssrc, now);
    packets++;
    // Gaps over 200 ms are pauses between streams (sipp between pcaps), not jitter.
    if (prev !== undefined && now - prev < 200) jitter.record(Math.abs(now - prev - 20));
  });
  return { port: socket.address().port, jitter, packets: () => packets, close: () => socket.close() };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-voice-'));
  const question = join(dir, 'question.pcap');
  rtpPcap(speak('what are your opening hours', dir), question, { leadMs: 200, tailMs: 1000 });
  const rows: string[] = [];
  for (const level of levels) {
    // ---- the platform's media gateway
    const p = await startPlatform({ env: { ...MEDIA_ENV, LOG_LEVEL: 'debug', LOG_FORMAT: 'json', VOICE_NO_INPUT_MS: '600000' } });
    const project = await chatProject(p, { name: `Bench ${level}`, functions: { start: 'function start(conv) { conv.say("Hello, Acme here."); }' } });
    const number = '+442079460199';
    const sippPort = await freePort();
    await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: sippPort });
    const s1 = await sink();
    const file = scenario('bench-call.xml', dir, { NUMBER: number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: s1.port, GREETING_MS: 2000, SPEECH_PCAP: question, GAP_MS: 6000 });
    const cpu0 = cpuOf(p.child.pid!);
    const t0 = performance.now();
    const run = await runSipp({ scenario: file, target: `127.0.0.1:${mediaPorts(p.stdout()).sip}`, port: sippPort, mediaPort: await freePort(), calls: level, rate: Math.max(10, level), limit: level, dir, timeoutS: 300 });
    const wall = (performance.now() - t0) / 1000;
    const cpu = cpuOf(p.child.pid!) - cpu0;
    const latency = latencyRecorder();
    for (const line of p.stdout().split('\n')) {
      if (!line.includes('voice turn answered')) continue;
      try {
        latency.record(JSON.parse(line).response_latency_ms);
      } catch {
        // not a JSON line
      }
    }
    s1.close();
    await p.stop();
    removeDir(p.dataDir);

    // ---- baseline: sipp calling sipp (echo on), the caller's audio measured at the same kind of sink
    const s2 = await sink();
    const echoPort = await freePort();
    const echo = runSipp({ scenario: scenario('bench-echo-uas.xml', dir, { AUDIO_IP: '127.0.0.2', AUDIO_PORT: s2.port }), port: echoPort, mediaPort: await freePort(), calls: level, limit: level, extra: ['-rtp_echo'], dir, timeoutS: 300 });
    const echoHost = { pid: echo.pid! };
    await new Promise((r) => setTimeout(r, 300));
    const b0 = cpuOf(echoHost.pid);
    const callerFile = scenario('bench-call.xml', dir, { NUMBER: number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: await freePort(), GREETING_MS: 2000, SPEECH_PCAP: question, GAP_MS: 6000 });
    const caller = runSipp({ scenario: callerFile, target: `127.0.0.2:${echoPort}`, port: await freePort(), mediaPort: await freePort(), calls: level, rate: Math.max(10, level), limit: level, dir, timeoutS: 300 });
    const callerPid = caller.pid!;
    // NaN (not readable) once a process has exited.
    const c0 = cpuOf(callerPid) || 0;
    // Sample the caller's CPU just before it exits (after, /proc has no entry for it).
    let callerCpu = 0;
    const sampler = setInterval(() => {
      const now = cpuOf(callerPid);
      if (!Number.isNaN(now)) callerCpu = now - c0;
    }, 200);
    const bRun = await caller;
    clearInterval(sampler);
    const echoCpu = cpuOf(echoHost.pid) - b0 || 0;
    await echo;
    s2.close();

    const j1 = s1.jitter.summary();
    const j2 = s2.jitter.summary();
    const l = latency.summary();
    rows.push(
      `| ${level} | ${run.code === 0 ? 'ok' : `sipp exit ${run.code}`} | ${((cpu / wall / level) * 100).toFixed(2)} % | ${j1.p99.toFixed(2)} ms | ${l.p50.toFixed(0)} / ${l.p99.toFixed(0)} ms (${l.count} turns) | ${(((callerCpu + echoCpu) / wall / level) * 100).toFixed(2)} % | ${j2.p99.toFixed(2)} ms${bRun.code === 0 ? '' : ` (sipp exit ${bRun.code})`} |`,
    );
    process.stdout.write(`${rows[rows.length - 1]}\n`);
  }
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(
    [
      '',
      '| concurrent calls | calls | CPU per call (% of a core) | agent RTP send jitter p99 | response latency p50 / p99 | sipp↔sipp CPU per call | sipp RTP send jitter p99 |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
    ].join('\n'),
  );
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
