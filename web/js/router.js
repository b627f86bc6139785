// A small router: a path names a view of the signed-in app, the browser's
// history holds the way there (links, the back and forward buttons, a reload
// open the same view). A view is {show(params, path), hide()}; the router
// shows the one whose pattern matches the location, hiding the one before.
//
//   const router = new Router(fallback);
//   router.add('/c/:id', chatView);        // params.id; a segment is [^/]+
//   router.go('/c/…');                     // a step in the history, then shown
//   router.go('/', { replace: true });     // instead of the current entry
//   router.go(path, { quiet: true });      // the URL only (the view is there)
//   router.start();                        // the location now, and popstate
//   router.stop();                         // signed out: the view hidden
export class Router {
  constructor(fallback) {
    this.routes = []; // [{re, names, view}]
    this.fallback = fallback; // shown (at '/') when no pattern matches
    this.view = null;
    this.path = null;
    this.onchange = null; // (view, path) after a view is shown
  }

  add(pattern, view) {
    const names = [];
    const src = pattern.replace(/:([a-z]+)/g, (_, n) => {
      names.push(n);
      return '([^/]+)';
    });
    this.routes.push({ re: new RegExp(`^${src}$`), names, view });
    return this;
  }

  // The view and params for a path, or null.
  match(path) {
    for (const r of this.routes) {
      const m = r.re.exec(path);
      if (m) return { view: r.view, params: Object.fromEntries(r.names.map((n, i) => [n, decodeURIComponent(m[i + 1])])) };
    }
    return null;
  }

  go(path, { replace = false, quiet = false } = {}) {
    if (path !== location.pathname) {
      if (replace) history.replaceState(null, '', path);
      else history.pushState(null, '', path);
    }
    if (!quiet) this.show();
    else this.path = path;
  }

  // Shows the view of the current location.
  show() {
    let path = location.pathname;
    let m = this.match(path);
    if (!m) {
      path = '/';
      history.replaceState(null, '', path);
      m = this.match(path) || { view: this.fallback, params: {} };
    }
    if (this.view && this.view !== m.view) this.view.hide();
    this.view = m.view;
    this.path = path;
    m.view.show(m.params, path);
    if (this.onchange) this.onchange(m.view, path);
  }

  // Follows the location (signed in); stop() until the next start (signed out).
  start() {
    if (!this.listening) window.addEventListener('popstate', () => this.on && this.show());
    this.listening = true;
    this.on = true;
    this.show();
  }

  stop() {
    this.on = false;
    if (this.view) this.view.hide();
    this.view = null;
  }
}
