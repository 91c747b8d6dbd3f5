import type { HttpRequest, HttpResponse, TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { withoutBody } from './http.js';

/** Where the browser files are: `gateway/socket/web/`, copied next to this module by `npm run build`. */
export const WEB_DIR = join(dirname(fileURLToPath(import.meta.url)), 'web');

/** The widget's size budget (widget.js and widget.css together, unminified), stated in docs/webchat.md. */
export const WIDGET_BUDGET_BYTES = 20 * 1024;

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  html: 'text/html; charset=utf-8',
};

/** HTML-escapes a value for an attribute or text. */
export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The demo page: the widget embedded with the connector token and host of the query string. */
export function demoPage(query: string): string {
  const q = new URLSearchParams(query);
  const token = q.get('token') ?? '';
  const host = q.get('host') ?? '';
  const streaming = q.get('streaming') === 'true' || q.get('streaming') === '1';
  const intro = token
    ? '<p>The chat bubble in the corner is the widget. Open it with the mouse or with Tab and Enter.</p>'
    : '<p><strong>Add <code>?token=&lt;connector token&gt;&amp;host=&lt;registered host&gt;</code> to this address</strong> (a <code>messaging</code> connector; <code>&amp;streaming=true</code> for streamed replies).</p>';
  const tag = token
    ? `<script src="/widget.js" data-token="${escapeHtml(token)}" data-host="${escapeHtml(host)}" data-streaming="${streaming}"></script>`
    : '';
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Switchboard webchat demo</title><link rel="icon" href="data:,">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:720px;margin:40px auto;padding:0 16px;color:#1d2330}code{background:#eef1f6;padding:1px 4px;border-radius:4px}pre{white-space:pre-wrap;word-break:break-all}</style>
</head>
<body>
<main>
<h1>Switchboard webchat demo</h1>
${intro}
<p>On your own site the widget is one tag:</p>
<pre><code>${escapeHtml(`<script src="${'http://HOST:SOCKET_PORT'}/widget.js" data-token="<connector token>" data-host="<registered host>"></script>`)}</code></pre>
<p>Live agents answer handed-off conversations on <a href="/desk">the desk</a>.</p>
</main>
${tag}
</body>
</html>
`;
}

/**
 * The browser side of the Messaging API on the socket port: `GET /widget.js` and `/widget.css` (the embeddable
 * webchat widget), `GET /demo?token=&host=[&streaming=true]` (a page embedding it) and `GET /desk` with
 * `/desk.js` (the live-agent desk page, a client of `/api/v1/desk`). The files are read once, at start.
 */
export function mountWeb(app: TemplatedApp): void {
  const file = (name: string) => readFileSync(join(WEB_DIR, name), 'utf8');
  const serve = (res: HttpResponse, type: string, body: string, cors: boolean, head: boolean) => {
    res.cork(() => {
      res.writeStatus('200 OK').writeHeader('content-type', TYPES[type]).writeHeader('cache-control', 'no-cache');
      res.writeHeader('x-content-type-options', 'nosniff');
      // The widget's files load from any customer site.
      if (cors) res.writeHeader('access-control-allow-origin', '*');
      if (type === 'html') res.writeHeader('referrer-policy', 'no-referrer');
      if (head) withoutBody(res, body);
      else res.end(body);
    });
  };
  /** GET and HEAD of a page (uWebSockets.js routes HEAD apart from GET; a HEAD answers the GET's headers). */
  const page = (path: string, type: string, body: (req: HttpRequest) => string, cors = false) => {
    app.get(path, (res, req) => serve(res, type, body(req), cors, false));
    app.head(path, (res, req) => serve(res, type, body(req), cors, true));
  };
  const widgetJs = file('widget.js');
  const widgetCss = file('widget.css');
  const deskHtml = file('desk.html');
  const deskJs = file('desk.js');
  page('/widget.js', 'js', () => widgetJs, true);
  page('/widget.css', 'css', () => widgetCss, true);
  page('/demo', 'html', (req) => demoPage(req.getQuery() ?? ''));
  page('/desk', 'html', () => deskHtml);
  page('/desk.js', 'js', () => deskJs);
}
