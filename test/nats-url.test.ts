/**
 * NATS_URL's credentials: nats.js v3 ignores a URL's user info, so `parseNatsUrl` splits it into the options
 * it reads, and keeps it out of the server address that logs and error messages show. A URL that does not name
 * its host cleanly (an unencoded '@' in the password) is refused when the config loads, exit 1.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { parseNatsUrl } from '../actors/transport/mod.js';
import { loadConfig } from '../platform/config.js';
import { MAIN } from './helpers/platform.js';

t.same(parseNatsUrl('nats://127.0.0.1:4222'), { server: 'nats://127.0.0.1:4222' }, 'no credentials');
t.same(parseNatsUrl('127.0.0.1:4222'), { server: '127.0.0.1:4222' }, 'no scheme, as nats.js accepts');
t.same(parseNatsUrl('nats://sb:s3cret@nats.internal:4222'), { server: 'nats://nats.internal:4222', user: 'sb', pass: 's3cret' }, 'user and password');
t.same(parseNatsUrl('tls://sb:p%40ss%3Aword@nats.internal:4222'), { server: 'tls://nats.internal:4222', user: 'sb', pass: 'p@ss:word' }, 'percent-encoded, as in any URL');
t.same(parseNatsUrl('nats://t0ken@nats.internal'), { server: 'nats://nats.internal', token: 't0ken' }, 'a token alone');
t.same(parseNatsUrl('sb:pw@127.0.0.1:4222'), { server: '127.0.0.1:4222', user: 'sb', pass: 'pw' }, 'no scheme');

// A comma-separated list of servers (as the Go client and the `nats` command line take it): each server without
// its credentials, nats.js given the list.
t.same(parseNatsUrl('nats://a.internal:4222,nats://b.internal:4222'), { server: 'nats://a.internal:4222,nats://b.internal:4222' }, 'a list of servers');
t.same(parseNatsUrl('nats://sb:pw@a.internal:4222, nats://sb:pw@b.internal:4222'), { server: 'nats://a.internal:4222,nats://b.internal:4222', user: 'sb', pass: 'pw' }, 'a list, each with the credentials');
t.same(parseNatsUrl('nats://sb:pw@a.internal:4222,nats://b.internal:4222'), { server: 'nats://a.internal:4222,nats://b.internal:4222', user: 'sb', pass: 'pw' }, 'a list, the credentials on one');
t.same(parseNatsUrl('nats://[::1]:4222'), { server: 'nats://[::1]:4222' }, 'an IPv6 address');

// URLs that do not name one host cleanly are refused, saying to percent-encode, never showing the password.
const refused: Array<[string, string, RegExp]> = [
  ['nats://user:p@Zq9@127.0.0.1:4222', 'an unencoded @ in the password', /more than one '@'/],
  ['nats://user:pa/Zq9@127.0.0.1:4222', 'an unencoded / in the password', /'\/', '\?' or '#'/],
  ['nats://user:pa,Zq9@127.0.0.1:4222', 'an unencoded , in the password', /does not name one host and port \(server 1 of 2\)/],
  ['nats://user:Zq9%zz@127.0.0.1:4222', 'a bad percent-encoding', /not percent-encoded correctly/],
  ['nats://127.0.0.1:4222:5', 'two ports', /does not name one host and port/],
  ['nats://127.0.0.1:4222,', 'an empty server in the list', /empty server/],
  ['nats://a:Zq91@h1:4222,nats://a:Zq92@h2:4222', 'different credentials per server', /different credentials/],
];
for (const [url, what, reason] of refused) {
  t.throws(() => parseNatsUrl(url), { name: 'NatsUrlError', message: reason }, what);
  t.throws(() => parseNatsUrl(url), { message: /percent-encode any '@', ':', '\/' or ','/ }, `${what}: says to percent-encode`);
  try {
    parseNatsUrl(url);
  } catch (err) {
    t.notMatch((err as Error).message, /Zq9/, `${what}: the password is not shown`);
  }
}

t.test('config loading refuses such a NATS_URL, as any invalid setting, without showing the password', async (t) => {
  t.throws(() => loadConfig({ NATS_URL: 'nats://user:p@ss@127.0.0.1:4222' }), { message: /^invalid configuration: NATS_URL: NATS_URL has more than one '@'/ });
  try {
    loadConfig({ NATS_URL: 'nats://user:p@ss@127.0.0.1:4222' });
  } catch (err) {
    t.notMatch((err as Error).message, /p@ss|@ss/, 'the password is not shown');
  }
  t.equal(loadConfig({ NATS_URL: 'nats://user:p%40ss@127.0.0.1:4222' }).natsUrl, 'nats://user:p%40ss@127.0.0.1:4222', 'percent-encoded, it is taken');
  t.equal(loadConfig({ NATS_URL: 'nats://a:4222,nats://b:4222' }).natsUrl, 'nats://a:4222,nats://b:4222', 'a list is taken');
});

t.test('the process exits 1 at start with that message', async (t) => {
  const r = spawnSync(process.execPath, [MAIN, 'worker'], { env: { ...process.env, NATS_URL: 'nats://user:p@ss@127.0.0.1:4222', DATA_DIR: '/nonexistent-sb-nats-url' }, encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: Error: invalid configuration: NATS_URL: NATS_URL has more than one '@'.*percent-encode/);
  t.notMatch(r.stderr + r.stdout, /@ss/, 'the password is not shown');
});
