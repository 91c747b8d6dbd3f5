import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { demoPage, escapeHtml, WEB_DIR, WIDGET_BUDGET_BYTES } from '../gateway/socket/web.js';
import { DIST } from './helpers/platform.js';

t.test('the widget (widget.js and widget.css, unminified) stays within its size budget', async (t) => {
  const size = statSync(join(WEB_DIR, 'widget.js')).size + statSync(join(WEB_DIR, 'widget.css')).size;
  t.ok(size <= WIDGET_BUDGET_BYTES, `widget is ${size} bytes; budget ${WIDGET_BUDGET_BYTES}`);
  t.equal(WIDGET_BUDGET_BYTES, 20 * 1024);
  const doc = readFileSync(join(DIST, '..', 'docs', 'webchat.md'), 'utf8');
  t.match(doc, /20 KB/, 'docs/webchat.md states the budget');
});

t.test('the build ships the files the server reads, identical to the sources', async (t) => {
  for (const f of ['widget.js', 'widget.css', 'desk.html', 'desk.js']) {
    t.equal(readFileSync(join(WEB_DIR, f), 'utf8'), readFileSync(join(DIST, '..', 'gateway', 'socket', 'web', f), 'utf8'), f);
  }
});

t.test('the demo page escapes what the query string brings', async (t) => {
  const page = demoPage(new URLSearchParams({ token: '"><script>alert(1)</script>', host: 'a"b' }).toString());
  t.notMatch(page, /<script>alert/);
  t.match(page, 'data-token="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"');
  t.match(page, 'data-host="a&quot;b"');
  t.notMatch(demoPage(''), /src="\/widget.js"/, 'no token, no widget: the page says what to add');
  t.equal(escapeHtml(`<&>"'`), '&lt;&amp;&gt;&quot;&#39;');
});
