// The JSON API (docs/API.md): fetch with the session cookie, the CSRF header
// on writes, and errors as ApiError {status, code, message}.

let csrf = null;
let onUnauthorized = () => {};

export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || `HTTP_${status}`;
    this.body = body;
  }
}

export function setCsrf(token) {
  csrf = token || null;
}

export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

function csrfToken() {
  if (csrf) return csrf;
  // the non-HttpOnly double-submit cookie set at sign-in
  const m = document.cookie.match(/(?:^|;\s*)(?:__Host-)?tusko_csrf=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : null;
}

// api('/api/sessions', { method: 'POST', json: {...} }) → parsed JSON (or null)
export async function api(path, { method = 'GET', json, body, headers = {}, signal, raw = false } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (json !== undefined) {
    h['Content-Type'] = 'application/json';
    body = JSON.stringify(json);
  }
  if (method !== 'GET' && method !== 'HEAD') {
    const t = csrfToken();
    if (t) h['X-CSRF-Token'] = t;
  }
  let res;
  try {
    res = await fetch(path, { method, headers: h, body, signal, credentials: 'same-origin' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'NETWORK', 'the server cannot be reached; check your connection and try again');
  }
  if (raw && res.ok) return res;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data && data.code, (data && data.message) || text.slice(0, 300) || res.statusText, data);
    if (res.status === 401 && !path.startsWith('/api/auth/')) onUnauthorized(err);
    throw err;
  }
  return data;
}
