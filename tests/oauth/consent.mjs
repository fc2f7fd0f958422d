#!/usr/bin/env node
// Drives a user through as.mjs's login and consent pages with plain HTTP (no browser), for
// mcpgate's upstream-OAuth integration tests (see README.md in this folder).
//
//   node tests/oauth/consent.mjs --url AUTH_OR_START_URL --user NAME --stop-at PREFIX
//                                [--deny] [--no-follow-callback]
//
// GETs --url (an AS authorize URL, or a gateway URL that redirects to one), follows redirects by
// hand with its own cookie jar (browser-like: cookies are per host name, not per port, and honour
// Path / Max-Age / Expires), signs in as NAME on the login page, then allows (or with --deny
// refuses: the AS then redirects with error=access_denied) on the consent page, and follows
// redirects until a URL starts with PREFIX (the gateway's callback). It then GETs that callback
// (with the jar's cookies; redirects from the callback are not followed) and prints ONE line:
//   {"callback":"<full callback URL>","status":<status>,"body":"<first 2000 chars>"}
// plus "location" when the callback answered with a redirect. With --no-follow-callback it
// prints {"callback":"<full callback URL>"} without requesting it.
// When no callback is reached it prints {"error":"...","url":...,"status":...,"body":...} and
// exits 1 (e.g. the AS showed an error page for a bad client_id or redirect_uri).
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    user: { type: 'string' },
    'stop-at': { type: 'string' },
    deny: { type: 'boolean', default: false },
    'no-follow-callback': { type: 'boolean', default: false },
  },
});
if (!args.url || !args.user || !args['stop-at']) {
  console.error('usage: node tests/oauth/consent.mjs --url URL --user NAME --stop-at PREFIX [--deny] [--no-follow-callback]');
  process.exit(2);
}
const MAX_STEPS = 40;
const out = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

// ---- cookie jar -----------------------------------------------------------------------------------
const jar = new Map(); // `${hostname} ${path} ${name}` -> { hostname, path, name, value, expires }
function defaultPath(url) {
  const p = url.pathname;
  return p.lastIndexOf('/') > 0 ? p.slice(0, p.lastIndexOf('/')) : '/';
}
function storeCookies(url, res) {
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attrs] = line.split(';').map((s) => s.trim());
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const cookie = { hostname: url.hostname, path: defaultPath(url), name: pair.slice(0, eq), value: pair.slice(eq + 1), expires: Infinity };
    for (const attr of attrs) {
      const [k, ...v] = attr.split('=');
      const value = v.join('=');
      switch (k.toLowerCase()) {
        case 'path': if (value.startsWith('/')) cookie.path = value; break;
        case 'max-age': cookie.expires = Date.now() + Number(value) * 1000; break;
        case 'expires': if (cookie.expires === Infinity) cookie.expires = Date.parse(value); break;
        default: break;
      }
    }
    const key = `${cookie.hostname} ${cookie.path} ${cookie.name}`;
    if (cookie.expires <= Date.now()) jar.delete(key);
    else jar.set(key, cookie);
  }
}
function cookieHeader(url) {
  const pathMatches = (p) => url.pathname === p || url.pathname.startsWith(p.endsWith('/') ? p : `${p}/`);
  return [...jar.values()]
    .filter((c) => c.hostname === url.hostname && c.expires > Date.now() && pathMatches(c.path))
    .sort((a, b) => b.path.length - a.path.length)
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');
}

async function request(href, { method = 'GET', form } = {}) {
  const url = new URL(href);
  try {
    return await send(url, method, form);
  } catch (e) { // connection refused, reset, ...: report it as the one JSON line
    out({ error: `request failed: ${e.cause?.code ?? e.cause?.errors?.[0]?.code ?? e.cause?.message ?? e.message}`, url: href });
    process.exit(1);
  }
}
async function send(url, method, form) {
  const headers = {};
  const cookie = cookieHeader(url);
  if (cookie) headers.cookie = cookie;
  if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
  const res = await fetch(url, { method, headers, body: form ? new URLSearchParams(form).toString() : undefined, redirect: 'manual' });
  storeCookies(url, res);
  return res;
}

// The forms as.mjs renders: <form id="login|consent|deny" method="post" action="...">.
function forms(html) {
  const found = {};
  for (const [tag] of html.matchAll(/<form\b[^>]*>/gi)) {
    const id = /\bid="([^"]*)"/i.exec(tag)?.[1];
    const action = /\baction="([^"]*)"/i.exec(tag)?.[1];
    if (id && action) found[id] = action.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))).replace(/&amp;/g, '&');
  }
  return found;
}

// ---- walk -------------------------------------------------------------------------------------------
let next = { href: args.url, method: 'GET' };
let callback;
for (let step = 0; step < MAX_STEPS && !callback; step += 1) {
  if (next.href.startsWith(args['stop-at'])) { callback = next.href; break; }
  const res = await request(next.href, next);
  const location = res.headers.get('location');
  if (res.status >= 300 && res.status < 400 && location) {
    next = { href: new URL(location, next.href).href, method: 'GET' };
    continue;
  }
  const body = await res.text();
  const f = forms(body);
  if (res.status === 200 && f.login && !f.consent) {
    next = { href: new URL(f.login, next.href).href, method: 'POST', form: { login: args.user } };
  } else if (res.status === 200 && f.consent && f.deny) {
    next = { href: new URL(args.deny ? f.deny : f.consent, next.href).href, method: 'POST', form: {} };
  } else {
    out({ error: 'no callback reached', url: next.href, status: res.status, body: body.slice(0, 2000) });
    process.exit(1);
  }
}
if (!callback) {
  out({ error: `no callback after ${MAX_STEPS} steps`, url: next.href });
  process.exit(1);
}

if (args['no-follow-callback']) {
  out({ callback });
} else {
  const res = await request(callback);
  const body = await res.text();
  const result = { callback, status: res.status, body: body.slice(0, 2000) };
  if (res.headers.get('location')) result.location = res.headers.get('location');
  out(result);
}
