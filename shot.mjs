import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'] });
const p = await b.newPage({ viewport: { width: 1600, height: 1200 } });
for (const f of process.argv.slice(2)) { await p.setContent('<html><body style="margin:0">' + readFileSync(f, 'utf8').replace(/<\?xml[^>]*>/, '') + '</body></html>'); await p.screenshot({ path: f.replace(/\.\w+$/, '.png'), fullPage: true, timeout: 20000 }); }
await b.close();
