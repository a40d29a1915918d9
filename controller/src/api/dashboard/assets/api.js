// The API client. The operator token lives in sessionStorage (this browser
// tab's session) and travels only in the Authorization header: never in a
// URL, never logged.

const KEY = 'pam.token';

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
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
  const headers = { Accept: 'application/json' };
  if (tok) headers.Authorization = `Bearer ${tok}`;
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

export const get = (p) => api('GET', p);
export const post = (p, b) => api('POST', p, b === undefined ? {} : b);
export const enc = encodeURIComponent;
