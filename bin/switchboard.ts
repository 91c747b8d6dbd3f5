#!/usr/bin/env node
/**
 * The operator's command-line client for the admin API (operator.md). Prints JSON responses on stdout.
 * Run `npx switchboard help` for the commands.
 */
import { parseArgs } from 'node:util';

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
  runtime show                      workers, their shards and live actors
  runtime cache                     this edge process's tenancy cache
  runtime actor KIND ID             an actor's stored snapshot
  runtime projections               projections: checkpoints, journal head, lag
  rebuild MODEL                     rebuilds a projection (read model) from the journal
  help                              this text

Key scopes: agents (Agents API), alerts (Alerts API), conversations (Conversations and Concurrency APIs),
chat (Chat API), external_events (External Events API and bridge-ended), live_agent (the live-agent desk
of the Messaging API); conversations, chat and external_events keys need --project.

--url defaults to $SWITCHBOARD_URL, else http://$HOST:$EDGE_PORT (127.0.0.1:8080);
--token defaults to $OPERATOR_TOKEN.`;

type Request = { method: string; path: string; body?: unknown };

/** Turns command-line arguments into one admin API request; throws a usage message when they do not fit. */
function toRequest(argv: string[]): { request: Request; url?: string; token?: string } {
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
      default:
        throw new Error(USAGE);
    }
  })();
  return { request, url: v.url, token: v.token };
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || ['help', '--help', '-h'].includes(argv[0])) {
    process.stdout.write(`${USAGE}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  let parsed;
  try {
    parsed = toRequest(argv);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  const base = parsed.url ?? process.env.SWITCHBOARD_URL ?? `http://${process.env.HOST || '127.0.0.1'}:${process.env.EDGE_PORT || '8080'}`;
  const token = parsed.token ?? process.env.OPERATOR_TOKEN;
  if (!token) {
    process.stderr.write('no operator token: pass --token or set OPERATOR_TOKEN\n');
    return 2;
  }
  const { request } = parsed;
  const res = await fetch(new URL(request.path, base), {
    method: request.method,
    headers: { authorization: `Bearer ${token}`, ...(request.body ? { 'content-type': 'application/json' } : {}) },
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
