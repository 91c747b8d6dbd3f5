/** The bare baseline's responder: answers every request on `bench.echo` with its own payload. */
import { connectNats } from '../actors/transport/mod.js';

// The roles' connect: a URL with credentials, or a server not up yet, behaves here as it does for them.
const nc = await connectNats(process.argv[2], { name: 'bench-echo' });
nc.subscribe('bench.echo', {
  callback: (_err, msg) => {
    msg.respond(msg.data);
  },
});
await nc.flush();
process.send?.('ready');
