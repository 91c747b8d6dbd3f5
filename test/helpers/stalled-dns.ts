/**
 * Preloaded into a platform (`NODE_OPTIONS=--import=<this file>`, `STALLED_DNS_FIFO=<a fifo>`): `dns.lookup` of a
 * name under `.stalled.test` holds one of libuv's pool threads, as a getaddrinfo waiting on a resolver that
 * does not answer does, by opening the FIFO for reading (an `open` that blocks in a pool thread until someone
 * opens the FIFO for writing); then it fails with ENOTFOUND, as the resolver giving up does. Only the resolver
 * is replaced, and only for those names: every other lookup is the real one. The test releases the threads by
 * opening the FIFO for writing.
 */
import dns from 'node:dns';
import { close, open } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const fifo = process.env.STALLED_DNS_FIFO;
const real = dns.lookup;
const STALLED = /\.stalled\.test\.?$/i;

function stalledLookup(hostname: string, options: unknown, callback?: unknown): void {
  const cb = (typeof options === 'function' ? options : callback) as (err: NodeJS.ErrnoException) => void;
  if (fifo && STALLED.test(hostname)) {
    open(fifo, 'r', (err, fd) => {
      if (!err) close(fd, () => {});
      cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }));
    });
    return;
  }
  (real as (...a: unknown[]) => void).call(dns, hostname, options, callback);
}
dns.lookup = stalledLookup as typeof dns.lookup;
// The ESM named export `lookup` follows the patched property.
syncBuiltinESMExports();
