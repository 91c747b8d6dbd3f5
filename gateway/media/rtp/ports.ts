import dgram from 'node:dgram';

/**
 * Hands out RTP ports from `RTP_PORT_MIN`..`RTP_PORT_MAX` (even ports, as RFC 3550 asks; RTCP would take
 * the odd one above). A port is tried by binding it: another process holding it just moves us on.
 */
/** Every port of the range is taken (calls, and INVITEs waiting for their ACK, hold one each). */
export class RtpPortsExhausted extends Error {
  constructor(min: number, max: number) {
    super(`no free RTP port in ${min}-${max}`);
    this.name = 'RtpPortsExhausted';
  }
}

export class RtpPorts {
  private cursor: number;
  constructor(private readonly host: string, private readonly min: number, private readonly max: number) {
    // A random first port: calls' ports do not follow one another from a known start, which would tell an
    // off-path sender where the next call's audio is taken.
    const span = Math.floor((max - min) / 2) + 1;
    this.cursor = min + (min % 2) + 2 * Math.floor(Math.random() * span);
    if (this.cursor > max) this.cursor = min + (min % 2);
  }

  /** A bound UDP socket on a free even port of the range (port 0 when the range is 0..0: any port). */
  async bind(): Promise<dgram.Socket> {
    if (this.min === 0 && this.max === 0) return this.tryBind(0) as Promise<dgram.Socket>;
    const span = Math.floor((this.max - this.min) / 2) + 1;
    for (let i = 0; i < span; i++) {
      const port = this.cursor;
      this.cursor += 2;
      if (this.cursor > this.max) this.cursor = this.min + (this.min % 2);
      const socket = await this.tryBind(port);
      if (socket) return socket;
    }
    throw new RtpPortsExhausted(this.min, this.max);
  }

  private tryBind(port: number): Promise<dgram.Socket | null> {
    return new Promise((resolve) => {
      const socket = dgram.createSocket(this.host.includes(':') ? 'udp6' : 'udp4');
      socket.once('error', () => {
        socket.close();
        resolve(null);
      });
      socket.bind(port, this.host, () => {
        socket.removeAllListeners('error');
        resolve(socket);
      });
    });
  }
}
