import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import sip from 'sip';
import { PerAddress } from './per-address.js';
import { answerStreamMessage } from './bad-request.js';

/** The `sip` package's own bounds on a stream message (its `makeStreamParser` defaults). */
const MAX_HEADER_BYTES = 60_480;
const MAX_CONTENT_LENGTH = 604_800;
/**
 * A message's header block as the `sip` package's stream parser finds it (its `/^\s*([\S\s]*?)\r\n\r\n/`,
 * without the regular expression's quadratic worst case): after any leading whitespace, up to the first blank
 * line. Null while no blank line has come.
 */
function headerBlock(text: string): { headers: string; rest: string } | null {
  let start = 0;
  while (start < text.length && /\s/.test(text[start]!)) start++;
  const end = text.indexOf('\r\n\r\n', start);
  if (end >= 0) return { headers: text.slice(start, end), rest: text.slice(end + 4) };
  // The expression's `\s*` gives back: a blank line within the leading whitespace (keep-alive CRLFs) ends an
  // empty block there, which the package then drops.
  const blank = start >= 4 ? text.lastIndexOf('\r\n\r\n', start - 4) : -1;
  return blank < 0 ? null : { headers: '', rest: text.slice(blank + 4) };
}

export interface StreamGuardOptions {
  /** A message begun must be whole within this (a peer sending a byte a second holds nothing for hours). */
  messageDeadlineMs: number;
  /** Streams one address may hold open at once; more are closed as they come. */
  maxPerAddress: number;
}

export const STREAM_GUARD: StreamGuardOptions = { messageDeadlineMs: 30_000, maxPerAddress: 64 };

/**
 * Guards the SIP streams (TCP or TLS) a listener takes. Each is closed when:
 *
 * - a message can never be framed: a `Content-Length` that is not a whole number of bytes. The `sip`
 *   package's stream parser waits for "NaN bytes" of body after `Content-Length: abc`, buffering everything the
 *   peer sends until the string is too long for V8, which throws out of its 'data' handler and ends the process.
 *   RFC 3261 18.3: on a stream, the length is what frames a message, so a stream without a usable one cannot go on;
 * - a message begun is not whole within `messageDeadlineMs` (one header byte a second would otherwise hold the
 *   stream for the 16 hours the 60 KB header bound takes to reach);
 * - its address already holds `maxPerAddress` streams (a trunk reuses one or a few).
 *
 * `guard` must see a stream before the stack's own 'data' listener (it does, from the server's connection
 * callback); it follows the stream as that parser does (its header-block rule, `sip.parse` for the headers),
 * so the two stay in step. What the parser bounds itself (headers past 60,480 bytes, a length over
 * 604,800) it is left to.
 */
export function sipStreamGuard(o: StreamGuardOptions = STREAM_GUARD): (stream: Socket) => void {
  const open = new PerAddress();
  return (stream) => {
    const address = stream.remoteAddress ?? '';
    stream.once('close', open.hold(address));
    if (open.count(address) > o.maxPerAddress) {
      stream.destroy();
      return;
    }
    watchFraming(stream, o.messageDeadlineMs);
  };
}

/**
 * Guards a stream the stack opened itself, to a trunk (`sip-package.ts`): a hostile far end framing as above is
 * as dangerous as a hostile caller. No per-address bound: the stack opens one stream per trunk address.
 */
export function guardOutgoingStream<S extends Socket>(stream: S, o: StreamGuardOptions = STREAM_GUARD): S {
  watchFraming(stream, o.messageDeadlineMs);
  return stream;
}

/** How long a TLS connection has to finish its handshake (Node's default is 120 s). */
export const TLS_HANDSHAKE_MS = 10_000;

/**
 * Closes a TLS connection whose handshake failed or did not finish within the server's `handshakeTimeout`
 * (`TLS_HANDSHAKE_MS`). Node reports either as 'tlsClientError' and, when nothing listens for it, leaves the
 * connection open: one that sent nothing at all was held for ever.
 */
export function closeFailedHandshakes(server: TlsServer): void {
  server.on('tlsClientError', (_err, socket) => socket.destroy());
}

function watchFraming(stream: Socket, deadlineMs: number): void {
  let pending = '';
  /** Body bytes still to come before the next header block; -1 while reading headers. */
  let body = -1;
  let deadline: NodeJS.Timeout | null = null;
  const close = () => {
    if (deadline) clearTimeout(deadline);
    stream.destroy();
  };
  stream.once('close', () => deadline && clearTimeout(deadline));
  stream.on('data', (chunk: string | Buffer) => {
    if (stream.destroyed) return;
    pending += typeof chunk === 'string' ? chunk : chunk.toString('binary');
    /** Whether a message came whole in this read: the next one's deadline starts now. */
    let finished = false;
    for (;;) {
      if (body >= 0) {
        if (pending.length < body) break;
        pending = pending.slice(body);
        body = -1;
        finished = true;
      }
      if (pending.length > MAX_HEADER_BYTES) {
        pending = '';
        break;
      }
      const block = headerBlock(pending);
      if (!block) break;
      pending = block.rest;
      const message = sip.parse(`${block.headers}\r\n\r\n`);
      const length: unknown = message?.headers['content-length'];
      if (length === undefined) {
        // Unframed: the package's parser drops it (a request is answered 400, `bad-request.ts`).
        answerStreamMessage(stream, message);
        finished = true;
        continue;
      }
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0) return close();
      if (length > MAX_CONTENT_LENGTH) return;
      // A request the package will drop for a header field it lacks is answered 400 here, on its stream.
      answerStreamMessage(stream, message);
      body = length;
    }
    // What is left is part of a message (keep-alive CRLFs are none): it has until the deadline to be whole,
    // counted from the read that began it.
    const partial = body >= 0 || pending.trim() !== '';
    if (deadline && (!partial || finished)) {
      clearTimeout(deadline);
      deadline = null;
    }
    if (partial && !deadline) {
      deadline = setTimeout(close, deadlineMs);
      deadline.unref?.();
    }
  });
}
