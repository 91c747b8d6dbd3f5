/**
 * The Messaging benchmark's baseline: a bare uWebSockets.js echo server in its own process, loaded the way
 * the socket gateway loads it (the native binary, never the `ws` shim). Every message comes back as sent.
 */
import { loadNativeUws } from '../gateway/socket/uws.js';

const { uws } = loadNativeUws();
const app = uws.App();
app.ws('/ws', {
  // The Messaging API's own limit (128 KiB per message), no compression, as the gateway is configured.
  maxPayloadLength: 128 * 1024,
  idleTimeout: 0,
  message: (ws, message, isBinary) => {
    ws.send(message, isBinary);
  },
});
app.listen('127.0.0.1', 0, (token) => {
  if (!token) throw new Error('bare uWebSockets.js echo server could not listen');
  process.send?.({ port: uws.us_socket_local_port(token) });
});
