import dgram from 'node:dgram';

/** Every port of the range is taken (calls, and INVITEs waiting for their ACK, hold one each). */
export class RtpPortsExhausted extends Error {
  constructor(min: number, max: number) {
    super(`no free RTP port in ${min}-${max}`);
    this.name = 'RtpPortsExhausted';
  }
}

/**
 * Hands out RTP ports from `RTP_PORT_MIN`..`RTP_PORT_MAX` (even ports, as RFC 3550 asks; RTCP would take
 * the odd one above). A port is tried by binding it: another process holding it just moves us on. Each call's
 * search starts at a random even port of the range, so that a port cannot be guessed from another call's (an
 * off-path sender would otherwise know where the next call's audio is taken).
 */
export class RtpPorts {
  constructor(private readonly host: string, private readonly min: number, private readonly max: number) {}

  /** A bound UDP socket on a free even port of the range (port 0 when the range is 0..0: any port). */
  async bind(): Promise<dgram.Socket> {
    if (this.min === 0 && this.max === 0) return this.tryBind(0) as Promise<dgram.Socket>;
    const first = this.min + (this.min % 2);
    const span = Math.floor((this.max - first) / 2) + 1;
    const offset = Math.floor(Math.random() * span);
    for (let i = 0; i < span; i++) {
      const socket = await this.tryBind(first + 2 * ((offset + i) % span));
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
