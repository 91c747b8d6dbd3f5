/**
 * The region in the host name (contract, Conventions): a deployment serving `REGION=uk-1` refuses a request
 * whose Host names another region (421, in each family's error shape) on both ports, serves one that names its
 * own or none (a self-hosted deployment is reached by whatever address its operator gives it), and answers its
 * health checks whatever the name.
 */
import { request } from 'node:http';
import t from 'tap';
import { regionOfHost } from '../platform/region.js';
import { messagingProject, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

/** One request with the given Host (fetch may not set it): status and parsed body. */
function call(base: string, method: string, path: string, host: string, headers: Record<string, string> = {}, body?: unknown): Promise<{ status: number; body: any }> {
  const url = new URL(path, base);
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, method, path: url.pathname + url.search, headers: { host, ...(data ? { 'content-type': 'application/json' } : {}), ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text && /json/.test(res.headers['content-type'] ?? '') ? JSON.parse(text) : text || null }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

t.test('the region a Host names', async (t) => {
  const cases: Array<[string | undefined, string | null]> = [
    ['api.uk-1.example.com', 'uk-1'],
    ['chat.EUW-1.example.com:8443', 'euw-1'],
    ['us-1.example', 'us-1'],
    ['127.0.0.1:8080', null],
    ['localhost', null],
    ['[::1]:8081', null],
    ['api.us-10.example.com', null],
    ['aus-1.example.com', null],
    ['api.example.com', null],
    ['', null],
    [undefined, null],
  ];
  for (const [host, region] of cases) t.equal(regionOfHost(host), region, String(host));
});

t.test('a deployment serving uk-1', async (t) => {
  const p: Platform = await platformFor(t, { env: { REGION: 'uk-1' } });
  const m: MessagingProject = await messagingProject(p);
  const other = 'api.us-1.example.com';
  const own = 'api.uk-1.example.com';
  const message = 'this address names region us-1; this deployment serves uk-1';

  const chatBody = {};
  const chatPath = `/v1/${m.accountId}/${m.agentId}/chat/create`;
  const chatHeaders = { 'x-api-key': m.chatKey, 'x-token': m.token };
  const refused = await call(p.edge, 'POST', chatPath, other, chatHeaders, chatBody);
  t.same(refused, { status: 421, body: { error_message: message } }, 'Chat API: 421 in its shape');
  t.equal((await call(p.edge, 'POST', chatPath, own, chatHeaders, chatBody)).status, 200, 'its own region');
  t.equal((await call(p.edge, 'POST', chatPath, new URL(p.edge).host, chatHeaders, chatBody)).status, 200, 'an address without a region');

  const agents = await call(p.edge, 'GET', '/v1/agents', other, { 'x-api-key': 'sbk_anything' });
  t.same(agents, { status: 421, body: { message, errors: [{ field: 'host', message }] } }, 'Agents API: before the key, in its shape');
  t.same(await call(p.edge, 'GET', '/healthz', other), { status: 200, body: { status: 'ok' } }, 'health answers whatever the name');
  t.equal((await call(p.edge, 'GET', '/healthz?probe=1', other)).status, 200, 'with a query too');
  t.equal((await call(p.edge, 'GET', '/metrics', other)).status, 200, 'metrics answer whatever the name');
  // The exemption is the probes' routes, not every path that starts with their names.
  for (const path of ['/healthzX', '/healthz/extra', '/metricsfoo', '/metrics/x']) {
    t.equal((await call(p.edge, 'GET', path, other)).status, 421, `${path} is refused like any other path`);
  }

  const tokenHeaders = { 'x-token': m.connectorToken, 'x-host': m.host };
  const misdirected = await call(p.socket, 'POST', '/api/v1/access-token', 'chat.us-1.example.com', tokenHeaders, {});
  t.equal(misdirected.status, 421, 'Messaging API, the token step');
  t.match(misdirected.body, { success: false, error: 'this address names a region this deployment does not serve', error_code: 'REGION_MISMATCH' });
  t.equal((await call(p.socket, 'POST', '/api/v1/access-token', 'chat.uk-1.example.com', tokenHeaders, {})).status, 200, 'its own region');
  const { sessionId, accessToken } = await m.session();
  const ws = `/ws?session_id=${sessionId}&access_token=${accessToken}`;
  t.equal((await call(p.socket, 'GET', ws, 'chat.us-1.example.com')).status, 421, 'the socket path, before its upgrade');
  t.equal((await call(p.socket, 'GET', ws, 'chat.uk-1.example.com')).status, 400, 'its own region: told to upgrade');
  t.equal((await call(p.socket, 'GET', '/healthz', 'chat.us-1.example.com')).status, 200);
});
