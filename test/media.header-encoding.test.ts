/**
 * SIP header values through the `sip` stack, which reads and writes one character per byte: written as their
 * UTF-8 bytes and read back from them, so metadata and an inbound call's headers keep their text.
 */
import fc from 'fast-check';
import t from 'tap';
import { fromWire, toWire } from '../gateway/media/dialog.js';

t.test('any text survives the way out and back', async (t) => {
  fc.assert(fc.property(fc.string({ unit: 'grapheme' }), (s) => fromWire(toWire(s)) === s));
  t.equal(toWire('José'), 'Jos\u00c3\u00a9', 'written as its UTF-8 bytes');
  t.equal(fromWire('Jos\u00c3\u00a9'), 'José', 'read back from them');
});

t.test('a header that is not UTF-8 (a latin1 peer) is kept as it came', async (t) => {
  t.equal(fromWire('Jos\u00e9'), 'Jos\u00e9');
  t.equal(fromWire('plain ascii'), 'plain ascii');
});
