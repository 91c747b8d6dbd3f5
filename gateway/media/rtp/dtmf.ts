/** RFC 4733 telephone events: the digits 0-9, *, #, A-D as event codes 0-15. */
const EVENTS = '0123456789*#ABCD';

export interface DtmfEvent {
  digit: string;
  end: boolean;
  volume: number;
  /** In timestamp units (samples). */
  duration: number;
}

export function readDtmf(payload: Buffer): DtmfEvent | null {
  if (payload.length < 4 || payload[0] > 15) return null;
  return { digit: EVENTS[payload[0]], end: (payload[1] & 0x80) !== 0, volume: payload[1] & 0x3f, duration: payload.readUInt16BE(2) };
}

export function writeDtmf(e: DtmfEvent): Buffer {
  const code = EVENTS.indexOf(e.digit.toUpperCase());
  if (code < 0) throw new Error(`not a DTMF digit: ${e.digit}`);
  const b = Buffer.alloc(4);
  b[0] = code;
  b[1] = (e.end ? 0x80 : 0) | (e.volume & 0x3f);
  b.writeUInt16BE(Math.min(0xffff, e.duration), 2);
  return b;
}

export const isDtmfDigit = (d: string) => d.length === 1 && EVENTS.includes(d.toUpperCase());

/**
 * Turns a stream of telephone-event packets into digits: a digit counts once, when its first packet
 * arrives (the end packets are sent three times, and every packet of one event shares its RTP timestamp).
 */
export class DtmfReceiver {
  private last = -1;
  /** `onDigit` gets the event's RTP timestamp too: when the tone began, on the sender's clock (RFC 4733 2.3). */
  constructor(private readonly onDigit: (digit: string, timestamp: number) => void) {}
  receive(timestamp: number, payload: Buffer): void {
    const e = readDtmf(payload);
    if (!e || timestamp === this.last) return;
    this.last = timestamp;
    this.onDigit(e.digit, timestamp);
  }
}
