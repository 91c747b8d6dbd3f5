import type { Duplex } from 'node:stream';
import sip from 'sip';

/** The `sip` package's own bounds on a stream message (its `makeStreamParser` defaults). */
const MAX_HEADER_BYTES = 60_480;
const MAX_CONTENT_LENGTH = 604_800;
/** A message's header block, as the `sip` package's stream parser finds it. */
const HEADER_BLOCK = /^\s*([\S\s]*?)\r\n\r\n([\S\s]*)$/;

/**
 * Watches the messages a SIP stream (TCP or TLS) carries and destroys the stream when one can never be framed:
 * a `Content-Length` that is not a whole number of bytes. The `sip` package's stream parser waits for "NaN
 * bytes" of body after `Content-Length: abc`, buffering everything the peer sends until the string is too long
 * for V8, which throws out of its 'data' handler and ends the process. RFC 3261 18.3: on a stream, the length
 * is what frames a message, so a stream without a usable one cannot go on.
 *
 * It must be attached before the stack's own 'data' listener (it is, from the server's connection callback);
 * it follows the stream exactly as that parser does (the same header-block rule, `sip.parse` for the headers),
 * so the two stay in step. What the parser bounds itself (headers past 60,480 bytes, a length over 604,800)
 * it is left to.
 */
export function guardSipStream(stream: Duplex): void {
  let pending = '';
  /** Body bytes still to come before the next header block; -1 while reading headers. */
  let body = -1;
  stream.on('data', (chunk: string | Buffer) => {
    if (stream.destroyed) return;
    pending += typeof chunk === 'string' ? chunk : chunk.toString('binary');
    for (;;) {
      if (body >= 0) {
        if (pending.length < body) return;
        pending = pending.slice(body);
        body = -1;
      }
      if (pending.length > MAX_HEADER_BYTES) {
        pending = '';
        return;
      }
      const block = HEADER_BLOCK.exec(pending);
      if (!block) return;
      pending = block[2]!;
      const length: unknown = sip.parse(`${block[1]}\r\n\r\n`)?.headers['content-length'];
      if (length === undefined) continue;
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0) {
        stream.destroy();
        return;
      }
      if (length > MAX_CONTENT_LENGTH) return;
      body = length;
    }
  });
}
