/**
 * A CANCEL of an INVITE still pending (ringing, not answered): 200 for the CANCEL, then 487 Request Terminated for
 * the INVITE (RFC 3261 9.2), which the caller ACKs, and the INVITE is known to be cancelled. Against the media
 * gateway's SIP user agent (`SipEndpoint`, gateway/media/dialog.ts) with sipp as the caller: the gateway answers
 * an INVITE as soon as its number's agent is looked up, so against a whole platform a CANCEL usually comes too late
 * (voice.dialog's race test takes either outcome); here the INVITE is held ringing until the CANCEL has come.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SipEndpoint, type IncomingInvite } from '../gateway/media/dialog.js';
import { freeSipPort } from '../gateway/media/ports.js';
import { quietPort, runSipp, scenario } from './helpers/voice.js';
import { toolAvailable } from './helpers/tools.js';

const needsSipp = () => (toolAvailable('/usr/bin/sipp', 'sip-tester') ? {} : { skip: 'sipp is not installed' });

t.test('a CANCEL while the INVITE rings: 200 for the CANCEL, 487 for the INVITE, ACKed; the INVITE is cancelled', needsSipp(), async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-voice-cancel-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const logged: string[] = [];
  const ua = new SipEndpoint({ host: '127.0.0.1', port: await freeSipPort('127.0.0.1'), log: (msg) => void logged.push(msg) });
  await ua.start();
  t.teardown(() => ua.stop());
  const held: IncomingInvite[] = [];
  let cancelled = 0;
  ua.onInvite = (invite) => {
    // Rings, and is never answered: only the CANCEL ends it.
    held.push(invite);
    invite.onCancel = () => void cancelled++;
    invite.progress(180, 'Ringing');
  };
  const run = await runSipp({ scenario: scenario('inbound-cancel-pending.xml', dir, { NUMBER: '+442079460150' }), target: `127.0.0.1:${ua.o.port}`, port: await quietPort(), mediaPort: await quietPort(), dir, timeoutS: 20 });
  t.equal(run.code, 0, 'sipp got 200 for its CANCEL and 487 for its INVITE, and ACKed it', { out: run.out.slice(-3000) });
  t.equal(held.length, 1, 'one INVITE');
  t.equal(held[0]?.cancelled, true, 'known to be cancelled');
  t.equal(cancelled, 1, 'its onCancel called once');
  t.equal(ua.dialogs.size, 0, 'no dialog');
  t.same(logged, [], 'nothing logged');
});
