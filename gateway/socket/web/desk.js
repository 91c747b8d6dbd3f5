/* The live-agent desk page (GET /desk): a client of the desk API (/api/v1/desk, x-api-key of scope live_agent). */
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var key = sessionStorage.getItem('sbdesk:key') || '', name = sessionStorage.getItem('sbdesk:name') || 'Live agent';
  var current = null, after = 0, typingOn = false, typingTimer = null, poll = null, chunks = {};

  function api(method, path, body) {
    return fetch('/api/v1/desk' + path, {
      method: method,
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(function (r) {
      return r.json().then(function (b) { if (!r.ok) throw new Error(b.error || r.status); return b; });
    });
  }
  function el(tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls; if (text != null) e.textContent = text; return e; }
  function fail(err) { $('error').textContent = String(err.message || err); }

  function list(status, ul, label, action) {
    return api('GET', '/sessions?status=' + status).then(function (r) {
      ul.textContent = '';
      if (!r.data.length) ul.appendChild(el('li', 'muted', 'None'));
      r.data.forEach(function (s) {
        var li = el('li');
        li.setAttribute('data-session', s.session_id);
        li.appendChild(el('span', '', s.session_id.slice(0, 16) + (s.live_agent ? ' · ' + s.live_agent.name : '')));
        var b = el('button', '', label);
        b.type = 'button';
        b.setAttribute('aria-label', label + ' ' + s.session_id);
        b.addEventListener('click', function () { action(s.session_id); });
        li.appendChild(b);
        ul.appendChild(li);
      });
    });
  }
  function refresh() {
    return Promise.all([list('waiting', $('waiting'), 'Accept', accept), list('live', $('live'), 'Open', openSession)])
      .then(function () { $('error').textContent = ''; }, fail);
  }

  function accept(id) {
    api('POST', '/sessions/' + id + '/accept', { name: name }).then(function () { openSession(id); refresh(); }, fail);
  }
  function openSession(id) {
    current = id; after = 0; chunks = {};
    $('transcript').textContent = '';
    $('chat-h').textContent = 'Session ' + id;
    $('send').hidden = false;
    pollEvents();
    $('text').focus();
  }
  function line(cls, text) { var m = el('div', 'm ' + cls, text); $('transcript').appendChild(m); $('transcript').scrollTop = 1e9; return m; }
  function show(e) {
    var p = e.payload || {}, t = e.type.replace('EVENT_TYPE_', '');
    if (t === 'USER_MESSAGE') line('user', p.text);
    else if (t === 'SERVICE_AGENT_MESSAGE') line('agent', p.text);
    else if (t === 'SERVICE_AGENT_MESSAGE_CHUNK') {
      if (!chunks[p.message_id]) chunks[p.message_id] = line('agent', '');
      chunks[p.message_id].textContent += p.text || '';
    } else if (t === 'LIVE_AGENT_MESSAGE') line('live', p.text);
    else if (t === 'LIVE_AGENT_JOINED') line('note', (p.agent && p.agent.name) + ' joined');
    else if (t === 'LIVE_AGENT_LEFT') line('note', 'The live agent left');
    else if (t === 'SERVICE_AGENT_TRIGGERED_HANDOFF') line('note', 'Handed off by the agent');
    else if (t === 'SESSION_END') { line('note', 'Session ended'); $('send').hidden = true; }
  }
  var busy = null;
  function pollEvents() {
    if (!current) return Promise.resolve();
    if (busy) return busy.then(pollEvents); // one poll at a time: a second would read the same events again
    var id = current;
    return (busy = Promise.all([api('GET', '/sessions/' + id + '/events?after=' + after), api('GET', '/sessions/' + id)]).then(function (r) {
      if (id !== current) return;
      r[0].events.forEach(show);
      after = r[0].last_sequence;
      $('typing').textContent = r[1].user_typing === 'TYPING_STATE_STARTED' ? 'The visitor is typing…' : '';
    }, fail).then(function () { busy = null; }));
  }
  function typing(state) {
    if (current) api('POST', '/sessions/' + current + '/typing', { state: state }).catch(function () {});
  }

  $('send').addEventListener('submit', function (e) {
    e.preventDefault();
    var text = $('text').value.trim();
    if (!text || !current) return;
    $('text').value = '';
    clearTimeout(typingTimer); typingOn = false;
    api('POST', '/sessions/' + current + '/messages', { text: text }).then(pollEvents, fail);
  });
  $('text').addEventListener('input', function () {
    if (!typingOn) { typingOn = true; typing('TYPING_STATE_STARTED'); }
    clearTimeout(typingTimer);
    typingTimer = setTimeout(function () { typingOn = false; typing('TYPING_STATE_STOPPED'); }, 3000);
  });
  $('leave').addEventListener('click', function () {
    if (!current) return;
    api('POST', '/sessions/' + current + '/leave').then(function () { return pollEvents(); }).then(function () {
      current = null; $('send').hidden = true; refresh();
    }, fail);
  });

  function start() {
    $('login').hidden = true; $('desk').hidden = false; $('who').textContent = name;
    refresh();
    clearInterval(poll);
    poll = setInterval(function () { refresh(); pollEvents(); }, 1000);
  }
  $('login').addEventListener('submit', function (e) {
    e.preventDefault();
    key = $('key').value.trim(); name = $('name').value.trim() || 'Live agent';
    api('GET', '/sessions').then(function () {
      sessionStorage.setItem('sbdesk:key', key); sessionStorage.setItem('sbdesk:name', name);
      start();
    }, function (err) { alert('Sign-in failed: ' + err.message); });
  });
  if (key) start();
})();
