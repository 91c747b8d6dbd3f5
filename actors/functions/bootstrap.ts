/**
 * The trusted script that runs first in every fresh QuickJS context, before any tenant code (see `quickjs-call.ts`).
 *
 * It evaluates to a controller object whose methods the host calls with string arguments and which answers with
 * strings (or `undefined`): the `conv` object and its methods are built here, inside the sandbox's own realm, so no
 * host function is ever reachable from tenant code. Intrinsics (`JSON`, `String`, `Reflect.apply`, ...) are captured
 * before tenant code runs, so a function that replaces `JSON.stringify` or `Array.prototype.toJSON` corrupts at most
 * its own return value, never the envelope the host parses.
 */
export const BOOTSTRAP_SOURCE = String.raw`(function () {
  'use strict';
  const G = globalThis;
  const parse = JSON.parse, stringify = JSON.stringify, S = String;
  const defineProperty = Object.defineProperty, freeze = Object.freeze, keys = Object.keys, isArray = Array.isArray;
  const isFinite = Number.isFinite;
  const apply = Reflect.apply, lower = String.prototype.toLowerCase;
  const hidden = (o, k, v) => defineProperty(o, k, { value: v, writable: true, configurable: true, enumerable: false });
  // Appends by definition, not assignment: an assignment would call a setter the tenant put on
  // Array.prototype for that index, handing it this array.
  const append = (list, v) => defineProperty(list, list.length, { value: v, writable: true, configurable: true, enumerable: true });
  // No deferred work: nothing of a call may run outside the call's own job loop.
  delete G.FinalizationRegistry;
  // QuickJS's SharedArrayBuffer clears only its initial length: one grown past it (\`maxByteLength\`) shows
  // WebAssembly memory that earlier calls, of any tenant, freed. Without the constructor there is no instance (no
  // Atomics, no workers, no postMessage here), so nothing reaches that path.
  delete G.SharedArrayBuffer;
  const noop = function () {};
  hidden(G, 'console', { log: noop, info: noop, warn: noop, error: noop, debug: noop, trace: noop });

  let conv = null, args = [], status = 'idle', value, message = '', inputState = '{}', stateError = '';
  // A BigInt in the state is its String(), as a returned one is: JSON.stringify alone throws on it.
  const bigintsAsStrings = (_k, v) => (typeof v === 'bigint' ? S(v) : v);
  const said = [];
  let handoff = null, ended = false, awaiting = null;
  // Values the function marked as personal data (conv.mark_pii): bounded, so a loop cannot grow the output.
  const marked = [];
  const isObject = (v) => v !== null && typeof v === 'object' && !isArray(v);
  const describe = (e) => {
    try {
      if (e !== null && (typeof e === 'object' || typeof e === 'function') && typeof e.message === 'string') {
        const name = typeof e.name === 'string' ? e.name : '';
        return name && name !== 'Error' ? name + ': ' + e.message : e.message;
      }
      return S(e);
    } catch (_) {
      return 'unprintable error';
    }
  };
  return freeze({
    init(convJson, argsJson) {
      const input = parse(convJson);
      const obj = (v) => (isObject(v) ? v : {});
      const state = obj(input.state);
      inputState = stringify(state);
      const headers = obj(input.sip_headers);
      const byName = new Map();
      const sip = {};
      for (const k of keys(headers)) {
        byName.set(apply(lower, k, []), S(headers[k]));
        sip[k] = S(headers[k]);
      }
      hidden(sip, 'get', function get(name) {
        const v = byName.get(apply(lower, S(name), []));
        return v === undefined ? null : v;
      });
      hidden(sip, 'has', function has(name) { return byName.has(apply(lower, S(name), [])); });
      conv = {
        conversation_id: S(input.conversation_id ?? ''),
        channel: S(input.channel ?? ''),
        environment: S(input.environment ?? ''),
        variant: isObject(input.variant) ? input.variant : null,
        state,
        integration_attributes: obj(input.integration_attributes),
        metadata: obj(input.metadata),
        sip_headers: sip,
        variables: obj(input.variables),
      };
      hidden(conv, 'say', function say(text) { append(said, S(text)); });
      hidden(conv, 'handoff', function handoff_(destination, reason) {
        handoff = { destination: S(destination), reason: reason === undefined ? '' : S(reason) };
      });
      hidden(conv, 'end', function end() { ended = true; });
      // Marks a value as personal data: recordings are muted where the caller said or keyed it, and redacted
      // transcripts mask it (docs/recordings.md). Refused past 32 values a call or 256 characters a value.
      hidden(conv, 'mark_pii', function mark_pii(value) {
        const v = S(value);
        if (v.length === 0 || v.length > 256) throw new TypeError('conv.mark_pii: the value must be 1 to 256 characters');
        if (marked.length >= 32) throw new TypeError('conv.mark_pii: at most 32 values per call');
        append(marked, v);
      });
      // Asks the platform to hold the conversation until the external event with this id arrives (or the
      // timeout passes); the project's external_event(conv, event) function then runs. Recorded only: the
      // platform validates the id and bounds the timeout.
      hidden(conv, 'await_external_event', function await_external_event(eventId, options) {
        let timeout = null;
        try {
          const t = options !== null && typeof options === 'object' ? options.timeout_ms : undefined;
          if (typeof t === 'number' && t === t) timeout = t;
        } catch (_) {}
        awaiting = { event_id: S(eventId), timeout_ms: timeout };
      });
      const list = parse(argsJson);
      for (let i = 0; i < list.length; i++) args[i] = list[i] === null ? undefined : parse(list[i]);
    },
    /** Calls the tenant's function; an async result settles through the context's own job queue. */
    run(fn) {
      status = 'pending';
      const all = [conv];
      for (let i = 0; i < args.length; i++) all[i + 1] = args[i];
      (async function () {
        try {
          value = await apply(fn, undefined, all);
          status = 'ok';
        } catch (e) {
          message = describe(e);
          status = 'error';
        }
      })();
    },
    status() { return status; },
    // Why the last output() could not write conv.state as JSON, or undefined.
    stateError() { return stateError === '' ? undefined : stateError; },
    message() { return message; },
    describe,
    /** The return value as JSON text, or undefined; values JSON cannot hold become their string form. */
    value() {
      if (value === undefined) return undefined;
      try {
        const text = stringify(value);
        if (typeof text === 'string') return text;
      } catch (_) {}
      try { return stringify(S(value)); } catch (_) { return '"[unprintable value]"'; }
    },
    /** What the function did to the conversation, as JSON text built from strings the host can trust. */
    output() {
      let state = inputState;
      stateError = '';
      try {
        let text;
        // The replacer only when needed: it is a call per value, and most states hold no BigInt.
        try { text = stringify(conv.state); } catch (_) { text = stringify(conv.state, bigintsAsStrings); }
        // Replaced by what is not an object (null, an array, a number, a toJSON giving one, undefined): as lost.
        if (typeof text === 'string' && isObject(parse(text))) state = text;
        else stateError = 'conv.state must be an object of variables';
      } catch (e) {
        // A cycle, a throwing getter or toJSON: the state cannot be written, and keeping the input's instead
        // would drop what the function set without a word (stateError makes the call a function error).
        stateError = describe(e);
      }
      // Built by hand: stringify of a string primitive consults no (tenant-patchable) toJSON.
      let list = '';
      for (let i = 0; i < said.length; i++) list += (i ? ',' : '') + stringify(said[i]);
      const h = handoff === null ? 'null'
        : '{"destination":' + stringify(handoff.destination) + ',"reason":' + stringify(handoff.reason) + '}';
      const a = awaiting === null ? 'null'
        : '{"event_id":' + stringify(awaiting.event_id) + ',"timeout_ms":' + (awaiting.timeout_ms === null || !isFinite(awaiting.timeout_ms) ? 'null' : stringify(awaiting.timeout_ms)) + '}';
      let pii = '';
      for (let i = 0; i < marked.length; i++) pii += (i ? ',' : '') + stringify(marked[i]);
      return '{"state":' + state + ',"said":[' + list + '],"handoff":' + h + ',"ended":' + (ended ? 'true' : 'false') + ',"awaiting":' + a + ',"pii":[' + pii + ']}';
    },
  });
})()`;
