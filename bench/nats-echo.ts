/** The bare baseline's responder: answers every request on `bench.echo` with its own payload. */
import { connect } from '@nats-io/transport-node';

const nc = await connect({ servers: process.argv[2] });
nc.subscribe('bench.echo', {
  callback: (_err, msg) => {
    msg.respond(msg.data);
  },
});
await nc.flush();
process.send?.('ready');
