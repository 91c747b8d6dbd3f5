/**
 * The error catalogs and their reference page, `docs/errors.md`, list the same codes with the same status and
 * message; and the REST catalogs raise what they list, in the families' shapes.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EDGE, PlatformError, REST_CATALOGS } from '../platform/errors.js';
import { EVENT_ERROR_CODES, EVENT_ERRORS, HTTP_ERRORS } from '../gateway/socket/errors.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface Row {
  status: string;
  message: string;
}

/** Every catalog entry: code → status (`—` for socket events) and message. */
function catalogRows(): Map<string, Row>[] {
  const rest = new Map<string, Row>();
  for (const family of Object.values(REST_CATALOGS)) {
    for (const e of Object.values(family)) rest.set(e.code, { status: String(e.status), message: e.message });
  }
  const http = new Map<string, Row>();
  for (const e of Object.values(HTTP_ERRORS)) http.set(e.code, { status: String(e.status), message: e.message });
  const events = new Map<string, Row>();
  for (const [key, code] of Object.entries(EVENT_ERROR_CODES) as [keyof typeof EVENT_ERRORS, string][]) {
    const m = EVENT_ERRORS[key];
    events.set(code, { status: '—', message: typeof m === 'function' ? m('%s') : m });
  }
  return [rest, http, events];
}

/** The page's table rows whose first cell is a code: code → status and message (backticks removed). */
function documentedRows(): Map<string, Row>[] {
  const rows: Map<string, Row>[] = [];
  const unwrap = (cell: string) => cell.trim().replace(/^`(.*)`$/, '$1');
  for (const line of readFileSync(join(root, 'docs', 'errors.md'), 'utf8').split('\n')) {
    const m = /^\| `([A-Z][A-Z0-9_]*)` \|(.*)\|\s*$/.exec(line);
    if (!m) continue;
    const cells = m[2].split(' | ');
    rows.push(new Map([[m[1], { status: unwrap(cells[0]), message: unwrap(cells[1]) }]]));
  }
  return rows;
}

t.test('every code of the catalogs is on docs/errors.md, with its status and message, and nothing else is', async (t) => {
  const catalog = new Map<string, Row>();
  let total = 0;
  for (const rows of catalogRows()) {
    for (const [code, row] of rows) {
      total++;
      catalog.set(code, row);
    }
  }
  t.equal(catalog.size, total, 'codes are unique across families');

  const documented = new Map<string, Row>();
  const repeated: string[] = [];
  for (const rows of documentedRows()) {
    for (const [code, row] of rows) {
      if (documented.has(code)) repeated.push(code);
      documented.set(code, row);
    }
  }
  t.same(repeated, [], 'each code is listed once');
  t.same([...catalog.keys()].filter((c) => !documented.has(c)), [], 'codes missing from docs/errors.md');
  t.same([...documented.keys()].filter((c) => !catalog.has(c)), [], 'codes on docs/errors.md that no catalog has');
  const differing = [...catalog].filter(([code, row]) => documented.has(code) && JSON.stringify(documented.get(code)) !== JSON.stringify(row));
  t.same(differing.map(([code, row]) => ({ code, catalog: row, docs: documented.get(code) })), [], 'status and message as in the catalog');
  t.ok(total > 100, `${total} codes`);
});

t.test('REST catalog entries raise PlatformErrors with their code, status, message and field error', async (t) => {
  const { AGENTS, CONVERSATIONS } = REST_CATALOGS;
  const e = CONVERSATIONS.PARAM_NOT_INTEGER('limit', 1, 1000);
  t.ok(e instanceof PlatformError);
  t.equal(e.code, 'CONVERSATIONS_PARAM_NOT_INTEGER');
  t.equal(e.statusCode, 400);
  t.equal(e.message, 'limit must be an integer from 1 to 1000');
  t.same(e.errors, [{ field: 'limit', message: 'limit must be an integer from 1 to 1000' }]);

  const named = AGENTS.ATTRIBUTE_UNKNOWN('tone');
  t.same(named.errors, [{ field: 'attributeValues.values.tone', message: 'unknown attribute "tone" on this branch' }]);
  t.same(AGENTS.NAME_EXISTS('faq').errors, [{ field: 'name', message: 'name already exists on this branch' }], 'detail is the field message');
  t.same(CONVERSATIONS.SLICE_RESERVED('language').errors, [], 'no field, no field errors');
  const conflicts = [{ field: 'topics.a', message: 'changed on both sides' }];
  t.same(AGENTS.BRANCH_DIVERGED.withErrors(conflicts).errors, conflicts);
  const malformed = EDGE.MALFORMED_PARAMS.withErrors([{ field: 'agentId', message: 'too long' }], 'agentId');
  t.equal(malformed.message, 'malformed agentId');
  t.equal(malformed.statusCode, 422);
});
