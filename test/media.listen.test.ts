/**
 * The SIP user agent's sockets: a port another process holds makes the start fail with EADDRINUSE (the `sip`
 * package alone would throw an uncaught 'error' and end the process), and the media gateway, given port 0,
 * moves on to another port when the one it found free was taken before the stack bound it.
 */
import t from 'tap';
import dgram from 'node:dgram';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SipEndpoint } from '../gateway/media/dialog.js';
import { startMediaGateway, type MediaSettings } from '../gateway/media/server.js';
import { freeSipPort } from '../gateway/media/ports.js';

const HOST = '127.0.0.1';

async function holdUdp(port = 0): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(port, HOST, () => r()));
  return s;
}
async function holdTcp(port = 0): Promise<net.Server> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(port, HOST, () => r()));
  return s;
}
const udpPort = (s: dgram.Socket) => s.address().port;
const tcpPort = (s: net.Server) => (s.address() as net.AddressInfo).port;
const close = (s: dgram.Socket | net.Server) => new Promise<void>((r) => s.close(() => r()));
/** Whether a TCP listener can take `port` now (the failed stack's TCP server was closed). */
async function tcpFree(port: number): Promise<boolean> {
  const s = net.createServer();
  const ok = await new Promise<boolean>((r) => {
    s.once('error', () => r(false));
    s.listen(port, HOST, () => r(true));
  });
  if (ok) await close(s);
  return ok;
}

t.test('a UDP port held by another socket: start rejects with EADDRINUSE, the process lives, stop closes the TCP side', async (t) => {
  const held = await holdUdp();
  t.teardown(() => close(held));
  const port = udpPort(held);
  const ua = new SipEndpoint({ host: HOST, port });
  await t.rejects(ua.start(), { code: 'EADDRINUSE' });
  ua.stop();
  t.ok(await tcpFree(port), 'the TCP listener of the failed start is closed');
});

t.test('a TCP port held: the same', async (t) => {
  const held = await holdTcp();
  t.teardown(() => close(held));
  const ua = new SipEndpoint({ host: HOST, port: tcpPort(held) });
  await t.rejects(ua.start(), { code: 'EADDRINUSE' });
  t.doesNotThrow(() => ua.stop());
});

t.test('free ports: start resolves once both listen, and a SIP OPTIONS over UDP is answered', async (t) => {
  const port = await freeSipPort(HOST);
  const ua = new SipEndpoint({ host: HOST, port });
  await ua.start();
  t.teardown(() => ua.stop());
  const client = dgram.createSocket('udp4');
  t.teardown(() => client.close());
  await new Promise<void>((r) => client.bind(0, HOST, () => r()));
  const answer = new Promise<string>((r) => client.once('message', (m) => r(m.toString())));
  const me = `${HOST}:${client.address().port}`;
  client.send(
    [
      `OPTIONS sip:switchboard@${HOST}:${port} SIP/2.0`,
      `Via: SIP/2.0/UDP ${me};branch=z9hG4bK-listen-1`,
      `From: <sip:probe@${me}>;tag=1`,
      `To: <sip:switchboard@${HOST}:${port}>`,
      'Call-ID: listen-1@probe',
      'CSeq: 1 OPTIONS',
      'Max-Forwards: 70',
      'Content-Length: 0',
      '',
      '',
    ].join('\r\n'),
    port,
    HOST,
  );
  t.match(await answer, /^SIP\/2\.0 200 /, 'answered 200 OK');
});

t.test('port 0: a port taken between the probe and the bind is passed over for another', async (t) => {
  const held = await holdUdp();
  t.teardown(() => close(held));
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-media-listen-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const handed: number[] = [];
  const logged: string[] = [];
  const settings = { sipPort: 0, tlsPort: null, rtpPortMin: 0, rtpPortMax: 0 } as unknown as MediaSettings;
  const gw = await startMediaGateway({
    host: HOST,
    settings,
    dataDir,
    log: (_level: string, msg: string) => void logged.push(msg),
    // The first answer is the port another socket holds: what a race with another process looks like.
    freePort: async (host: string) => {
      const port = handed.length === 0 ? udpPort(held) : await freeSipPort(host);
      handed.push(port);
      return port;
    },
  } as unknown as Parameters<typeof startMediaGateway>[0]);
  t.teardown(() => gw.close());
  t.equal(handed.length, 2, 'a second port was asked for');
  t.equal(gw.ua.o.port, handed[1], 'and the user agent listens on it');
  t.not(gw.ua.o.port, udpPort(held));
});

t.test('a fixed port in use: start fails with a message naming the setting', async (t) => {
  const held = await holdUdp();
  t.teardown(() => close(held));
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-media-listen-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const settings = { sipPort: udpPort(held), tlsPort: null, rtpPortMin: 0, rtpPortMax: 0 } as unknown as MediaSettings;
  await t.rejects(
    startMediaGateway({ host: HOST, settings, dataDir, log: () => {} } as unknown as Parameters<typeof startMediaGateway>[0]),
    { message: new RegExp(`SIP_PORT ${udpPort(held)} is in use`) },
  );
});

t.test('a fixed TLS port in use: start fails with a message naming SIP_TLS_PORT', async (t) => {
  const held = await holdTcp();
  t.teardown(() => close(held));
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-media-listen-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  // The certificate is generated into the data dir (openssl), so the start reaches the bind.
  const settings = { sipPort: 0, tlsPort: tcpPort(held), tlsVerify: true, rtpPortMin: 0, rtpPortMax: 0 } as unknown as MediaSettings;
  await t.rejects(
    startMediaGateway({ host: HOST, settings, dataDir, log: () => {} } as unknown as Parameters<typeof startMediaGateway>[0]),
    { message: new RegExp(`SIP_TLS_PORT ${tcpPort(held)} is in use`) },
  );
});

t.test('RTP_PORT_MIN above RTP_PORT_MAX stops the start naming it; equal bounds, and 0 and 0 (any), are taken as given', async (t) => {
  const { loadConfig } = await import('../platform/config.js');
  t.throws(() => loadConfig({ RTP_PORT_MIN: '16520', RTP_PORT_MAX: '16510' }), /RTP_PORT_MIN must not exceed RTP_PORT_MAX/);
  t.match(loadConfig({ RTP_PORT_MIN: '16510', RTP_PORT_MAX: '16520' }).media, { rtpPortMin: 16510, rtpPortMax: 16520 });
  t.match(loadConfig({ RTP_PORT_MIN: '16510', RTP_PORT_MAX: '16510' }).media, { rtpPortMin: 16510, rtpPortMax: 16510 });
  t.match(loadConfig({ RTP_PORT_MIN: '0', RTP_PORT_MAX: '0' }).media, { rtpPortMin: 0, rtpPortMax: 0 });
});

t.test('VOICE_TRANSFER_RING_TIMEOUT_MS within its bounds, 30 s by default; RECORDING_RETENTION_DAYS whole days, as the project setting', async (t) => {
  const { loadConfig } = await import('../platform/config.js');
  t.equal(loadConfig({}).media.transferRingTimeoutMs, 30_000);
  t.equal(loadConfig({ VOICE_TRANSFER_RING_TIMEOUT_MS: '5000' }).media.transferRingTimeoutMs, 5000);
  for (const bad of ['999', '600001', 'soon', '1500.5']) t.throws(() => loadConfig({ VOICE_TRANSFER_RING_TIMEOUT_MS: bad }), /VOICE_TRANSFER_RING_TIMEOUT_MS/, bad);
  t.equal(loadConfig({ RECORDING_RETENTION_DAYS: '7' }).recordings.retentionDays, 7);
  t.throws(() => loadConfig({ RECORDING_RETENTION_DAYS: '1.5' }), /RECORDING_RETENTION_DAYS/, 'a fraction of a day is refused');
});
