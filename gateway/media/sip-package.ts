import { createRequire, Module } from 'node:module';
import net from 'node:net';
import tls from 'node:tls';
import type sipType from 'sip';
import { guardOutgoingStream } from './stream-guard.js';

/**
 * The `sip` package as the media gateway uses it: a copy of its own whose `net.connect` and `tls.connect` (the
 * streams it opens to a trunk over TCP or TLS) show each stream to `guardOutgoingStream` before its parser
 * reads it. The streams a listener takes are guarded where the listener is made (`listening.ts`); the ones the
 * package opens itself are made long after, on a DNS answer or a retry timer, so no synchronous patch can
 * reach them. The copy sees the `net` and `tls` below instead of Node's; everything else it requires is
 * Node's. Importers of 'sip' itself get the package unchanged (`stream-guard.ts` takes only its parser).
 */
const connecting = {
  net: Object.create(net, {
    connect: { value: (...args: Parameters<typeof net.connect>) => guardOutgoingStream(net.connect(...args)) },
  }) as typeof net,
  tls: Object.create(tls, {
    connect: { value: (...args: Parameters<typeof tls.connect>) => guardOutgoingStream(tls.connect(...args)) },
  }) as typeof tls,
};

function load(): typeof sipType {
  const require = createRequire(import.meta.url);
  const file = require.resolve('sip');
  const cached = require.cache[file];
  const requireOf = Module.prototype.require;
  delete require.cache[file];
  // Only while the package's own module body runs (synchronously): its `require('net')` and `require('tls')`.
  Module.prototype.require = function (this: NodeJS.Module, id: string) {
    if (this.filename === file && (id === 'net' || id === 'tls')) return connecting[id];
    return requireOf.call(this, id);
  } as typeof requireOf;
  try {
    return require(file) as typeof sipType;
  } finally {
    Module.prototype.require = requireOf;
    if (cached) require.cache[file] = cached;
    else delete require.cache[file];
  }
}

const sip = load();
export default sip;
