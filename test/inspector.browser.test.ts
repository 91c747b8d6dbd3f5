import t from 'tap';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, chromiumMissing, launchChromium } from './helpers/browser.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { waitForProjections } from './helpers/projections.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';

// The inspector page in headless Chromium (Debian's) against a started platform: the token once, the
// fleet, a chat conversation's chart lit and following a new turn live, the event log, time travel.
// Without Chromium this skips locally; with CI=true chromiumMissing() throws, so it fails instead.
const missing = chromiumMissing();
if (missing) t.plan(0, missing);
else run();

function run() {
  let p: Platform;
  let c: ChatProject;
  let browser: Browser;
  const errors: string[] = [];

  t.before(async () => {
    p = await startPlatform();
    c = await chatProject(p, { name: 'Browser Co' });
    browser = await launchChromium();
  });
  t.teardown(async () => {
    await browser?.close();
    await p.stop();
    removeDir(p.dataDir);
  });

  const shot = (pg: Page, name: string) => pg.screenshot({ path: join(ARTIFACTS, `inspector-${name}.png`), fullPage: true });
  const lit = (pg: Page) => pg.$$eval('#chart .state.active', (els) => els.map((e) => e.getAttribute('data-path')));

  t.test('the page is plain files from the edge, no CDN', async (t) => {
    const html = await http(p.edge, 'GET', '/inspector');
    t.equal(html.status, 200);
    t.match(html.headers.get('content-type') ?? '', /text\/html/);
    t.match(html.headers.get('content-security-policy') ?? '', "default-src 'self'");
    t.notMatch(html.text, /https?:\/\//, 'no external address in the page');
    const slash = await fetch(new URL('/inspector/', p.edge), { redirect: 'manual' });
    t.same([slash.status, slash.headers.get('location')], [301, '/inspector'], 'typed with a trailing slash: redirected to the page');
    const js = await http(p.edge, 'GET', '/inspector/inspector.js');
    t.match(js.headers.get('content-type') ?? '', /text\/javascript/);
    t.notMatch(js.text, /https?:\/\//, 'nor in its script');
  });

  t.test('token once, fleet, a conversation lit on its chart, a turn seen live, time travel', async (t) => {
    const id = (await c.chat('create', {})).body.conversation_id;
    const first = await c.chat('respond', { conversation_id: id, message: 'When are you open? my mail is eve@example.com' });
    t.equal(first.status, 200);
    // The fleet and the search read the actor index, a projection the runner keeps off the reply path.
    await waitForProjections(p);

    const ctx = await browser.newContext({ viewport: { width: 1440, height: 960 } });
    t.teardown(() => ctx.close());
    const pg = await ctx.newPage();
    pg.setDefaultTimeout(20_000);
    pg.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
    });
    pg.on('pageerror', (err) => errors.push(`page: ${err.message}`));
    pg.on('response', (r) => {
      if (r.status() >= 400) errors.push(`${r.url()}: ${r.status()}`);
    });

    await pg.goto(`${p.edge}/inspector`);
    await pg.locator('#login').waitFor();
    await pg.fill('#token', 'wrong-token-wrong-token');
    await pg.click('#login-form button');
    await pg.locator('#login-error', { hasText: 'refused' }).waitFor();
    t.pass('a wrong token is refused');
    errors.length = 0; // that 401 was the point
    await pg.fill('#token', p.operatorToken);
    await pg.click('#login-form button');
    await pg.locator('#fleet').waitFor();
    t.equal(await pg.evaluate(() => sessionStorage.getItem('switchboard.inspector.token')), p.operatorToken, 'kept in session storage');
    await pg.locator('#counts td', { hasText: 'conversation' }).first().waitFor();
    await shot(pg, 'fleet');

    // Find the conversation: search idle conversations, follow its link.
    await pg.selectOption('#search-kind', 'conversation');
    await pg.fill('#search-state', 'idle');
    await pg.click('#search-form button');
    await pg.locator(`#search-results a.actor-link`, { hasText: id }).click();
    await pg.locator('#chart svg').waitFor();
    await pg.waitForFunction(() => document.querySelectorAll('#chart .state.active').length > 0);
    t.same(await lit(pg), ['idle'], 'idle is lit');
    t.match(await pg.textContent('#context'), '•••', 'the context is masked');
    t.notMatch(await pg.textContent('#context'), 'eve@example.com');
    t.match(await pg.textContent('#deadlines'), 'idleTimer', 'its idle deadline');
    await pg.locator('#stream-status', { hasText: 'live' }).waitFor();
    const before = await pg.$$eval('#log li', (els) => els.length);
    await shot(pg, 'actor');

    // A turn from outside: the log grows without a reload.
    const reloads: string[] = [];
    pg.on('framenavigated', (f) => reloads.push(f.url()));
    const second = await c.chat('respond', { conversation_id: id, message: 'Is there parking?' });
    t.equal(second.status, 200);
    await pg.waitForFunction((n) => document.querySelectorAll('#log li').length > n, before);
    t.equal(await pg.textContent('#log li.current .val'), 'idle', 'the newest step is current');
    t.same(await lit(pg), ['idle']);

    // Back in time: the chart and the position follow the journal.
    await pg.click('#back');
    const steps = await pg.$$eval('#log li', (els) => els.length);
    t.match(await pg.textContent('#position'), `step ${steps - 1} of ${steps}`);
    t.equal(await pg.getAttribute('#log li.current', 'data-version'), await pg.getAttribute('#log li:nth-child(2)', 'data-version'), 'one step back');
    // While travelling, a new step is logged but the chart stays where the operator put it: the agent ends
    // the conversation on goodbye.
    const bye = await c.chat('respond', { conversation_id: id, message: 'Goodbye' });
    t.equal(bye.status, 200);
    t.equal(bye.body.end_conversation, true, 'the agent ends the conversation');
    await pg.waitForFunction(() => document.querySelector('#log li .val')?.textContent === 'ended');
    t.same(await lit(pg), ['idle'], 'travelling: the chart does not jump');
    t.equal(await pg.textContent('#value'), 'idle');
    await pg.click('#live');
    t.same(await lit(pg), ['ended'], 'Live: the lit state moved to ended');
    t.equal(await pg.textContent('#value'), 'ended');
    await shot(pg, 'ended');
    await pg.click('#back');
    t.not((await lit(pg))[0], 'ended', 'one step back: the state before the end is lit');
    await shot(pg, 'time-travel');
    await pg.click('#live');
    t.same(reloads, [], 'no reload');

    // Unmasked on request.
    await pg.check('#unmasked');
    await pg.locator('#context', { hasText: 'eve@example.com' }).waitFor();
    t.pass('unmasked shows the personal data');
    await shot(pg, 'unmasked');

    // The machines view: every chart.
    await pg.click('nav a[href="#/machines"]');
    await pg.locator('#machine-list article svg').first().waitFor();
    t.ok((await pg.$$('#machine-list article svg')).length >= 3, 'every machine drawn');
    await shot(pg, 'machines');
    t.same(errors, [], 'no console errors, no failed requests');
  });
}
