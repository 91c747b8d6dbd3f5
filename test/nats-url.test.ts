/**
 * NATS_URL's credentials: nats.js v3 ignores a URL's user info, so `parseNatsUrl` splits it into the options
 * it reads, and keeps it out of the server address that logs and error messages show.
 */
import t from 'tap';
import { parseNatsUrl } from '../actors/transport/mod.js';

t.same(parseNatsUrl('nats://127.0.0.1:4222'), { server: 'nats://127.0.0.1:4222' }, 'no credentials');
t.same(parseNatsUrl('127.0.0.1:4222'), { server: '127.0.0.1:4222' }, 'no scheme, as nats.js accepts');
t.same(parseNatsUrl('nats://sb:s3cret@nats.internal:4222'), { server: 'nats://nats.internal:4222', user: 'sb', pass: 's3cret' }, 'user and password');
t.same(parseNatsUrl('tls://sb:p%40ss%3Aword@nats.internal:4222'), { server: 'tls://nats.internal:4222', user: 'sb', pass: 'p@ss:word' }, 'percent-encoded, as in any URL');
t.same(parseNatsUrl('nats://t0ken@nats.internal'), { server: 'nats://nats.internal', token: 't0ken' }, 'a token alone');
t.same(parseNatsUrl('sb:pw@127.0.0.1:4222'), { server: '127.0.0.1:4222', user: 'sb', pass: 'pw' }, 'no scheme');
