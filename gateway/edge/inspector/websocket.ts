import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * The least of RFC 6455 a server-to-client feed needs, on Node's own HTTP server (Fastify has no WebSocket
 * support and the edge takes no extra package for one feed): the handshake, text frames out, and of what
 * the client sends only close (answered) and ping (ponged); client messages are read and ignored. Frames
 * of more than `MAX_CLIENT_FRAME` bytes from the client close the connection.
 */
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const MAX_CLIENT_FRAME = 64 * 1024;

export interface FeedSocket {
  send(text: string): void;
  close(code?: number): void;
  readonly closed: boolean;
  onClose(listener: () => void): void;
}

/** Refuses an upgrade with an HTTP status and a JSON body. */
export function refuseUpgrade(socket: Duplex, status: number, reason: string, body: unknown): void {
  const text = JSON.stringify(body);
  socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
}

function frame(opcode: number, payload: Buffer): Buffer {
  const len = payload.length;
  const head = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | opcode;
  if (len < 126) head[1] = len;
  else if (len < 65536) {
    head[1] = 126;
    head.writeUInt16BE(len, 2);
  } else {
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(len), 2);
  }
  return Buffer.concat([head, payload]);
}

/** Completes the handshake of an upgrade request; null (and a 400) when it is not a valid WebSocket one. */
export function acceptUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): FeedSocket | null {
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || req.headers['sec-websocket-version'] !== '13' || !/websocket/i.test(req.headers.upgrade ?? '')) {
    refuseUpgrade(socket, 400, 'Bad Request', { message: 'expected a WebSocket upgrade (version 13)', errors: [] });
    return null;
  }
  const accept = createHash('sha1').update(key + GUID).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
  let closed = false;
  const listeners: Array<() => void> = [];
  const finish = () => {
    if (closed) return;
    closed = true;
    for (const l of listeners) l();
  };
  const close = (code = 1000) => {
    if (closed) return;
    const payload = Buffer.alloc(2);
    payload.writeUInt16BE(code, 0);
    socket.end(frame(0x8, payload));
    finish();
  };
  let buffer = head.length ? Buffer.from(head) : Buffer.alloc(0);
  const read = () => {
    while (buffer.length >= 2) {
      const opcode = buffer[0] & 0x0f;
      const masked = (buffer[1] & 0x80) !== 0;
      let len = buffer[1] & 0x7f;
      let offset = 2;
      if (len === 126) {
        if (buffer.length < 4) return;
        len = buffer.readUInt16BE(2);
        offset = 4;
      } else if (len === 127) {
        if (buffer.length < 10) return;
        const big = buffer.readBigUInt64BE(2);
        if (big > BigInt(MAX_CLIENT_FRAME)) return close(1009);
        len = Number(big);
        offset = 10;
      }
      if (len > MAX_CLIENT_FRAME) return close(1009);
      const total = offset + (masked ? 4 : 0) + len;
      if (buffer.length < total) return;
      const mask = masked ? buffer.subarray(offset, offset + 4) : null;
      const payload = Buffer.from(buffer.subarray(total - len, total));
      if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      buffer = buffer.subarray(total);
      if (opcode === 0x8) return close(payload.length >= 2 ? payload.readUInt16BE(0) : 1000);
      if (opcode === 0x9 && !closed) socket.write(frame(0xa, payload));
    }
  };
  socket.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    read();
  });
  socket.on('close', finish);
  socket.on('error', finish);
  read();
  return {
    send: (text) => {
      if (!closed) socket.write(frame(0x1, Buffer.from(text, 'utf8')));
    },
    close,
    get closed() {
      return closed;
    },
    onClose: (l) => listeners.push(l),
  };
}
