import t from 'tap';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { http } from './helpers/http.js';
import { ARTIFACTS, chromiumMissing, launchChromium } from './helpers/browser.js';
import { messagingProject, type MessagingProject } from './helpers/messaging.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';

// The webchat widget, the demo page and the desk page in headless Chromium (Debian's) against a started
// platform. Without Chromium these skip locally; with CI=true chromiumMissing() throws, so they fail instead.
const missing = chromiumMissing();
if (missing) t.plan(0, missing);
else run();

function run() {
  let p: Platform;
  let m: MessagingProject;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  /** Console errors and uncaught page errors of every page, checked at the end. */
  const errors: string[] = [];

  t.before(async () => {
    p = await startPlatform({ env: { HANDOFF_QUEUE_STATUS_MS: '300' } });
    m = await messagingProject(p);
    browser = await launchChromium();
  });
  t.teardown(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await p.stop();
    removeDir(p.dataDir);
  });

  const page = async (): Promise<Page> => {
    const ctx = await browser.newContext({ viewport: { width: 1000, height: 720 } });
    contexts.push(ctx);
    const pg = await ctx.newPage();
    pg.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(`${pg.url()}: ${msg.text()}`);
    });
    pg.on('pageerror', (err) => errors.push(`${pg.url()}: ${err.message}`));
    pg.on('response', (r) => {
      if (r.status() >= 400) errors.push(`${r.url()}: ${r.status()}`);
    });
    pg.setDefaultTimeout(20_000);
    return pg;
  };
  const demo = (proj: MessagingProject, extra = '') => `${p.socket}/demo?token=${encodeURIComponent(proj.connectorToken)}&host=${proj.host}${extra}`;
  const shot = (pg: Page, name: string) => pg.screenshot({ path: join(ARTIFACTS, `webchat-${name}.png`) });
  /** The texts of the widget's messages, in order. */
  const texts = (pg: Page) => pg.$$eval('.sbw-log .sbw-msg', (els) => els.map((e) => `${e.className.replace(/ sbw-pending/, '')}: ${e.textContent}`));
  const says = (pg: Page, selector: string, text: string) => pg.locator(`.sbw-log ${selector}`, { hasText: text }).first().waitFor();

  let convo: Page;

  t.test('the routes: widget files, the demo page, the desk page', async (t) => {
    const js = await http(p.socket, 'GET', '/widget.js');
    t.equal(js.status, 200);
    t.match(js.headers.get('content-type') ?? '', /text\/javascript/);
    t.equal(js.headers.get('access-control-allow-origin'), '*');
    t.match((await http(p.socket, 'GET', '/widget.css')).headers.get('content-type') ?? '', /text\/css/);
    const d = await http(p.socket, 'GET', '/demo?token=abc&host=example.com');
    t.match(d.headers.get('content-type') ?? '', /text\/html/);
    t.match(d.text, 'data-token="abc" data-host="example.com"');
    t.match((await http(p.socket, 'GET', '/desk')).text, /Live-agent desk/);
    t.match((await http(p.socket, 'GET', '/desk.js')).headers.get('content-type') ?? '', /text\/javascript/);
  });

  t.test('keyboard only: the demo page holds a conversation, and the agent answers', async (t) => {
    convo = await page();
    await convo.goto(demo(m));
    // Tab to the bubble (after the page's own link), Enter opens the panel with the focus in the input.
    let focused = '';
    for (let i = 0; i < 10 && focused !== 'sbw-bubble'; i++) {
      await convo.keyboard.press('Tab');
      focused = await convo.evaluate(() => document.activeElement?.className ?? '');
    }
    t.equal(focused, 'sbw-bubble', 'the bubble is reachable with Tab');
    await convo.keyboard.press('Enter');
    t.equal(await convo.getAttribute('.sbw-bubble', 'aria-expanded'), 'true');
    t.equal(await convo.evaluate(() => document.activeElement?.id), 'sbw-input', 'the input has the focus');
    await says(convo, '.sbw-agent', 'Hello, welcome to Acme Dental!');
    t.equal(await convo.textContent('.sbw-head .sbw-who'), 'Front Desk', 'the agent name from SERVICE_AGENT_JOINED');
    t.equal(await convo.getAttribute('.sbw-log', 'aria-live'), 'polite', 'new messages are announced');
    await convo.keyboard.type('When are you open?');
    await convo.keyboard.press('Enter');
    await says(convo, '.sbw-agent', 'We are open from 9am to 5pm, Monday to Friday.');
    await convo.waitForSelector('.sbw-pending', { state: 'detached' });
    t.same(await texts(convo), [
      'sbw-msg sbw-agent: Hello, welcome to Acme Dental!',
      'sbw-msg sbw-user: When are you open?',
      'sbw-msg sbw-agent: We are open from 9am to 5pm, Monday to Friday.',
    ]);
    await shot(convo, 'conversation');
    // Escape closes the panel and gives the focus back to the bubble.
    await convo.keyboard.press('Escape');
    t.equal(await convo.isHidden('.sbw-panel'), true);
    t.equal(await convo.evaluate(() => document.activeElement?.className), 'sbw-bubble');
    await convo.keyboard.press('Enter');
    t.equal(await convo.isVisible('.sbw-panel'), true);
  });

  t.test('a reload restores the history without duplicates and the conversation goes on', async (t) => {
    const before = await texts(convo);
    const sessionBefore = await convo.evaluate(() => (window as any).__switchboardWidget.state().sessionId);
    await convo.reload();
    await convo.waitForSelector('.sbw[data-connected]');
    // The replay after the cursor has arrived; give late events a moment to (wrongly) show up twice.
    await convo.waitForTimeout(500);
    t.same(await texts(convo), before, 'the same messages, once each');
    t.equal(await convo.evaluate(() => (window as any).__switchboardWidget.state().sessionId), sessionBefore, 'the same session');
    t.equal(await convo.isVisible('.sbw-panel'), true, 'the panel stays open');
    await convo.fill('#sbw-input', 'Thanks');
    await convo.press('#sbw-input', 'Enter');
    await convo.waitForFunction((n) => document.querySelectorAll('.sbw-log .sbw-msg.sbw-agent').length > n, before.filter((x) => x.includes('sbw-agent:')).length);
    const after = await texts(convo);
    t.equal(after.length, before.length + 2, 'one more turn');
    t.equal(new Set(after.slice(0, -2)).size >= 2, true);
    // A session dropped from storage's point of view (a second reload) still shows each message once.
    await convo.reload();
    await convo.waitForSelector('.sbw[data-connected]');
    await convo.waitForTimeout(300);
    t.same(await texts(convo), after);
    await shot(convo, 'reloaded');
  });

  t.test('a dropped connection reconnects after its cursor; a message sent meanwhile is delivered once', async (t) => {
    const pg = await page();
    // Keeps the page's sockets reachable, so the test can drop one.
    await pg.addInitScript(() => {
      const W = window.WebSocket;
      const w = window as any;
      w.__sockets = [];
      w.WebSocket = class extends W {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, protocols);
          w.__sockets.push(this);
        }
      };
    });
    await pg.goto(demo(m));
    await pg.click('.sbw-bubble');
    await says(pg, '.sbw-agent', 'Hello, welcome to Acme Dental!');
    await pg.evaluate(() => (window as any).__sockets.at(-1).close());
    await pg.fill('#sbw-input', 'When are you open?');
    await pg.press('#sbw-input', 'Enter');
    await says(pg, '.sbw-agent', 'We are open from 9am to 5pm');
    const urls: string[] = await pg.evaluate(() => (window as any).__sockets.map((s: WebSocket) => s.url));
    t.equal(urls.length, 2, 'one reconnect');
    t.match(new URL(urls[0]).searchParams.get('cursor'), '0', 'a new session starts from 0');
    t.ok(Number(new URL(urls[1]).searchParams.get('cursor')) >= 3, `the reconnect resumes after the last sequence seen (${urls[1]})`);
    await pg.waitForTimeout(300);
    t.same(await texts(pg), [
      'sbw-msg sbw-agent: Hello, welcome to Acme Dental!',
      'sbw-msg sbw-user: When are you open?',
      'sbw-msg sbw-agent: We are open from 9am to 5pm, Monday to Friday.',
    ]);
  });

  t.test('a streamed answer renders progressively', async (t) => {
    const s = await page();
    await s.goto(demo(m, '&streaming=true'));
    await s.click('.sbw-bubble');
    await s.waitForSelector('.sbw[data-connected]');
    // The greeting streams too; then the next answer is watched as it grows.
    await s.locator('.sbw-log [data-mid][data-complete]').first().waitFor();
    await s.evaluate(() => {
      const w = window as any;
      w.__growth = [];
      new MutationObserver(() => {
        const last = document.querySelectorAll('.sbw-log [data-mid]');
        const b = last[last.length - 1];
        if (b && last.length > 1) w.__growth.push(b.textContent!.length);
      }).observe(document.querySelector('.sbw-log')!, { childList: true, subtree: true, characterData: true });
    });
    await s.fill('#sbw-input', 'When are you open?');
    await s.press('#sbw-input', 'Enter');
    await s.waitForFunction(() => document.querySelectorAll('.sbw-log [data-mid][data-complete]').length === 2);
    const growth: number[] = await s.evaluate(() => (window as any).__growth);
    const full = 'We are open from 9am to 5pm, Monday to Friday.';
    t.equal(await s.locator('.sbw-log [data-mid]').last().textContent(), full);
    const distinct = [...new Set(growth)].filter((n) => n > 0);
    t.ok(distinct.length > 2, `the bubble grew in steps: ${distinct.join(', ')}`);
    t.ok(distinct[0] < full.length, 'the first chunk shows before the whole answer');
    t.equal(await s.locator('.sbw-log [data-mid]').count(), 2, 'one bubble per streamed message');
    await shot(s, 'streamed');
  });

  t.test('response suggestions are buttons; one chosen with the keyboard is sent as the user message', async (t) => {
    const sg = await messagingProject(p, { name: 'Suggest Co' });
    const v = await sg.api('PATCH', `/v1/agents/${sg.agentId}/real-time-configs/live/variables`, { variables: { response_suggestions: ['When are you open?', 'Talk to a person'] } });
    t.equal(v.status, 200, v.text);
    const pg = await page();
    await pg.goto(demo(sg));
    await pg.click('.sbw-bubble');
    await says(pg, '.sbw-agent', 'Hello');
    const chips = pg.locator('.sbw-suggest .sbw-chip');
    await chips.first().waitFor();
    t.same(await chips.allTextContents(), ['When are you open?', 'Talk to a person']);
    t.equal(await pg.getAttribute('.sbw-suggest', 'role'), 'group');
    await chips.first().focus();
    await pg.keyboard.press('Enter');
    await says(pg, '.sbw-user', 'When are you open?');
    await says(pg, '.sbw-agent', 'We are open from 9am to 5pm');
    t.same(await chips.allTextContents(), ['When are you open?', 'Talk to a person'], 'the new answer brings its suggestions');
    await shot(pg, 'suggestions');
  });

  t.test('handoff: the desk page takes the session and the live agent answers in the widget', async (t) => {
    const h = await messagingProject(p, { name: 'Handoff Co' });
    const key = await h.liveAgentKey();
    const w = await page();
    await w.goto(demo(h));
    await w.click('.sbw-bubble');
    await says(w, '.sbw-agent', 'Hello');
    await w.fill('#sbw-input', 'I want to speak to a person');
    await w.press('#sbw-input', 'Enter');
    await w.locator('.sbw-status', { hasText: 'in the queue' }).waitFor();
    const sessionId: string = await w.evaluate(() => (window as any).__switchboardWidget.state().sessionId);

    // The desk, in a second browser context, keyboard only.
    const d = await page();
    await d.goto(`${p.socket}/desk`);
    await d.focus('#key');
    await d.keyboard.type(key);
    await d.keyboard.press('Tab');
    await d.keyboard.press('Control+A');
    await d.keyboard.type('Sam');
    await d.keyboard.press('Enter');
    const accept = d.locator(`#waiting li[data-session="${sessionId}"] button`);
    await accept.focus();
    await shot(d, 'desk-waiting');
    await d.keyboard.press('Enter');
    await d.locator('#transcript .user', { hasText: 'I want to speak to a person' }).waitFor();
    await says(w, '.sbw-note', 'Sam joined the conversation');
    t.equal(await w.textContent('.sbw-head .sbw-who'), 'Sam');

    // Typing both ways.
    await w.type('#sbw-input', 'My order');
    await d.locator('#typing', { hasText: 'The visitor is typing' }).waitFor();
    await w.fill('#sbw-input', '');
    await d.focus('#text');
    await d.keyboard.type('Hi, Sam here. How can I help?');
    await w.waitForSelector('.sbw-typing:not([hidden])');
    await d.keyboard.press('Enter');
    await says(w, '.sbw-live', 'Hi, Sam here. How can I help?');
    await w.waitForSelector('.sbw-typing', { state: 'hidden' });
    await w.fill('#sbw-input', 'My order is late');
    await w.press('#sbw-input', 'Enter');
    await d.locator('#transcript .user', { hasText: 'My order is late' }).waitFor();
    await shot(w, 'live-agent');
    await shot(d, 'desk-chat');

    await d.click('#leave');
    await says(w, '.sbw-note', 'Sam left the conversation');
    await says(w, '.sbw-note', 'The conversation has ended.');
    t.equal(await w.isVisible('.sbw-restart'), true, 'a new conversation can be started');
    t.equal(await w.isHidden('.sbw-form'), true);
    await shot(w, 'ended');
    // After the end, a reload starts afresh: nothing of the ended session is drawn again.
    await w.reload();
    t.equal(await w.locator('.sbw-log .sbw-msg').count(), 0);
  });

  t.test('ending the conversation from the widget', async (t) => {
    const e = await page();
    await e.goto(demo(m));
    await e.click('.sbw-bubble');
    await says(e, '.sbw-agent', 'Hello');
    await e.click('.sbw-end');
    await says(e, '.sbw-note', 'The conversation has ended.');
    t.equal(await e.evaluate(() => document.activeElement?.className), 'sbw-restart', 'focus moves from the hidden End button to the restart button');
    await e.click('.sbw-restart');
    await e.locator('.sbw-log .sbw-agent', { hasText: 'Hello' }).waitFor();
    t.equal(await e.locator('.sbw-log .sbw-msg').count(), 1, 'a new conversation: the greeting only');
  });

  t.test('theming: CSS variables on :root, or on .sbw before the widget\'s stylesheet, win', async (t) => {
    const pg = await page();
    await pg.goto(demo(m));
    const accent = () => pg.$eval('.sbw-bubble', (el) => getComputedStyle(el).backgroundColor);
    t.equal(await accent(), 'rgb(48, 86, 211)', 'the default');
    await pg.addStyleTag({ content: ':root { --sbw-accent: rgb(10, 125, 79); }' });
    t.equal(await accent(), 'rgb(10, 125, 79)', ':root');
    await pg.evaluate(() => {
      const style = document.createElement('style');
      style.textContent = '.sbw { --sbw-accent: rgb(200, 30, 30); }';
      document.head.prepend(style);
    });
    t.equal(await accent(), 'rgb(200, 30, 30)', '.sbw, placed before the widget\'s stylesheet');
  });

  t.test('an access token refused at reconnect is renewed: the same session and its history go on', async (t) => {
    // A page of its own, without the console check: the refused handshake is logged by the browser.
    const ctx = await browser.newContext();
    contexts.push(ctx);
    const pg = await ctx.newPage();
    await pg.goto(demo(m));
    await pg.click('.sbw-bubble');
    await says(pg, '.sbw-agent', 'Hello, welcome to Acme Dental!');
    const session = await pg.evaluate(() => (window as any).__switchboardWidget.state().sessionId);
    await pg.evaluate(() => {
      const key = Object.keys(sessionStorage).find((k) => k.startsWith('sbw:'))!;
      const st = JSON.parse(sessionStorage.getItem(key)!);
      st.accessToken = 'not-a-token';
      sessionStorage.setItem(key, JSON.stringify(st));
    });
    await pg.reload();
    await pg.waitForSelector('.sbw[data-connected]');
    t.equal(await pg.evaluate(() => (window as any).__switchboardWidget.state().sessionId), session, 'the same session');
    t.same(await texts(pg), ['sbw-msg sbw-agent: Hello, welcome to Acme Dental!'], 'its history, and no "ended" note');
  });

  t.test('no console errors on any page', async (t) => {
    t.same(errors, []);
  });
}
