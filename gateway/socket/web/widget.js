/* Switchboard webchat widget: plain browser JavaScript, served as-is by the socket gateway (GET /widget.js).
   <script src="https://HOST:PORT/widget.js" data-token="<connector token>" data-host="<registered host>"
           data-streaming="true" data-title="Chat with us"></script> */
(function () {
  'use strict';
  var me = document.currentScript;
  if (!me || window.__switchboardWidget) return;
  var base = new URL(me.src, location.href).origin;
  var token = me.getAttribute('data-token') || '';
  var host = me.getAttribute('data-host') || location.hostname;
  var streaming = me.getAttribute('data-streaming') === 'true';
  var title = me.getAttribute('data-title') || 'Chat with us';
  var lang = me.getAttribute('data-language') || '';
  var KEY = 'sbw:' + token.slice(-12);
  var P = 'EVENT_TYPE_';

  // Stored state: the session, its token and the journaled events seen (the history a reload restores).
  var st = load() || fresh();
  var ws = null, attempts = 0, maxAttempts = 5, renewed = false, beat = null, retryTimer = null, typingTimer = null, typingOn = false;
  var pending = {}; // client_event_id -> text: sent, not yet echoed (re-sent after a reconnect)
  var ended = false, starting = false;

  function fresh() { return { sessionId: '', accessToken: '', events: [] }; }
  function load() { try { return JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch (e) { return null; } }
  function save() { try { sessionStorage.setItem(KEY, JSON.stringify(st)); } catch (e) { /* storage full or off */ } }
  function lastSeq() { var n = st.events.length; return n ? st.events[n - 1].sequence : 0; }
  function cid() { return 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 8); }

  // ---- DOM ----
  var css = document.createElement('link');
  css.rel = 'stylesheet';
  css.href = base + '/widget.css';
  document.head.appendChild(css);
  var root = el('div', 'sbw');
  root.innerHTML =
    '<button type="button" class="sbw-bubble" aria-expanded="false" aria-controls="sbw-panel" aria-label="Open chat">' +
    '<svg viewBox="0 0 24 24" width="28" height="28" aria-hidden="true"><path fill="currentColor" d="M4 4h16v11H7l-3 3z"/></svg></button>' +
    '<section class="sbw-panel" id="sbw-panel" role="dialog" aria-label="" hidden>' +
    '<header class="sbw-head"><span class="sbw-title"></span><span class="sbw-who"></span>' +
    '<button type="button" class="sbw-end" aria-label="End conversation">End</button>' +
    '<button type="button" class="sbw-close" aria-label="Close chat">&times;</button></header>' +
    '<div class="sbw-log" role="log" aria-live="polite" aria-relevant="additions" tabindex="0" aria-label="Messages"></div>' +
    '<div class="sbw-status" role="status" aria-live="polite"></div>' +
    '<div class="sbw-typing" aria-hidden="true" hidden><span></span><span></span><span></span></div>' +
    '<div class="sbw-suggest" role="group" aria-label="Suggested replies"></div>' +
    '<form class="sbw-form"><label class="sbw-sr" for="sbw-input">Message</label>' +
    '<input id="sbw-input" class="sbw-input" autocomplete="off" placeholder="Type a message" maxlength="4000">' +
    '<button type="submit" class="sbw-send">Send</button></form>' +
    '<button type="button" class="sbw-restart" hidden>Start a new conversation</button></section>';
  document.body.appendChild(root);
  var q = function (s) { return root.querySelector(s); };
  var bubble = q('.sbw-bubble'), panel = q('.sbw-panel'), log = q('.sbw-log'), status = q('.sbw-status'),
    typing = q('.sbw-typing'), suggest = q('.sbw-suggest'), form = q('.sbw-form'), input = q('.sbw-input'),
    restart = q('.sbw-restart'), agentName = q('.sbw-who');
  q('.sbw-title').textContent = title;
  panel.setAttribute('aria-label', title);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function scroll() { log.scrollTop = log.scrollHeight; }
  function line(who, text, extra) {
    var m = el('div', 'sbw-msg sbw-' + who);
    m.appendChild(el('div', 'sbw-text', text));
    if (extra) for (var k in extra) m.setAttribute(k, extra[k]);
    log.appendChild(m);
    scroll();
    return m;
  }
  function note(text) { line('note', text); }
  function setStatus(text) { status.textContent = text || ''; }
  function showTyping(on) { typing.hidden = !on; if (on) scroll(); }

  function attachments(m, list) {
    (list || []).forEach(function (a) {
      if (!a || typeof a !== 'object') return;
      var url = safeUrl(a.content_url), img = safeUrl(a.preview_image_url);
      var box = el('div', 'sbw-att');
      if (a.content_type === 'ATTACHMENT_CONTENT_TYPE_IMAGE' && (url || img)) {
        var i = el('img'); i.src = url || img; i.alt = a.title || ''; box.appendChild(i);
      } else if (img) { var p = el('img'); p.src = img; p.alt = ''; box.appendChild(p); }
      if (url) {
        var l = el('a', '', a.call_to_action_text || a.title || url);
        l.href = url; l.target = '_blank'; l.rel = 'noopener noreferrer';
        box.appendChild(l);
      } else if (a.title) box.appendChild(el('span', '', a.title));
      m.appendChild(box);
    });
  }
  function safeUrl(u) { return typeof u === 'string' && /^https?:\/\//i.test(u) ? u : ''; }

  function suggestions(list) {
    suggest.textContent = '';
    (list || []).forEach(function (s) {
      var text = typeof s === 'string' ? s : s && s.message_text;
      if (!text) return;
      var b = el('button', 'sbw-chip', text);
      b.type = 'button';
      b.addEventListener('click', function () { send(text); });
      suggest.appendChild(b);
    });
  }

  // ---- events ----
  // Renders one event; `live` is false while the stored history is redrawn (no transient effects).
  function render(e, live) {
    var p = e.payload || {}, t = (e.type || '').slice(P.length);
    switch (t) {
      case 'USER_MESSAGE':
        var c = e.metadata && e.metadata.custom && e.metadata.custom.client_event_id;
        var mine = c && log.querySelector('[data-cid="' + cssEsc(c) + '"]');
        if (mine) mine.classList.remove('sbw-pending');
        else line('user', p.text);
        if (c) delete pending[c];
        suggestions([]);
        break;
      case 'SERVICE_AGENT_MESSAGE':
      case 'LIVE_AGENT_MESSAGE':
        showTyping(false);
        var m = line(t === 'LIVE_AGENT_MESSAGE' ? 'live' : 'agent', p.text || '');
        attachments(m, p.attachments);
        suggestions(p.response_suggestions);
        break;
      case 'SERVICE_AGENT_MESSAGE_CHUNK':
        showTyping(false);
        var id = String(p.message_id || '');
        var b = log.querySelector('[data-mid="' + cssEsc(id) + '"]');
        if (!b) b = line('agent', '', { 'data-mid': id });
        b.firstChild.textContent += p.text || '';
        if (p.is_complete) { b.setAttribute('data-complete', ''); attachments(b, p.attachments); suggestions(p.response_suggestions); }
        scroll();
        break;
      case 'SERVICE_AGENT_JOINED': agentName.textContent = p.agent_name || ''; break;
      case 'SERVICE_AGENT_THINKING': if (live) showTyping(true); break;
      case 'SERVICE_AGENT_TRIGGERED_HANDOFF': setStatus('Connecting you to a person…'); break;
      case 'HANDOFF_ACCEPTED': setStatus('Waiting for a person to join…'); break;
      case 'HANDOFF_QUEUE_STATUS':
        setStatus(p.position_in_queue ? 'You are number ' + p.position_in_queue + ' in the queue' : 'Waiting for a person to join…');
        break;
      case 'CLIENT_HANDOFF_REQUIRED': setStatus('Transferring you to ' + (p.queue_name || 'a person') + '…'); break;
      case 'HANDOFF_FAILED': setStatus(''); note('We could not connect you to a person.'); break;
      case 'HANDOFF_TIMEOUT': setStatus(''); note('Nobody was available to take the conversation.'); break;
      case 'LIVE_AGENT_JOINED':
        var who = (p.agent && p.agent.name) || 'An agent';
        agentName.textContent = who;
        setStatus('');
        note(who + ' joined the conversation');
        root.setAttribute('data-state', 'live');
        break;
      case 'LIVE_AGENT_TYPING': if (live) showTyping(p.state === 'TYPING_STATE_STARTED'); break;
      case 'LIVE_AGENT_LEFT': showTyping(false); note((agentName.textContent || 'The agent') + ' left the conversation'); root.removeAttribute('data-state'); break;
      case 'SYSTEM_MESSAGE':
        if (live) { showTyping(false); if (p.level !== 'SYSTEM_MESSAGE_LEVEL_INFO' || p.message) line('system', p.message || ''); }
        break;
      case 'SESSION_END': finish(); break;
    }
  }
  function cssEsc(s) { return String(s).replace(/["\\]/g, '\\$&'); }

  // A journaled event is kept and drawn once: replays after a reconnect or a reload repeat nothing.
  function receive(e, live) {
    if (e.type === P + 'EVENT_BATCH') { (e.payload.events || []).forEach(function (x) { receive(x, live); }); return; }
    if (typeof e.sequence === 'number') {
      if (e.sequence <= lastSeq()) return;
      st.events.push(e);
      save();
    }
    render(e, live);
  }

  // ---- connection ----
  function post(path, headers) {
    headers['content-type'] = 'application/json';
    return fetch(base + path, { method: 'POST', headers: headers, body: '{}' }).then(function (r) {
      return r.json().then(function (b) { if (!r.ok) throw new Error(b.error || r.status); return b; });
    });
  }
  function start() {
    if (starting) return;
    starting = true;
    setStatus('Connecting…');
    var body = JSON.stringify({ streaming_enabled: streaming, platform: 'web' });
    post('/api/v1/access-token', { 'X-Token': token, 'X-Host': host })
      .then(function (t) {
        st.accessToken = t.access_token;
        return fetch(base + '/api/v1/sessions', { method: 'POST', headers: { Authorization: 'Bearer ' + t.access_token, 'content-type': 'application/json' }, body: body });
      })
      .then(function (r) { return r.json().then(function (b) { if (!r.ok) throw new Error(b.error); return b; }); })
      .then(function (s) { st.sessionId = s.session_id; st.events = []; save(); starting = false; connect(); })
      .catch(function (err) { starting = false; setStatus('Chat unavailable: ' + err.message); });
  }

  function connect() {
    clearTimeout(retryTimer);
    var url = base.replace(/^http/, 'ws') + '/ws?session_id=' + encodeURIComponent(st.sessionId) +
      '&access_token=' + encodeURIComponent(st.accessToken) + '&cursor=' + lastSeq();
    var s = (ws = new WebSocket(url)), opened = false;
    s.onopen = function () {
      opened = true; attempts = 0; renewed = false; setStatus(''); root.setAttribute('data-connected', '');
      if (!ended) restart.hidden = true;
      clearInterval(beat);
      beat = setInterval(function () { out('HEARTBEAT', {}); }, 30000);
    };
    s.onmessage = function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (x) { return; }
      receive(e, true);
      if (e.type === P + 'EVENT_BATCH') afterReplay();
    };
    s.onclose = function () {
      if (ws !== s) return;
      ws = null; clearInterval(beat); root.removeAttribute('data-connected');
      if (ended) return;
      // Past the quick attempts: a button, and a slow retry (a deploy must not strand the page).
      if (attempts >= maxAttempts) {
        setStatus('Disconnected.'); restart.textContent = 'Reconnect'; restart.hidden = false;
        retryTimer = setTimeout(connect, 15000);
        return;
      }
      setStatus('Reconnecting…');
      var retry = function () { retryTimer = setTimeout(connect, Math.min(8000, 300 * Math.pow(2, attempts++))); };
      if (opened) return retry();
      // Refused, gateway up: a fresh token for the same session; refused again: it ended, start anew.
      fetch(base + '/healthz').then(function (r) {
        if (!r.ok) return retry();
        if (!renewed) {
          renewed = true;
          return post('/api/v1/access-token', { 'X-Token': token, 'X-Host': host }).then(function (t) { st.accessToken = t.access_token; save(); connect(); }, retry);
        }
        reset();
        note('The previous conversation has ended.');
        if (!panel.hidden) start();
      }, retry);
    };
  }
  function afterReplay() {
    var joined = st.events.some(function (e) { return e.type === P + 'REQUEST_SERVICE_AGENT_JOIN'; });
    if (!joined) out('REQUEST_SERVICE_AGENT_JOIN', {}, cid());
    for (var c in pending) out('USER_MESSAGE', { text: pending[c] }, c); // same id: the server de-duplicates
  }
  function out(type, payload, id) {
    if (!ws || ws.readyState !== 1) return false;
    ws.send(JSON.stringify({ type: P + type, payload: payload, metadata: { custom: id ? { client_event_id: id } : {} } }));
    return true;
  }

  function send(text) {
    text = String(text || '').trim();
    if (!text || ended) return;
    var id = cid();
    pending[id] = text;
    line('user', text, { 'data-cid': id }).classList.add('sbw-pending');
    suggestions([]);
    stopTyping();
    out('USER_MESSAGE', lang ? { text: text, language_code: lang } : { text: text }, id);
  }
  function stopTyping() {
    clearTimeout(typingTimer);
    if (typingOn) { typingOn = false; out('USER_TYPING', { state: 'TYPING_STATE_STOPPED' }); }
  }

  function finish() {
    ended = true;
    showTyping(false); setStatus(''); suggestions([]);
    note('The conversation has ended.');
    form.hidden = true; restart.textContent = 'Start a new conversation'; restart.hidden = false;
    // Focus moves from the hidden End button.
    if (panel.contains(document.activeElement) || document.activeElement === document.body) restart.focus();
    q('.sbw-end').hidden = true;
    try { sessionStorage.removeItem(KEY); } catch (e) { /* ignore */ }
    clearInterval(beat);
  }
  function reset() {
    st = fresh(); ended = false; pending = {}; attempts = 0;
    try { sessionStorage.removeItem(KEY); } catch (e) { /* ignore */ }
    log.textContent = ''; setStatus(''); suggestions([]); agentName.textContent = '';
    form.hidden = false; restart.hidden = true; q('.sbw-end').hidden = false;
    root.removeAttribute('data-state');
  }

  // ---- controls ----
  function open(on) {
    panel.hidden = !on;
    bubble.setAttribute('aria-expanded', String(on));
    bubble.setAttribute('aria-label', on ? 'Close chat' : 'Open chat');
    st.open = on;
    if (st.sessionId) save();
    if (on) {
      if (!st.sessionId) start();
      input.focus();
      scroll();
    } else bubble.focus();
  }
  bubble.addEventListener('click', function () { open(panel.hidden); });
  addEventListener('online', function () { if (!ws && !ended && st.sessionId) { attempts = 0; connect(); } });
  q('.sbw-close').addEventListener('click', function () { open(false); });
  panel.addEventListener('keydown', function (e) { if (e.key === 'Escape') open(false); });
  q('.sbw-end').addEventListener('click', function () { if (!out('USER_END_SESSION', {}, cid())) { finish(); } });
  restart.addEventListener('click', function () {
    restart.hidden = true;
    // Gave up reconnecting: try the same session again (a refused one starts afresh); after the end, a new one.
    if (!ended && st.sessionId) { attempts = 0; connect(); return input.focus(); }
    if (ws) { var s = ws; ws = null; s.close(); }
    reset(); start(); input.focus();
  });
  form.addEventListener('submit', function (e) { e.preventDefault(); send(input.value); input.value = ''; });
  input.addEventListener('input', function () {
    if (!input.value) return stopTyping();
    if (!typingOn) typingOn = out('USER_TYPING', { state: 'TYPING_STATE_STARTED' });
    clearTimeout(typingTimer);
    typingTimer = setTimeout(stopTyping, 3000);
  });

  // A stored conversation (a reload) is drawn from storage, then continued from its cursor.
  if (st.sessionId) {
    var old = st.events;
    old.forEach(function (e) { render(e, false); });
    if (!ended) { if (st.open) open(true); connect(); }
  }
  window.__switchboardWidget = { open: function () { open(true); }, state: function () { return st; } };
})();
