// The API client. The operator token lives in sessionStorage (this browser
// tab's session) and travels only in the Authorization header: never in a
// URL, never logged. Signed in with SSO (issue 34) there is no token: the
// browser sends pamd's HttpOnly session cookie, and every change carries
// the session's CSRF value (the pam_csrf cookie) as X-PAM-CSRF.

const KEY = 'pam.token';

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

/** The SSO session's CSRF value; '' without a session. */
export function csrf() {
  const m = document.cookie.match(/(?:^|;\s*)pam_csrf=([^;]*)/);
  return m ? m[1] : '';
}

/** Signed in: a pasted token or an SSO session. */
export function signedIn() {
  return Boolean(token() || csrf());
}

/** The headers that say who is calling (none for a session: its cookie goes by itself). */
export function authHeaders(tok = token()) {
  return tok ? { Authorization: `Bearer ${tok}` } : {};
}

// whoami's answer: what the buttons and pages shown are chosen by.
let me = null;
export function setMe(m) { me = m; }
export function whoami() { return me; }

const ADMIN_RESOURCES = ['hosts', 'tokens', 'secretkeys', 'sources', 'webhooks', 'webhookdeliveries', 'metrics'];

/**
 * Whether the signed-in role may do `verb` to `resource` (in `project`):
 * whoami's role and projects read the way pamd's authorize reads them.
 * Only what to show: pamd refuses anyway.
 */
export function may(verb, resource, project) {
  if (!me) return true;
  const reads = verb === 'get' || verb === 'list' || verb === 'watch';
  if (me.role === 'admin') return true;
  if (me.role !== 'operator' && me.role !== 'viewer') return false;
  if (ADMIN_RESOURCES.includes(resource)) return resource === 'hosts' && reads;
  if (project && !(me.projects || []).includes(project)) return false;
  if (project && (me.readOnlyProjects || []).includes(project) && !reads) return false;
  return me.role === 'operator' || reads;
}

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** Calls the API; resolves the JSON body, rejects with ApiError. */
export async function api(method, path, body, tok = token()) {
  const headers = { Accept: 'application/json', ...authHeaders(tok) };
  if (!tok && method !== 'GET' && method !== 'HEAD') headers['X-PAM-CSRF'] = csrf();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'network', 'pamd is unreachable');
  }
  if (r.status === 204) return null;
  let json = null;
  try { json = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) {
    const err = json && json.error ? json.error : { code: 'http', message: `HTTP ${r.status}` };
    const e = new ApiError(r.status, err.code, err.message, json && json.errors);
    if (r.status === 401 && tok === token()) window.dispatchEvent(new CustomEvent('pam:unauthorized'));
    throw e;
  }
  return json;
}

/**
 * A GET whose body is read as it arrives (a log or transcript with
 * `follow=true`): resolves the Response once its headers are in, rejects
 * with ApiError (pamd's error body) when the status is not 2xx. `signal`
 * aborts it.
 */
export async function openStream(path, signal, accept = '*/*') {
  let r;
  try {
    r = await fetch(path, { headers: { Accept: accept, ...authHeaders() }, signal, cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'pamd is unreachable');
  }
  if (r.ok) return r;
  let json = null;
  try { json = await r.json(); } catch { /* not JSON */ }
  const err = json && json.error ? json.error : { code: 'http', message: `HTTP ${r.status}` };
  if (r.status === 401) window.dispatchEvent(new CustomEvent('pam:unauthorized'));
  throw new ApiError(r.status, err.code, err.message);
}

export const get = (p) => api('GET', p);
export const post = (p, b) => api('POST', p, b === undefined ? {} : b);
export const enc = encodeURIComponent;
