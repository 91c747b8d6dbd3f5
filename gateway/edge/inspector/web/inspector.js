/*
 * The inspector page (served at /inspector on the edge port; docs/inspector.md). Plain JavaScript, no
 * dependencies, no CDN. It is a client of /admin/v1/inspector: the operator token is entered once and kept in
 * sessionStorage; every request carries it as `Authorization: Bearer`. Live steps come from the Server-Sent
 * Events stream read with fetch (EventSource cannot send the Authorization header).
 */
(() => {
  'use strict';
  const TOKEN_KEY = 'switchboard.inspector.token';
  const API = '/admin/v1/inspector';
  const $ = (sel) => document.querySelector(sel);
  const el = (tag, props, ...children) => {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  };

  let token = sessionStorage.getItem(TOKEN_KEY);
  let machines = null;
  const svgs = new Map();
  /** The actor on screen: its steps (journal), where the chart is, whether it follows new steps. */
  let view = null;

  const unmasked = () => $('#unmasked').checked;

  class Unauthorized extends Error {}

  async function api(path, accept) {
    const res = await fetch(path, { headers: { authorization: `Bearer ${token}`, accept: accept || 'application/json' } });
    if (res.status === 401) throw new Unauthorized('the operator token was refused');
    if (!res.ok) {
      let message = `${res.status}`;
      try {
        message = (await res.json()).message || message;
      } catch { /* not JSON */ }
      throw new Error(message);
    }
    return res;
  }
  const json = async (path) => (await api(path)).json();

  function showError(err) {
    if (err instanceof Unauthorized) {
      signOut('The operator token was refused. Enter it again.');
      return;
    }
    $('#error').textContent = err ? `Error: ${err.message}` : '';
  }

  function show(section) {
    for (const id of ['login', 'fleet', 'machines', 'actor']) $(`#${id}`).hidden = id !== section;
    $('#nav').hidden = section === 'login';
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    token = null;
    stopStream();
    show('login');
    $('#login-error').textContent = message || '';
    $('#token').focus();
  }

  async function kinds() {
    if (!machines) machines = (await json(`${API}/machines`)).data;
    return machines;
  }

  async function svgOf(kind) {
    if (!svgs.has(kind)) svgs.set(kind, (await api(`${API}/machines/${encodeURIComponent(kind)}.svg`, 'image/svg+xml')).text());
    return svgs.get(kind);
  }

  /* ---------- fleet ---------- */

  /** `[0,1,2,5,7,8]` → `0–2, 5, 7–8`. */
  function ranges(list) {
    const out = [];
    for (let i = 0; i < list.length; i++) {
      let j = i;
      while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
      out.push(j > i ? `${list[i]}–${list[j]}` : `${list[i]}`);
      i = j;
    }
    return out.join(', ');
  }

  async function showFleet() {
    show('fleet');
    const [fleet, list] = await Promise.all([json(`${API}/fleet`), kinds()]);
    for (const sel of ['#search-kind', '#open-kind']) {
      const s = $(sel);
      const keep = s.value;
      s.replaceChildren(...(sel === '#search-kind' ? [el('option', { value: '' }, 'any')] : []), ...list.map((m) => el('option', { value: m.kind }, m.kind)));
      if (keep) s.value = keep;
    }
    const rows = [];
    for (const [kind, k] of Object.entries(fleet.kinds).sort()) {
      for (const [state, n] of Object.entries(k.states).sort()) {
        const a = el('a', { href: '#/' }, state);
        a.addEventListener('click', (e) => {
          e.preventDefault();
          $('#search-kind').value = kind;
          $('#search-state').value = state.split(' | ')[0];
          search();
        });
        rows.push(el('tr', {}, el('td', {}, kind), el('td', {}, a), el('td', { className: 'num' }, n)));
      }
    }
    $('#counts').replaceChildren(
      rows.length
        ? el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'kind'), el('th', {}, 'state'), el('th', {}, 'actors'))), el('tbody', {}, ...rows))
        : el('p', { className: 'meta' }, 'No actor has committed a step yet.'),
      el('p', { className: 'meta' }, `${fleet.total} actors in the index`),
    );
    $('#workers').replaceChildren(
      el('table', {},
        el('thead', {}, el('tr', {}, el('th', {}, 'worker'), el('th', {}, 'shards'), el('th', {}, 'live actors'))),
        el('tbody', {}, ...fleet.workers.map((w) => el('tr', {}, el('td', { className: 'nowrap' }, w.id), el('td', {}, `${w.shards.length} (${ranges(w.shards)})`), el('td', { className: 'num' }, w.liveActors)))),
      ),
      el('p', { className: 'meta' }, `${fleet.shardCount} shards${fleet.unownedShards.length ? `, unowned: ${fleet.unownedShards.join(', ')}` : ', every shard owned'}`),
    );
    await search();
  }

  async function search() {
    const q = new URLSearchParams({ limit: '50' });
    if ($('#search-kind').value) q.set('kind', $('#search-kind').value);
    if ($('#search-state').value.trim()) q.set('state', $('#search-state').value.trim());
    if ($('#search-project').value.trim()) q.set('project', $('#search-project').value.trim());
    const found = await json(`${API}/actors?${q}`);
    $('#search-results tbody').replaceChildren(
      ...found.data.map((a) =>
        el('tr', {},
          el('td', {}, a.kind),
          el('td', {}, el('a', { href: `#/actor/${encodeURIComponent(a.kind)}/${encodeURIComponent(a.id)}`, className: 'actor-link' }, a.id)),
          el('td', {}, a.state),
          el('td', {}, a.project_id || ''),
          el('td', {}, new Date(a.updated_at).toLocaleTimeString()),
        ),
      ),
    );
    if (found.data.length === 0) $('#search-results tbody').append(el('tr', {}, el('td', { colSpan: 5, className: 'meta' }, 'No actor matches.')));
  }

  /* ---------- machines ---------- */

  async function showMachines() {
    show('machines');
    const list = await kinds();
    const items = [];
    for (const m of list) {
      const box = el('div', { className: 'chart-box' });
      box.innerHTML = await svgOf(m.kind);
      const svg = box.querySelector('svg');
      if (svg) {
        // Fitted to the page; a click shows it at full size (and back).
        svg.classList.add('fit');
        svg.addEventListener('click', () => svg.classList.toggle('fit'));
      }
      items.push(el('article', {}, el('h2', {}, `${m.kind} `, el('small', {}, `${m.states} states, ${m.transitions} transitions, ${m.effects} effects, ${m.timers} timers`)), box));
    }
    $('#machine-list').replaceChildren(...items);
  }

  /* ---------- one actor ---------- */

  /** Every active state path of a state value (parents included), as the chart's `data-path`s name them. */
  function activePaths(value) {
    const out = new Set();
    const walk = (prefix, v) => {
      const at = (k) => (prefix ? `${prefix}.${k}` : k);
      if (typeof v === 'string') out.add(at(v));
      else if (v && typeof v === 'object') for (const [k, sub] of Object.entries(v)) {
        out.add(at(k));
        walk(at(k), sub);
      }
    };
    walk('', value);
    return out;
  }

  const valueText = (v) => (typeof v === 'string' ? v : JSON.stringify(v, null, 1));

  function render() {
    const v = view;
    const step = v.steps[v.pos];
    const active = activePaths(step.value);
    for (const g of document.querySelectorAll('#chart .state')) {
      g.classList.toggle('active', !g.classList.contains('root') && active.has(g.dataset.path));
    }
    // The transitions that may have led here from the step before: from a state active then, into one active now.
    const before = v.pos > 0 ? activePaths(v.steps[v.pos - 1].value) : null;
    const moved = before && JSON.stringify(v.steps[v.pos - 1].value) !== JSON.stringify(step.value);
    for (const g of document.querySelectorAll('#chart .transition[data-source]')) {
      const taken = !!moved && before.has(g.dataset.source) && g.dataset.targets.split(' ').some((x) => x && active.has(x) && !before.has(x));
      g.classList.toggle('taken', taken);
    }
    $('#value').textContent = valueText(step.value);
    if (fullSize) fitChart();
    $('#position').textContent = `step ${v.pos + 1} of ${v.steps.length} · version ${step.version} · ${new Date(step.at).toLocaleTimeString()}${v.live ? ' · live' : ''}`;
    $('#scrub').max = String(v.steps.length - 1);
    $('#scrub').value = String(v.pos);
    $('#back').disabled = v.pos === 0;
    $('#forward').disabled = v.pos >= v.steps.length - 1;
    $('#live').classList.toggle('on', v.live);
    const items = v.steps.map((s, i) => {
      const li = el('li', { className: i === v.pos ? 'current' : '' },
        el('span', { className: 'ver' }, `v${s.version}`),
        el('span', { className: 'val' }, valueText(s.value)),
        ...s.events.map((e) => el('span', { className: 'ev', title: JSON.stringify(e.data) }, e.type)),
      );
      li.dataset.version = String(s.version);
      li.addEventListener('click', () => travel(i));
      return li;
    });
    $('#log').replaceChildren(...items.reverse());
    $('#log-count').textContent = `(${v.steps.length})`;
    // The journal keeps state values and events; context and deadlines are always the actor's current ones.
    $('#context-when').textContent = v.pos === v.steps.length - 1 ? '' : 'Deadlines and context below are the actor\'s current ones, not those of the step shown.';
  }

  /** The chart fits the page by default; full size scrolls to the deepest lit state. */
  let fullSize = false;
  function fitChart() {
    const svg = $('#chart svg');
    if (!svg) return;
    svg.classList.toggle('fit', !fullSize);
    $('#zoom').textContent = fullSize ? 'Fit to page' : 'Full size';
    if (fullSize) {
      const lit = [...document.querySelectorAll('#chart .state.active')].pop();
      if (lit) lit.scrollIntoView({ block: 'center', inline: 'center' });
    }
  }

  function renderSnapshot(s) {
    $('#context').textContent = JSON.stringify(s.context, null, 2);
    $('#masked-note').textContent = unmasked() ? '(unmasked)' : '(personal data masked)';
    $('#deadlines').replaceChildren(...(s.deadlines.length ? s.deadlines.map((d) => el('li', {}, `${d.id}: ${new Date(d.until).toLocaleString()}`)) : [el('li', { className: 'meta' }, 'none pending')]));
  }

  function travel(i) {
    if (!view) return;
    view.pos = Math.max(0, Math.min(view.steps.length - 1, i));
    view.live = view.pos === view.steps.length - 1 && view.live;
    render();
  }

  function stopStream() {
    if (view && view.abort) view.abort.abort();
  }

  async function showActor(kind, id) {
    stopStream();
    show('actor');
    const list = await kinds();
    const known = list.some((m) => m.kind === kind);
    const path = `${API}/actors/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;
    const [actor, svg] = await Promise.all([json(`${path}?journal=500${unmasked() ? '&unmasked=true' : ''}`), known ? svgOf(kind) : Promise.resolve('')]);
    $('#actor-title').textContent = `${kind} / ${id}`;
    $('#actor-meta').textContent = `actor ${actor.status} · shard ${actor.placement.shard} · owner ${actor.placement.owner || 'none'} · fence ${actor.placement.fence} · version ${actor.placement.version}`;
    $('#chart').innerHTML = svg || '<p class="meta">No chart: this kind is not in machines/catalog.ts.</p>';
    fitChart();
    const steps = actor.journal.length ? actor.journal : [{ seq: 0, version: actor.placement.version, at: actor.placement.updatedAt, value: actor.value, events: [] }];
    view = { kind, id, path, steps, pos: steps.length - 1, live: true, abort: new AbortController() };
    render();
    renderSnapshot(actor);
    follow(view);
  }

  /** Reads the actor's Server-Sent Events with fetch (the Authorization header), reconnecting after a drop. */
  async function follow(v) {
    const status = $('#stream-status');
    while (view === v && !v.abort.signal.aborted) {
      try {
        const after = v.steps[v.steps.length - 1].version;
        const res = await fetch(`${v.path}/events?after=${after}${unmasked() ? '&unmasked=true' : ''}`, {
          headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
          signal: v.abort.signal,
        });
        if (res.status === 401) throw new Unauthorized('the operator token was refused');
        if (!res.ok) throw new Error(`stream: ${res.status}`);
        status.textContent = '● live';
        status.className = 'status on';
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let type = 'message';
            const data = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('event:')) type = line.slice(6).trim();
              else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
            }
            if (data.length && view === v) onStreamEvent(v, type, JSON.parse(data.join('\n')));
          }
        }
      } catch (err) {
        if (v.abort.signal.aborted) return;
        if (err instanceof Unauthorized) return showError(err);
      }
      status.textContent = '○ reconnecting';
      status.className = 'status';
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  function onStreamEvent(v, type, data) {
    if (type === 'step') {
      if (data.version <= v.steps[v.steps.length - 1].version) return;
      v.steps.push(data);
      if (v.live) v.pos = v.steps.length - 1;
      render();
    } else if (type === 'snapshot') {
      renderSnapshot(data);
      $('#actor-meta').textContent = `actor ${data.status} · shard ${data.shard} · fence ${data.fence} · version ${data.version}`;
    }
  }

  /* ---------- routing ---------- */

  async function route() {
    $('#error').textContent = '';
    if (!token) return signOut();
    const hash = location.hash.replace(/^#\/?/, '');
    const parts = hash.split('/').map(decodeURIComponent);
    try {
      if (parts[0] === 'actor' && parts.length === 3) return await showActor(parts[1], parts[2]);
      stopStream();
      view = null;
      if (parts[0] === 'machines') return await showMachines();
      return await showFleet();
    } catch (err) {
      showError(err);
    }
  }

  $('#login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    token = $('#token').value.trim();
    try {
      await json(`${API}/machines`);
      sessionStorage.setItem(TOKEN_KEY, token);
      $('#token').value = '';
      $('#login-error').textContent = '';
      await route();
    } catch (err) {
      token = null;
      $('#login-error').textContent = err instanceof Unauthorized ? 'That token was refused.' : `Error: ${err.message}`;
    }
  });
  $('#signout').addEventListener('click', () => signOut());
  $('#search-form').addEventListener('submit', (e) => {
    e.preventDefault();
    search().catch(showError);
  });
  $('#open-form').addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = `#/actor/${encodeURIComponent($('#open-kind').value)}/${encodeURIComponent($('#open-id').value.trim())}`;
  });
  $('#back').addEventListener('click', () => {
    if (!view) return;
    view.live = false;
    travel(view.pos - 1);
  });
  $('#forward').addEventListener('click', () => view && travel(view.pos + 1));
  $('#live').addEventListener('click', () => {
    if (!view) return;
    view.live = true;
    travel(view.steps.length - 1);
  });
  $('#scrub').addEventListener('input', () => {
    if (!view) return;
    view.live = false;
    travel(Number($('#scrub').value));
  });
  $('#unmasked').addEventListener('change', () => route());
  $('#zoom').addEventListener('click', () => {
    fullSize = !fullSize;
    fitChart();
  });
  window.addEventListener('hashchange', route);
  route();
})();
