// Tusko's web UI: boots, signs in, and wires the pieces together.
//   router.js    path → view: the chat (/, /c/{id}), memory, schedules, settings (VIEWS below)
//   schedules.js the Schedules page: create with a preview, history, pause/resume/run now
//   sidebar.js   chats: new, rename, delete, search; the links to the other views
//   chat.js      the conversation, from the session's event stream (events.js folds it)
//   composer.js  the message box, model picker, skills menu, uploads
//   panel.js     side panel tabs: files.js (Files, with snapshots.js), trace.js (Trace), memory.js (Memory)
//   ui.js        toast, confirm dialog, lane badge, file preview (for every module)
// No framework and no build step: ES modules served from the binary.
import { api, ApiError, setCsrf, setUnauthorizedHandler } from './api.js';
import { ChatView } from './chat.js';
import { Composer } from './composer.js';
import { FilesView } from './files.js';
import { $, h, icon } from './html.js';
import { MemoryView } from './memory.js';
import { Panel } from './panel.js';
import { Router } from './router.js';
import { SchedulesView } from './schedules.js';
import { SettingsView } from './settings.js';
import { AdminView } from './admin.js';
import { Sidebar } from './sidebar.js';
import { initTheme } from './theme.js';
import { TraceView } from './trace.js';
import { toast } from './ui.js';

const state = { me: null, models: [], agent: null, session: null, config: null };
let chat, composer, sidebar, panel, files, trace, memory, router;

// ---------- sign-in ----------

async function showSignIn(message) {
  document.body.dataset.view = 'signin';
  const form = $('#signin-form');
  const err = $('#signin-error');
  err.textContent = message || '';
  err.hidden = !message;
  try {
    state.config = state.config || (await api('/api/auth/config'));
  } catch {
    state.config = { password: true, oidc: false };
  }
  const sso = $('#sso');
  sso.hidden = !state.config.oidc;
  const back = location.pathname !== '/' && router.match(location.pathname) ? `?return_to=${encodeURIComponent(location.pathname)}` : '';
  if (state.config.oidc_start) sso.href = state.config.oidc_start + back;
  form.hidden = state.config.password === false;
  const params = new URLSearchParams(location.search);
  if (params.get('error')) {
    err.textContent = `Sign-in failed: ${params.get('error_description') || params.get('error')}`;
    err.hidden = false;
  }
  $('#email').focus();
}

async function signIn(e) {
  e.preventDefault();
  const btn = $('#signin-submit');
  const err = $('#signin-error');
  btn.disabled = true;
  err.hidden = true;
  try {
    const r = await api('/api/auth/login', { method: 'POST', json: { email: $('#email').value, password: $('#password').value } });
    setCsrf(r.csrf_token);
    $('#password').value = '';
    await start();
  } catch (ex) {
    err.textContent = ex.status === 401 ? 'Wrong email or password.' : ex.message;
    err.hidden = false;
  } finally {
    btn.disabled = false;
  }
}

async function signOut() {
  try {
    await api('/api/auth/logout', { method: 'POST' });
  } catch {
    /* signed out either way */
  }
  setCsrf(null);
  router.stop();
  chat.reset(null);
  history.replaceState(null, '', '/');
  showSignIn();
}

// ---------- the app ----------

async function start() {
  let me;
  try {
    me = await api('/api/me');
  } catch (e) {
    if (e.status === 401) return showSignIn();
    return fatal(e);
  }
  state.me = me;
  setCsrf(me.csrf_token);
  document.body.dataset.view = 'app';
  $('#me').textContent = me.email || 'API token';
  $('#nav-admin').hidden = me.role !== 'admin';
  executionBanner(me.execution);
  let agent;
  try {
    // what the agent's event stream and tools are (the chat follows the one, shows the other)
    agent = await api('/api/agent');
  } catch (e) {
    return fatal(e);
  }
  state.agent = agent;
  chat.configure(agent);
  const [models] = await Promise.all([api('/api/models').catch(() => ({ models: [] })), sidebar.load().catch(toast)]);
  state.models = models.models || [];
  composer.setModels(state.models, me.default_model || models.default);
  router.start();
}

function fatal(e) {
  document.body.dataset.view = 'fatal';
  $('#fatal-message').textContent = e.message;
}

function executionBanner(ex) {
  const b = $('#exec-banner');
  if (!ex || ex.enabled) {
    b.hidden = true;
    return;
  }
  const missing = ex.missing || [];
  const names = missing.flatMap((m, i) => [i ? ', ' : '', h('code', { text: m })]);
  b.replaceChildren(
    icon('lock'),
    h(
      'div.long',
      {},
      h('strong', { text: 'Execution is off. ' }),
      'The agent can talk, plan and look things up, but cannot write files or run code: this server has no sandbox service configured',
      missing.length ? [' (missing: ', ...names, ')'] : '',
      '. An operator sets them in the server’s environment.',
    ),
    h('div.short', {}, h('strong', { text: 'Execution is off' }), missing.length ? [': set ', ...names.map((n) => (n instanceof Node ? n.cloneNode(true) : n))] : ''),
  );
  b.hidden = false;
}

// ---------- the views ----------
//
// A view is {show(params, path), hide()} on a <section class="view"> of
// index.html, named by a path in VIEWS, with a link in the sidebar's
// "Pages" nav when it is not the chat. Schedules, skills and admin add theirs
// the same way: a section, a module with the view, a line here, a link there,
// and the path in the server's list of pages (src/app/web.c).

// Shows one view's section (and marks its sidebar link); the chat's own
// controls (the side panel) go with the chat.
function showSection(name) {
  for (const el of document.querySelectorAll('#main > .view')) el.hidden = el.id !== `view-${name}`;
  document.body.dataset.page = name;
  for (const a of document.querySelectorAll('#side-nav a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  closeDrawer();
}

let navSeq = 0; // the last navigation (an answer for an earlier one is stale)

const chatView = {
  show(params) {
    showSection('chat');
    if (params.id) openSession(params.id);
    else newChat();
  },
  hide() {
    navSeq++;
    chat.reset(null);
    state.session = null;
    sidebar.select(null);
    files.setSession(null);
    trace.reset();
    panel.close();
  },
};

// A page of its own: its section, a title, the focus on its heading.
function pageView(name, title, shown) {
  return {
    show() {
      showSection(name);
      document.title = `${title} · Tusko`;
      $(`#view-${name} h1`).focus();
      shown();
    },
    hide() {},
  };
}

function newChat() {
  navSeq++;
  state.session = null;
  chat.reset(null);
  chat.showEmpty(welcome());
  sidebar.select(null);
  files.setSession(null);
  trace.reset();
  composer.setModel(state.me && state.me.default_model);
  document.title = 'Tusko';
  composer.focus();
}

function welcome() {
  return h(
    'div.welcome',
    {},
    h('div.logo', {}, icon('tusko')),
    h('h1', { text: 'What should we work on?' }),
    h('p', { text: 'Talking, planning and looking things up run in the chat server. A sandbox starts only when a tool has to write or run something.' }),
  );
}

async function openSession(id) {
  const nav = ++navSeq;
  let s;
  try {
    s = await api(`/api/sessions/${encodeURIComponent(id)}`);
  } catch (e) {
    if (nav !== navSeq) return;
    if (e.status === 404) {
      toast('That chat does not exist (or is not yours).');
      return router.go('/', { replace: true });
    }
    return toast(e);
  }
  if (nav !== navSeq) return;
  state.session = s;
  document.title = `${s.title} · Tusko`;
  sidebar.upsert(s);
  sidebar.select(id);
  composer.setModel(s.model || (state.me && state.me.default_model));
  files.setSession(id);
  trace.reset();
  chat.open(id);
  composer.focus();
}

async function send(text, model) {
  let s = state.session;
  const pending = chat.addPending(text);
  if (!s) {
    // the chat is created with its first message, titled by it
    try {
      const title = text.split('\n')[0].replace(/\s+/g, ' ').trim().slice(0, 80) || 'New chat';
      s = await api('/api/sessions', { method: 'POST', json: { title, model: model || undefined } });
    } catch (e) {
      return chat.pendingFailed(pending, e);
    }
    state.session = s;
    router.go(`/c/${s.id}`, { quiet: true }); // (the chat is on screen already)
    document.title = `${s.title} · Tusko`;
    sidebar.upsert(s);
    sidebar.select(s.id);
    files.setSession(s.id);
    chat.open(s.id, { pending });
  }
  composer.setBusy(true);
  try {
    await api(`/api/sessions/${s.id}/messages`, { method: 'POST', json: { content: text, model: model || undefined } });
  } catch (e) {
    composer.setBusy(false);
    chat.pendingFailed(pending, e);
  }
}

async function stop() {
  if (!state.session) return;
  try {
    await api(`/api/sessions/${state.session.id}/cancel`, { method: 'POST' });
  } catch (e) {
    toast(e);
  }
}

async function changeModel(id) {
  if (!state.session) return;
  try {
    state.session = await api(`/api/sessions/${state.session.id}`, { method: 'PATCH', json: { model: id } });
  } catch (e) {
    toast(e);
  }
}

// ---------- uploads ----------

async function upload(fileList) {
  if (document.body.dataset.page !== 'chat') return;
  if (!state.session) {
    toast('Send a first message, then drop files into the chat: they go to its /workspace.');
    return;
  }
  const sid = state.session.id;
  for (const f of fileList) {
    const chip = h('div.upload-chip', {}, icon('upload'), h('span', { text: `${f.name} · uploading…` }));
    $('#uploads').append(chip);
    try {
      const r = await api(`/api/sessions/${sid}/files/upload?path=${encodeURIComponent(`/workspace/${f.name}`)}`, { method: 'PUT', body: f, headers: { 'Content-Type': 'application/octet-stream' } });
      chip.lastChild.textContent = `${f.name} · in ${r && r.path ? r.path.replace(/\/[^/]*$/, '') || '/workspace' : '/workspace'}`;
      chip.classList.add('ok');
      files.changed();
    } catch (e) {
      chip.lastChild.textContent = `${f.name}: ${e.status === 405 || e.message === 'no such endpoint' ? 'uploads are not available on this server yet' : e.message}`;
      chip.classList.add('failed');
    }
    setTimeout(() => chip.remove(), 6000);
  }
}

function initDrop() {
  const zone = $('#main');
  let depth = 0;
  // (dropped on a page that is not the chat, a file is taken and ignored: not opened by the browser)
  const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes('Files');
  zone.addEventListener('dragenter', (e) => {
    if (!hasFiles(e) || document.body.dataset.page !== 'chat') return;
    depth++;
    document.body.classList.add('dropping');
  });
  zone.addEventListener('dragleave', () => {
    if (--depth <= 0) {
      depth = 0;
      document.body.classList.remove('dropping');
    }
  });
  zone.addEventListener('dragover', (e) => {
    if (hasFiles(e)) e.preventDefault();
  });
  zone.addEventListener('drop', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth = 0;
    document.body.classList.remove('dropping');
    upload([...e.dataTransfer.files]);
  });
}

// ---------- layout ----------

function closeDrawer() {
  document.body.classList.remove('drawer-open');
  $('#menu-toggle').setAttribute('aria-expanded', 'false');
}

function initLayout() {
  $('#menu-toggle').addEventListener('click', () => {
    const open = document.body.classList.toggle('drawer-open');
    $('#menu-toggle').setAttribute('aria-expanded', String(open));
    if (open) $('#search').focus();
  });
  $('#scrim').addEventListener('click', () => {
    closeDrawer();
    if (matchMedia('(max-width: 1099px)').matches) panel.close();
  });
  $('#panel-toggle').addEventListener('click', () => panel.toggle());
  $('#signout').addEventListener('click', signOut);
  document.addEventListener('keydown', (e) => {
    const mod = e.ctrlKey || e.metaKey;
    if (mod && e.shiftKey && e.key.toLowerCase() === 'o') {
      e.preventDefault();
      router.go('/');
    } else if (mod && e.key.toLowerCase() === 'k') {
      e.preventDefault();
      document.body.classList.add('drawer-open');
      $('#search').focus();
    } else if (e.key === 'Escape' && document.body.classList.contains('drawer-open')) closeDrawer();
  });
  for (const a of document.querySelectorAll('#side-nav a')) {
    a.addEventListener('click', (e) => {
      if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
      e.preventDefault();
      router.go(a.getAttribute('href'));
    });
  }
}

// The app's views by path (see "the views" above).
function initViews() {
  const memoryPage = new MemoryView();
  $('#view-memory .page-inner').append(memoryPage.el);
  const settings = new SettingsView($('#view-settings .page-inner'), { onSignOut: signOut });
  const adminPage = new AdminView($('#view-admin .page-inner'));
  const schedulesPage = new SchedulesView({ onOpenChat: (id) => router.go(`/c/${id}`), onRunsChanged: () => sidebar.load().catch(toast) });
  $('#view-schedules .page-inner').append(schedulesPage.el);
  const VIEWS = [
    ['/', chatView],
    ['/c/:id', chatView],
    ['/memory', pageView('memory', 'Memory', () => memoryPage.changed())],
    ['/schedules', pageView('schedules', 'Schedules', () => schedulesPage.shown())],
    ['/settings', pageView('settings', 'Settings', () => settings.render(state.me, state.models, state.agent))],
    ['/admin', pageView('admin', 'Admin', () => adminPage.shown(state.me))],
  ];
  router = new Router(chatView);
  for (const [path, view] of VIEWS) router.add(path, view);
}

function init() {
  initTheme($('#theme'));
  setUnauthorizedHandler(() => {
    if (document.body.dataset.view === 'app') {
      router.stop();
      chat.reset(null);
      showSignIn('Your session ended. Sign in again.');
    }
  });
  $('#signin-form').addEventListener('submit', signIn);
  files = new FilesView();
  trace = new TraceView({ latestTurn: () => chat.latestTurn() });
  panel = new Panel($('#panel'));
  panel.addTab('files', 'Files', files);
  panel.addTab('trace', 'Trace', trace);
  memory = new MemoryView();
  panel.addTab('memory', 'Memory', memory);
  let titleTimer = null;
  chat = new ChatView($('#messages'), {
    onTrace: (id) => {
      panel.show('trace');
      trace.show(id);
    },
    onFilesChanged: () => files.changed(),
    onTurnEnd: () => memory.changed(),
    onActive: (busy) => composer && composer.setBusy(busy),
    onRetry: (text) => send(text, composer.model.value || null),
    onTitle: () => {
      clearTimeout(titleTimer);
      titleTimer = setTimeout(() => sidebar.load().catch(() => {}), 500);
    },
  });
  composer = new Composer($('#composer'), { onSend: send, onStop: stop, onUpload: upload, onModel: changeModel });
  sidebar = new Sidebar($('#sidebar'), { onOpen: (id) => router.go(`/c/${id}`), onNew: () => router.go('/'), onDeleted: (id) => state.session && state.session.id === id && router.go('/') });
  initViews();
  initLayout();
  initDrop();
  start().catch(fatal);
}

window.tusko = { state, ApiError }; // for the console and the e2e tests
init();
