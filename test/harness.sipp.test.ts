/**
 * The voice tests' sipp harness (`runSipp`): a port taken between `quietPort` and sipp's start (by a test
 * running beside this one) once made sipp exit at once, having sent nothing, and failed a CI run. sipp is
 * started again: on fresh ports where the test does not depend on them, else on the same SIP port a moment
 * later. The far end here is the test's own UDP socket.
 */
import t, { type Test } from 'tap';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { quietPort, runSipp, scenario } from './helpers/voice.js';
import { toolAvailable } from './helpers/tools.js';

const needsSipp = () => (toolAvailable('/usr/bin/sipp', 'sip-tester') ? {} : { skip: 'sipp is not installed' });
const dir = mkdtempSync(join(tmpdir(), 'sb-harness-sipp-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A UDP socket on `address`:`port` (0: any), kept until the test ends. */
async function udp(t: Test, address: string, port = 0): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(port, address, () => r()));
  t.teardown(() => s.close());
  return s;
}

t.test('sipp placing the call: its SIP and media ports taken, it runs on fresh ones', needsSipp(), async (t) => {
  const far = await udp(t, '127.0.0.1');
  const from: number[] = [];
  far.on('message', (m, rinfo) => {
    from.push(rinfo.port);
    const text = m.toString();
    const keep = text.split('\r\n').filter((l) => /^(Via|From|To|Call-ID|CSeq):/i.test(l));
    far.send(`SIP/2.0 200 OK\r\n${keep.join('\r\n')}\r\nContent-Length: 0\r\n\r\n`, rinfo.port, rinfo.address);
  });
  const sipPort = await quietPort();
  const mediaPort = await quietPort();
  await udp(t, '127.0.0.2', sipPort);
  await udp(t, '127.0.0.2', mediaPort);
  const run = await runSipp({ scenario: scenario('harness-options.xml', dir), target: `127.0.0.1:${far.address().port}`, port: sipPort, mediaPort, dir, timeoutS: 10 });
  t.equal(run.code, 0, 'sipp sent its OPTIONS and took the 200', { out: run.out.slice(-2000) });
  t.ok(from.length > 0 && from.every((p) => p !== sipPort), `from another SIP port than the taken one (${from.join(', ')})`);
});

t.test('sipp waiting for the call: its media port taken, it runs on the same SIP port with a fresh media port', needsSipp(), async (t) => {
  const sipPort = await quietPort();
  const mediaPort = await quietPort();
  await udp(t, '127.0.0.2', mediaPort);
  const running = runSipp({ scenario: scenario('harness-options-uas.xml', dir), port: sipPort, mediaPort, dir, timeoutS: 10 });
  const near = await udp(t, '127.0.0.1');
  let answered = false;
  near.on('message', (m) => (answered ||= m.toString().startsWith('SIP/2.0 200')));
  const options = (n: number) =>
    `OPTIONS sip:probe@127.0.0.2:${sipPort} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:${near.address().port};branch=z9hG4bK-h${n}\r\nFrom: <sip:t@127.0.0.1>;tag=h\r\nTo: <sip:probe@127.0.0.2>\r\nCall-ID: harness-${n}@127.0.0.1\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n`;
  // Sent until answered: sipp listens only once its second start bound the port.
  for (let n = 0; !answered && n < 50; n++) {
    near.send(options(n), sipPort, '127.0.0.2');
    await new Promise((r) => setTimeout(r, 200));
  }
  const run = await running;
  t.ok(answered, 'sipp answered on the SIP port the test gave it');
  t.equal(run.code, 0, 'and ended its scenario', { out: run.out.slice(-2000) });
});
