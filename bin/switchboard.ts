#!/usr/bin/env node
/**
 * The operator's command-line client for the admin API (operator.md). Prints JSON responses on stdout.
 * Run `npx switchboard help` for the commands.
 */
import { parseArgs } from 'node:util';
import { urlHost } from '../platform/url-host.js';

const USAGE = `usage: switchboard [--url URL] [--token TOKEN] <command>

  accounts create --name NAME [--slug SLUG]
  accounts list
  keys create --account ACCOUNT --scope agents|alerts|conversations|chat|external_events|live_agent
              [--project PROJECT] [--permissions conversations_data,pii]
  keys list [--account ACCOUNT]
  keys revoke KEY_ID
  connectors create --account ACCOUNT --project PROJECT --kind chat|messaging|outbound
              [--environment live|pre-release|sandbox] [--variant VARIANT_ID] [--host HOST]
              [--telephony-connector TC_ID --from-number E164]   (outbound: the SIP trunk and caller id)
  connectors list [--account ACCOUNT]
  connectors delete CONNECTOR_ID
  settings get PROJECT
  settings set PROJECT [--show-transcripts true|false] [--chunked-streaming true|false] [--pii-redaction true|false]
                       [--recording-retention-days N|default]
  runtime show                      workers, their shards and live actors
  runtime cache                     this edge process's tenancy cache
  runtime actor KIND ID             an actor's stored snapshot
  webhooks create --name NAME --webhook-url URL [--events alerts.triggered,alerts.resolved]
              [--header 'Name: value']... [--timeout-ms MS] [--enabled true|false]
  webhooks list [--enabled true|false]
  webhooks get ENDPOINT_ID
  webhooks update ENDPOINT_ID [--name NAME] [--webhook-url URL] [--events ...] [--header ...]... [--timeout-ms MS] [--enabled true|false]
  webhooks delete ENDPOINT_ID
  webhooks rotate-secret ENDPOINT_ID  a new signing secret, shown once
  webhooks test ENDPOINT_ID         send a webhook.test event
  deliveries list ENDPOINT_ID [--limit N] [--cursor CURSOR] [--event EVENT_ID]
  deliveries get ENDPOINT_ID DELIVERY_ID
  deliveries redeliver ENDPOINT_ID DELIVERY_ID
  runtime projections               projections: checkpoints, journal head, lag
  rebuild MODEL                     rebuilds a projection (read model) from the journal
  charts --out DIR                  writes the statechart of every machine (DIR/<kind>.svg), no server needed
  alerts rules create --name NAME --metric METRIC --operator '>'|'<'|'>='|'<=' --threshold N --window 5m|10m|60m
              [--project PROJECT_ID] [--enabled true|false]
  alerts rules list [--enabled true|false] [--metric METRIC] [--project PROJECT_ID] [--state ok|alert|no_data|unknown]
  alerts rules get RULE_ID
  alerts rules update RULE_ID [--name NAME] [--metric ...] [--operator ...] [--threshold N] [--window ...] [--project ID|null] [--enabled true|false]
  alerts rules delete RULE_ID
  alerts active [--project PROJECT_ID] [--metric METRIC]   the rules now firing
  help                              this text

Key scopes: agents (Agents API), alerts (Alerts API), conversations (Conversations and Concurrency APIs),
chat (Chat API), external_events (External Events API and bridge-ended), live_agent (the live-agent desk
of the Messaging API); conversations, chat and external_events keys need --project.

--url defaults to $SWITCHBOARD_URL, else http://$HOST:$EDGE_PORT (127.0.0.1:8080);
--token defaults to $OPERATOR_TOKEN.
webhooks, deliveries and alerts use the Alerts API with an alerts key: --key, else $SWITCHBOARD_ALERTS_KEY.`;

/** `apiKey`: sent as `x-api-key` (the Alerts API) instead of the operator token. */
type Request = { method: string; path: string; body?: unknown; apiKey?: boolean };

/** Turns command-line arguments into one admin API request; throws a usage message when they do not fit. */
function toRequest(argv: string[]): { request: Request; url?: string; token?: string; key?: string } {
  const { values: v, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      name: { type: 'string' },
      slug: { type: 'string' },
      account: { type: 'string' },
      scope: { type: 'string' },
      project: { type: 'string' },
      permissions: { type: 'string' },
      kind: { type: 'string' },
      environment: { type: 'string' },
      variant: { type: 'string' },
      host: { type: 'string' },
      'telephony-connector': { type: 'string' },
      'from-number': { type: 'string' },
      'show-transcripts': { type: 'string' },
      'chunked-streaming': { type: 'string' },
      'pii-redaction': { type: 'string' },
      'recording-retention-days': { type: 'string' },
      key: { type: 'string' },
      'webhook-url': { type: 'string' },
      events: { type: 'string' },
      header: { type: 'string', multiple: true },
      'timeout-ms': { type: 'string' },
      enabled: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      event: { type: 'string' },
      metric: { type: 'string' },
      operator: { type: 'string' },
      threshold: { type: 'string' },
      window: { type: 'string' },
      state: { type: 'string' },
    },
  });
  const [noun, verb, target, extra] = positionals;
  const need = (value: string | undefined, flag: string): string => {
    if (!value) throw new Error(`missing ${flag}\n\n${USAGE}`);
    return value;
  };
  const bool = (value: string | undefined, flag: string): boolean | undefined => {
    if (value === undefined) return undefined;
    if (value !== 'true' && value !== 'false') throw new Error(`${flag} takes true or false`);
    return value === 'true';
  };
  // A project's own recording retention in whole days, or `default` (null: the deployment's RECORDING_RETENTION_DAYS).
  const days = (value: string | undefined): number | null | undefined => {
    if (value === undefined) return undefined;
    if (value === 'default') return null;
    if (!/^\d{1,5}$/.test(value)) throw new Error('--recording-retention-days takes a whole number of days (0 to 36500) or default');
    return Number(value);
  };
  const WEBHOOKS = '/v1/webhook-endpoints';
  const endpoint = (id: string) => `${WEBHOOKS}/${encodeURIComponent(id)}`;
  // The optional endpoint fields of create and update, from their flags.
  const endpointFields = (o: typeof v) =>
    Object.assign(
      {},
      o.events ? { event_types: o.events.split(',').map((e) => e.trim()).filter(Boolean) } : {},
      o.header ? { headers: Object.fromEntries(o.header.map((h) => { const i = h.indexOf(':'); if (i < 1) throw new Error(`--header takes 'Name: value'`); return [h.slice(0, i).trim(), h.slice(i + 1).trim()]; })) } : {},
      o['timeout-ms'] ? { timeout_ms: Number(o['timeout-ms']) } : {},
      o.enabled !== undefined ? { enabled: bool(o.enabled, '--enabled') } : {},
    );
  if (noun === 'rebuild') {
    const model = need(verb, 'MODEL');
    return { request: { method: 'POST', path: `/admin/v1/runtime/projections/${encodeURIComponent(model)}/rebuild` }, url: v.url, token: v.token };
  }
  const query = (account: string | undefined) => (account ? `?account_id=${encodeURIComponent(account)}` : '');
  const request = ((): Request => {
    switch (`${noun ?? ''} ${verb ?? ''}`) {
      case 'accounts create':
        return { method: 'POST', path: '/admin/v1/accounts', body: { name: need(v.name, '--name'), ...(v.slug ? { slug: v.slug } : {}) } };
      case 'accounts list':
        return { method: 'GET', path: '/admin/v1/accounts' };
      case 'keys create':
        return {
          method: 'POST',
          path: '/admin/v1/keys',
          body: {
            account_id: need(v.account, '--account'),
            scope: need(v.scope, '--scope'),
            ...(v.project ? { project_id: v.project } : {}),
            permissions: v.permissions ? v.permissions.split(',').map((p) => p.trim()).filter(Boolean) : [],
          },
        };
      case 'keys list':
        return { method: 'GET', path: `/admin/v1/keys${query(v.account)}` };
      case 'keys revoke':
        return { method: 'DELETE', path: `/admin/v1/keys/${encodeURIComponent(need(target, 'KEY_ID'))}` };
      case 'connectors create':
        return {
          method: 'POST',
          path: '/admin/v1/connectors',
          body: {
            account_id: need(v.account, '--account'),
            project_id: need(v.project, '--project'),
            kind: need(v.kind, '--kind'),
            ...(v.environment ? { environment: v.environment } : {}),
            ...(v.variant ? { variant_id: v.variant } : {}),
            ...(v.host ? { host: v.host } : {}),
            ...(v['telephony-connector'] ? { telephony_connector_id: v['telephony-connector'] } : {}),
            ...(v['from-number'] ? { from_number: v['from-number'] } : {}),
          },
        };
      case 'connectors list':
        return { method: 'GET', path: `/admin/v1/connectors${query(v.account)}` };
      case 'connectors delete':
        return { method: 'DELETE', path: `/admin/v1/connectors/${encodeURIComponent(need(target, 'CONNECTOR_ID'))}` };
      case 'settings get':
        return { method: 'GET', path: `/admin/v1/projects/${encodeURIComponent(need(target, 'PROJECT'))}/settings` };
      case 'settings set': {
        const body = Object.fromEntries(
          Object.entries({
            show_transcripts: bool(v['show-transcripts'], '--show-transcripts'),
            chunked_streaming: bool(v['chunked-streaming'], '--chunked-streaming'),
            pii_redaction: bool(v['pii-redaction'], '--pii-redaction'),
            recording_retention_days: days(v['recording-retention-days']),
          }).filter(([, x]) => x !== undefined),
        );
        return { method: 'PATCH', path: `/admin/v1/projects/${encodeURIComponent(need(target, 'PROJECT'))}/settings`, body };
      }
      case 'runtime show':
        return { method: 'GET', path: '/admin/v1/runtime' };
      case 'runtime cache':
        return { method: 'GET', path: '/admin/v1/runtime/tenancy-cache' };
      case 'runtime projections':
        return { method: 'GET', path: '/admin/v1/runtime/projections' };
      case 'runtime actor':
        return { method: 'GET', path: `/admin/v1/runtime/actors/${encodeURIComponent(need(target, 'KIND'))}/${encodeURIComponent(need(extra, 'ID'))}` };
      case 'webhooks create':
        return { method: 'POST', path: WEBHOOKS, apiKey: true, body: { name: need(v.name, '--name'), url: need(v['webhook-url'], '--webhook-url'), event_types: ['alerts.triggered', 'alerts.resolved'], ...endpointFields(v) } };
      case 'webhooks list':
        return { method: 'GET', path: `${WEBHOOKS}${v.enabled ? `?enabled=${bool(v.enabled, '--enabled')}` : ''}`, apiKey: true };
      case 'webhooks get':
        return { method: 'GET', path: endpoint(need(target, 'ENDPOINT_ID')), apiKey: true };
      case 'webhooks update':
        return { method: 'PATCH', path: endpoint(need(target, 'ENDPOINT_ID')), apiKey: true, body: Object.assign({}, v.name ? { name: v.name } : {}, v['webhook-url'] ? { url: v['webhook-url'] } : {}, endpointFields(v)) };
      case 'webhooks delete':
        return { method: 'DELETE', path: endpoint(need(target, 'ENDPOINT_ID')), apiKey: true };
      case 'webhooks rotate-secret':
        return { method: 'POST', path: `${endpoint(need(target, 'ENDPOINT_ID'))}/rotate-secret`, apiKey: true };
      case 'webhooks test':
        return { method: 'POST', path: `${endpoint(need(target, 'ENDPOINT_ID'))}/test`, apiKey: true };
      case 'deliveries list': {
        const q = new URLSearchParams(Object.entries({ limit: v.limit, cursor: v.cursor, event_id: v.event }).filter((e): e is [string, string] => e[1] !== undefined));
        return { method: 'GET', path: `${endpoint(need(target, 'ENDPOINT_ID'))}/deliveries${q.size ? `?${q}` : ''}`, apiKey: true };
      }
      case 'deliveries get':
        return { method: 'GET', path: `${endpoint(need(target, 'ENDPOINT_ID'))}/deliveries/${encodeURIComponent(need(extra, 'DELIVERY_ID'))}`, apiKey: true };
      case 'deliveries redeliver':
        return { method: 'POST', path: `${endpoint(need(target, 'ENDPOINT_ID'))}/deliveries/${encodeURIComponent(need(extra, 'DELIVERY_ID'))}/redeliver`, apiKey: true };
      case 'alerts rules':
      case 'alerts active':
        return alertsRequest(verb, target, extra);
      default:
        throw new Error(USAGE);
    }
  })();
  return { request, url: v.url, token: v.token, key: v.key };

  /** `alerts rules ...` and `alerts active`: the Alerts API's rules with an alerts key. */
  function alertsRequest(what: string, op: string | undefined, id: string | undefined): Request {
    const RULES = '/v1/alert-rules';
    const rule = () => `${RULES}/${encodeURIComponent(need(id, 'RULE_ID'))}`;
    const q = (o: Record<string, string | undefined>) => {
      const p = new URLSearchParams(Object.entries(o).filter((e): e is [string, string] => e[1] !== undefined));
      return p.size ? `?${p}` : '';
    };
    // Numbers stay numbers only when they are numbers: anything else is sent as given, for the API to refuse.
    const num = (x: string) => (/^-?\d+(\.\d+)?$/.test(x) ? Number(x) : x);
    const fields = () =>
      Object.assign(
        {},
        v.name !== undefined ? { name: v.name } : {},
        v.metric !== undefined ? { metric: v.metric } : {},
        v.operator !== undefined ? { operator: v.operator } : {},
        v.threshold !== undefined ? { threshold_value: num(v.threshold) } : {},
        v.window !== undefined ? { window_duration: v.window } : {},
        v.project !== undefined ? { project_id: v.project === 'null' ? null : v.project } : {},
        v.enabled !== undefined ? { enabled: bool(v.enabled, '--enabled') } : {},
      );
    if (what === 'active') return { method: 'GET', path: `/v1/alerts${q({ project_id: v.project, metric: v.metric })}`, apiKey: true };
    switch (op) {
      case 'create':
        need(v.name, '--name'); need(v.metric, '--metric'); need(v.operator, '--operator'); need(v.threshold, '--threshold'); need(v.window, '--window');
        return { method: 'POST', path: RULES, apiKey: true, body: fields() };
      case 'list':
        return { method: 'GET', path: `${RULES}${q({ enabled: v.enabled, metric: v.metric, project_id: v.project, state: v.state })}`, apiKey: true };
      case 'get':
        return { method: 'GET', path: rule(), apiKey: true };
      case 'update':
        return { method: 'PATCH', path: rule(), apiKey: true, body: fields() };
      case 'delete':
        return { method: 'DELETE', path: rule(), apiKey: true };
      default:
        throw new Error(USAGE);
    }
  }
}

/**
 * `switchboard charts --out DIR`: renders the statechart of every machine of `machines/catalog.ts` to
 * `DIR/<kind>.svg` from the definitions, locally (the same SVG as `/admin/v1/inspector/machines/<kind>.svg`).
 */
async function charts(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { out: { type: 'string' } } });
  if (!values.out) {
    process.stderr.write(`missing --out\n\n${USAGE}\n`);
    return 2;
  }
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { renderAll } = await import('../gateway/edge/inspector/charts.js');
  mkdirSync(values.out, { recursive: true });
  for (const [kind, svg] of await renderAll()) {
    const file = join(values.out, `${kind}.svg`);
    writeFileSync(file, svg);
    process.stdout.write(`${file}\n`);
  }
  return 0;
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || ['help', '--help', '-h'].includes(argv[0])) {
    process.stdout.write(`${USAGE}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  if (argv[0] === 'charts') return charts(argv.slice(1));
  let parsed;
  try {
    parsed = toRequest(argv);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  const base = parsed.url ?? process.env.SWITCHBOARD_URL ?? `http://${urlHost(process.env.HOST || '127.0.0.1')}:${process.env.EDGE_PORT || '8080'}`;
  const { request } = parsed;
  const token = parsed.token ?? process.env.OPERATOR_TOKEN;
  const key = parsed.key ?? process.env.SWITCHBOARD_ALERTS_KEY;
  if (request.apiKey ? !key : !token) {
    process.stderr.write(request.apiKey ? 'no alerts key: pass --key or set SWITCHBOARD_ALERTS_KEY\n' : 'no operator token: pass --token or set OPERATOR_TOKEN\n');
    return 2;
  }
  const res = await fetch(new URL(request.path, base), {
    method: request.method,
    headers: Object.assign<Record<string, string>, Record<string, string>>(request.apiKey ? { 'x-api-key': key! } : { authorization: `Bearer ${token}` }, request.body ? { 'content-type': 'application/json' } : {}),
    body: request.body ? JSON.stringify(request.body) : undefined,
  });
  const text = await res.text();
  const out = text ? JSON.stringify(JSON.parse(text), null, 2) : JSON.stringify({ status: res.status });
  (res.ok ? process.stdout : process.stderr).write(`${out}\n`);
  return res.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`switchboard: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
