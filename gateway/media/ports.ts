import dgram from 'node:dgram';
import net from 'node:net';

/**
 * A port free for both UDP and TCP on `host` (SIP listens on both with one number). The `sip` package
 * reads port 0 as "the default 5060", so "any free port" is resolved here before it starts.
 */
export async function freeSipPort(host: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = net.createServer();
      s.once('error', reject);
      s.listen(0, host, () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const udpFree = await new Promise<boolean>((resolve) => {
      const u = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
      u.once('error', () => resolve(false));
      u.bind(port, host, () => u.close(() => resolve(true)));
    });
    if (udpFree) return port;
  }
  throw new Error('no free port for SIP');
}
