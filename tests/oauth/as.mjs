#!/usr/bin/env node
// OAuth 2.1 / OpenID authorization server for mcpgate's upstream-OAuth integration tests,
// built on panva's oidc-provider 9 (see README.md in this folder).
//
//   node tests/oauth/as.mjs CONFIG.json
//
// Listens on 127.0.0.1 (port 0 unless CONFIG has "port"), issuer http://127.0.0.1:PORT, prints ONE
// JSON line {"issuer":"http://127.0.0.1:PORT"} on stdout once ready, and runs until SIGTERM/SIGINT
// or until stdin (when it is a pipe) closes. Diagnostics go to stderr only.
//
// What it adds on top of oidc-provider: static clients from CONFIG, RFC 8707 resources (JWT access
// tokens, aud = resource, scope limited to the resource's), refresh tokens without offline_access,
// PKCE S256 required, open dynamic client registration, /.well-known/oauth-authorization-server,
// its own browserless login/consent pages (/interaction/:uid), an RFC 8693 token-exchange grant,
// and loopback test hooks under /test/ (revoke an account, delay the token endpoint, list token
// requests, add resources at run time).
import * as fs from 'node:fs';
import * as http from 'node:http';
import { randomBytes } from 'node:crypto';

// oidc-provider prints notices with console.info (stdout) and warns about Node 20 at import time:
// keep stdout for the one JSON line, so route console output to stderr before importing it.
console.log = console.info = console.warn = console.error;
const { default: Provider, errors } = await import('oidc-provider');
const { generateKeyPair, exportJWK, createLocalJWKSet, jwtVerify } = await import('jose');

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TT_JWT = 'urn:ietf:params:oauth:token-type:jwt';
const TT_ACCESS = 'urn:ietf:params:oauth:token-type:access_token';

if (!process.argv[2]) {
  console.error('usage: node tests/oauth/as.mjs CONFIG.json');
  process.exit(2);
}
const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const ttl = config.access_token_ttl ?? 60;
const resources = { ...config.resources }; // resource URL (may contain '*') -> { scope }
const sts = config.sts ?? {};
const words = (s) => (s ?? '').split(' ').filter(Boolean);

// ---- test-hook state ------------------------------------------------------------------------
const tokenRequests = []; // {grant_type, client_id, resource, audience, scope, at} - never secrets
let tokenDelayMs = 0;

// ---- storage: an in-memory adapter that can also drop everything of one account -------------
const store = new Map(); // `${model}:${id}` -> { payload, expiresAt }
class TestAdapter {
  constructor(model) { this.model = model; }
  key(id) { return `${this.model}:${id}`; }
  get(key) {
    const e = store.get(key);
    if (e && e.expiresAt < Date.now()) { store.delete(key); return undefined; }
    return e?.payload;
  }
  findBy(pred) {
    for (const key of store.keys()) {
      if (!key.startsWith(`${this.model}:`)) continue;
      const p = this.get(key);
      if (p && pred(p)) return p;
    }
    return undefined;
  }
  async upsert(id, payload, expiresIn) {
    // +15 s: oidc-provider's clock tolerance; the models check exp themselves.
    const expiresAt = expiresIn ? Date.now() + (expiresIn + 15) * 1000 : Infinity;
    store.set(this.key(id), { payload, expiresAt });
  }
  async find(id) { return this.get(this.key(id)); }
  async findByUid(uid) { return this.findBy((p) => p.uid === uid); }
  async consume(id) {
    const p = this.get(this.key(id));
    if (p) p.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id) { store.delete(this.key(id)); }
  async revokeByGrantId(grantId) {
    for (const [key, e] of store) {
      if (key.startsWith(`${this.model}:`) && e.payload.grantId === grantId) store.delete(key);
    }
  }
}

// Drops the account's grants, sessions and every token/code issued under those grants.
function revokeAccount(accountId) {
  const grantIds = new Set();
  let removed = 0;
  for (const [key, e] of store) {
    if (e.payload.accountId !== accountId) continue;
    if (e.payload.grantId) grantIds.add(e.payload.grantId);
    if (key.startsWith('Grant:')) grantIds.add(key.slice('Grant:'.length));
    store.delete(key);
    removed += 1;
  }
  for (const [key, e] of store) {
    if (e.payload.grantId && grantIds.has(e.payload.grantId)) { store.delete(key); removed += 1; }
  }
  return removed;
}

// ---- resources (RFC 8707) -------------------------------------------------------------------
function findResource(indicator) {
  if (Object.hasOwn(resources, indicator)) return resources[indicator];
  for (const [pattern, value] of Object.entries(resources)) {
    if (!pattern.includes('*')) continue;
    const re = new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')}$`);
    if (re.test(indicator)) return value;
  }
  return undefined;
}

function targetError(indicator) {
  return new errors.InvalidTarget(`unknown resource indicator: ${indicator}`);
}

// The resource's scope, narrowed to the client's registered "scope" when it has one.
function resourceServerInfo(indicator, client) {
  const r = findResource(indicator);
  if (!r) throw targetError(indicator);
  let scope = words(r.scope);
  if (client?.scope) scope = scope.filter((s) => words(client.scope).includes(s));
  return {
    scope: scope.join(' '), audience: indicator, accessTokenTTL: ttl, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
  };
}

// RFC 6749 3.3 lets an AS use a default when `scope` is omitted (oidc-provider itself refuses an
// authorization with no scope as access_denied, and gives client_credentials tokens no scope): a
// request naming known resource(s) but no scope gets all their scopes, narrowed to the client's
// registered "scope". Undefined when there is nothing to default to.
async function defaultScope(clientId, indicators) {
  const all = new Set();
  for (const indicator of indicators) {
    const r = findResource(indicator);
    if (!r) return undefined;
    words(r.scope).forEach((x) => all.add(x));
  }
  const client = clientId ? await provider.Client.find(clientId).catch(() => undefined) : undefined;
  const list = [...all].filter((x) => !client?.scope || words(client.scope).includes(x));
  return list.length ? list.join(' ') : undefined;
}

// ---- static clients ---------------------------------------------------------------------------
function clientMetadata(c) {
  const grantTypes = c.grant_types ?? ['authorization_code'];
  return {
    ...c,
    grant_types: grantTypes,
    redirect_uris: c.redirect_uris ?? [],
    response_types: c.response_types ?? (grantTypes.includes('authorization_code') ? ['code'] : []),
    token_endpoint_auth_method: c.token_endpoint_auth_method ?? (c.client_secret ? 'client_secret_basic' : 'none'),
  };
}

// Scopes oidc-provider knows as its own ("static"): client and DCR "scope" metadata may only use
// these, so every scope named by a resource or a client is one.
const scopes = new Set(['openid', 'offline_access']);
for (const r of Object.values(resources)) words(r.scope).forEach((s) => scopes.add(s));
for (const c of config.clients ?? []) words(c.scope).forEach((s) => scopes.add(s));

// ---- RFC 8693 token exchange --------------------------------------------------------------------
function grantError(description, detail) {
  const err = new errors.InvalidGrant(detail ? { detail } : undefined);
  err.error_description = description;
  return err;
}

async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  if (client.clientAuthMethod === 'none') {
    throw new errors.InvalidClient('token exchange requires an authenticated client');
  }
  if (!params.subject_token) throw new errors.InvalidRequest('missing required parameter: subject_token');
  if (![TT_JWT, TT_ACCESS].includes(params.subject_token_type)) {
    throw new errors.InvalidRequest('subject_token_type must be urn:ietf:params:oauth:token-type:jwt or :access_token');
  }
  if (params.requested_token_type && params.requested_token_type !== TT_ACCESS) {
    throw new errors.InvalidRequest('only access tokens can be requested');
  }
  const target = params.resource ?? params.audience;
  if (!target) throw new errors.InvalidTarget('resource or audience is required');
  if (params.resource && params.audience && !findResource(params.audience)) throw targetError(params.audience);
  const info = resourceServerInfo(target, client);

  let subject;
  try {
    if (!sts.subject_jwks_file) throw new Error('sts.subject_jwks_file is not configured');
    const jwks = createLocalJWKSet(JSON.parse(fs.readFileSync(sts.subject_jwks_file, 'utf8')));
    ({ payload: subject } = await jwtVerify(params.subject_token, jwks, {
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      ...(sts.subject_issuer ? { issuer: sts.subject_issuer } : {}),
    }));
  } catch (e) {
    console.error(`as: token exchange: subject_token rejected: ${e.code ?? ''} ${e.message}`);
    throw grantError(`subject_token is invalid: ${e.message}`, e.message);
  }
  if (typeof subject.sub !== 'string' || !subject.sub) throw grantError('subject_token has no sub');

  // No scope requested: everything the resource allows this client; otherwise the intersection.
  const allowed = words(info.scope);
  const scope = (params.scope ? words(params.scope).filter((s) => allowed.includes(s)) : allowed).join(' ');

  const at = new ctx.oidc.provider.AccessToken({ accountId: subject.sub, client, gty: TOKEN_EXCHANGE, scope: scope || undefined });
  at.resourceServer = new ctx.oidc.provider.ResourceServer(target, info);
  ctx.oidc.entity('AccessToken', at);
  const accessToken = await at.save();
  ctx.body = {
    access_token: accessToken, issued_token_type: TT_ACCESS, token_type: 'Bearer', expires_in: at.expiration, scope,
  };
}

// ---- small HTTP helpers -------------------------------------------------------------------------
async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
function page(title, body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body>`
    + `<h1>${esc(title)}</h1>${body}</body></html>`;
}
function basicClientId(header) {
  const m = /^basic\s+(.+)$/i.exec(header ?? '');
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const user = decoded.includes(':') ? decoded.slice(0, decoded.indexOf(':')) : decoded;
  try { return decodeURIComponent(user.replace(/\+/g, ' ')); } catch { return user; }
}
function json(ctx, status, body) {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(body);
}

// ---- interactions (login + consent), browserless ---------------------------------------------
// GET /interaction/:uid shows one of two pages; each has forms with stable ids for consent.mjs:
//   login page:   <form id="login" action=".../login"> (field "login" = user name) and <form id="deny">
//   consent page: <form id="consent" action=".../confirm"> and <form id="deny" action=".../abort">
async function interaction(ctx, provider) {
  const m = /^\/interaction\/([^/]+)(?:\/(login|confirm|abort))?$/.exec(ctx.path);
  if (!m) { ctx.status = 404; return; }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.uid !== m[1]) throw new errors.SessionNotFound('interaction uid mismatch');
  const { prompt, params, session } = details;
  const action = m[2];
  let result;
  if (!action && ctx.method === 'GET') {
    const deny = `<form id="deny" method="post" action="/interaction/${esc(details.uid)}/abort"><button>Deny</button></form>`;
    const info = `<p>client: <code>${esc(params.client_id)}</code>; scope: <code>${esc(params.scope)}</code>; `
      + `resource: <code>${esc([].concat(params.resource ?? []).join(' '))}</code></p>`;
    ctx.type = 'text/html';
    ctx.body = prompt.name === 'login'
      ? page('Sign in', `${info}<form id="login" method="post" action="/interaction/${esc(details.uid)}/login">`
        + `<input name="login" placeholder="user name" autofocus><button>Sign in</button></form>${deny}`)
      : page('Authorize', `${info}<p>user: <code>${esc(session?.accountId)}</code></p>`
        + `<form id="consent" method="post" action="/interaction/${esc(details.uid)}/confirm"><button>Allow</button></form>${deny}`);
    return;
  }
  if (ctx.method !== 'POST' || !action) { ctx.status = 405; return; }
  const form = new URLSearchParams((await readBody(ctx.req)).toString('utf8'));
  if (action === 'login') {
    const login = form.get('login');
    if (prompt.name !== 'login' || !login) throw new errors.InvalidRequest('expected a login (user name)');
    result = { login: { accountId: login } };
  } else if (action === 'confirm') {
    if (prompt.name !== 'consent') throw new errors.InvalidRequest('no consent pending');
    const { details: missing } = prompt;
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, s] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, s.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  } else {
    result = { error: 'access_denied', error_description: 'End-User denied the authorization' };
  }
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, {
    mergeWithLastSubmission: action !== 'login',
  });
  ctx.status = 303; // set first so that ctx.redirect keeps it
  ctx.redirect(returnTo);
}

// ---- test hooks -----------------------------------------------------------------------------
async function testHook(ctx) {
  const path = ctx.path;
  if (ctx.method === 'POST' && path === '/test/revoke') {
    const account = ctx.query.account;
    if (!account) return json(ctx, 400, { error: 'account is required' });
    return json(ctx, 200, { account, removed: revokeAccount(account) });
  }
  if (ctx.method === 'POST' && path === '/test/delay') {
    tokenDelayMs = Math.max(0, Number(ctx.query.ms) || 0);
    return json(ctx, 200, { ms: tokenDelayMs });
  }
  if (ctx.method === 'GET' && path === '/test/requests') return json(ctx, 200, tokenRequests);
  if (ctx.method === 'POST' && path === '/test/resources') {
    // Body: {"<resource URL>": {"scope": "..."}}, merged into "resources" (scopes added at run time
    // are not "static" scopes: clients cannot register them in their "scope" metadata).
    Object.assign(resources, JSON.parse((await readBody(ctx.req)).toString('utf8') || '{}'));
    return json(ctx, 200, resources);
  }
  return json(ctx, 404, { error: 'unknown test hook' });
}

// Records (without secrets) and optionally delays every token-endpoint request; true when it
// answered the request itself. The body is read here and handed to oidc-provider as req.body,
// which it accepts in place of the raw stream (it warns once on stderr).
async function tokenEndpoint(ctx) {
  const raw = await readBody(ctx.req);
  const form = new URLSearchParams(ctx.is('application/x-www-form-urlencoded') ? raw.toString('utf8') : '');
  const one = (name) => {
    const all = form.getAll(name);
    return all.length === 0 ? null : all.length === 1 ? all[0] : all;
  };
  tokenRequests.push({
    grant_type: one('grant_type'),
    client_id: one('client_id') ?? basicClientId(ctx.get('authorization')) ?? null,
    resource: one('resource'),
    audience: one('audience'),
    scope: one('scope'),
    at: Date.now(),
  });
  ctx.req.body = raw;
  if (one('grant_type') === 'client_credentials' && !form.has('scope') && form.has('resource')) {
    const scope = await defaultScope(one('client_id') ?? basicClientId(ctx.get('authorization')), form.getAll('resource'));
    if (scope) {
      form.set('scope', scope);
      ctx.req.body = Buffer.from(form.toString());
    }
  }
  if (tokenDelayMs > 0) await new Promise((resolve) => { setTimeout(resolve, tokenDelayMs); });

  // oidc-provider rotates (consumes) a refresh token BEFORE it resolves `resource`, so a refresh
  // asking for a resource the grant does not cover would burn the token, and its next use would
  // be taken for a replay that revokes the whole grant. Refuse such requests here instead, leaving
  // the refresh token usable (as RFC 6749 expects of a failed request).
  if (one('grant_type') === 'refresh_token' && form.has('resource')) {
    const rt = store.get(`RefreshToken:${form.get('refresh_token')}`)?.payload;
    const granted = [].concat(rt?.resource ?? []);
    if (rt && !rt.consumed && form.getAll('resource').some((r) => !granted.includes(r))) {
      json(ctx, 400, { error: 'invalid_target', error_description: 'resource indicator was not granted' });
      ctx.set('cache-control', 'no-store');
      return true;
    }
  }
  return false;
}

// ---- start --------------------------------------------------------------------------------------
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(config.port ?? 0, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: `as-${randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  adapter: TestAdapter,
  clients: (config.clients ?? []).map(clientMetadata),
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: [...scopes],
  responseTypes: ['code'], // OAuth 2.1: no implicit / hybrid
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  interactions: { url: async (_ctx, i) => `/interaction/${i.uid}` },
  pkce: { required: () => true },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: config.rotate_refresh_tokens ?? true,
  expiresWithSession: async () => false,
  ttl: {
    AccessToken: ttl, ClientCredentials: ttl, AuthorizationCode: 120, IdToken: 3600, Interaction: 600,
    RefreshToken: 86400, Session: 86400, Grant: 86400,
  },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: true, initialAccessToken: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, indicator, client) => resourceServerInfo(indicator, client),
    },
  },
});
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
  'subject_token', 'subject_token_type', 'actor_token', 'actor_token_type',
  'requested_token_type', 'resource', 'audience', 'scope',
]);
// The OAuth errors' details (e.g. why a grant is invalid) are not sent to clients: log them.
provider.on('server_error', (_ctx, err) => console.error('as: server_error', err));
for (const event of ['grant.error', 'authorization.error', 'registration_create.error', 'revocation.error']) {
  provider.on(event, (_ctx, err) => console.error(`as: ${event}: ${err.error}: ${err.error_description ?? ''} ${err.error_detail ?? ''}`));
}

provider.use(async (ctx, next) => {
  if (ctx.path.startsWith('/test/')) return testHook(ctx);
  if (ctx.path.startsWith('/interaction/')) return interaction(ctx, provider);
  if (ctx.path === '/.well-known/oauth-authorization-server') ctx.path = '/.well-known/openid-configuration';
  if (ctx.path === '/token' && ctx.method === 'POST' && await tokenEndpoint(ctx)) return undefined;
  if (ctx.path === '/auth' && ctx.method === 'GET' && !ctx.query.scope && ctx.query.resource) {
    const query = new URLSearchParams(ctx.querystring);
    const scope = await defaultScope(query.get('client_id'), query.getAll('resource'));
    if (scope) { query.set('scope', scope); ctx.querystring = query.toString(); }
  }
  return next();
});
server.on('request', provider.callback());

process.stdout.write(`${JSON.stringify({ issuer })}\n`);

const stop = () => { server.close(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
try {
  const st = fs.fstatSync(0);
  if (st.isFIFO() || st.isSocket()) process.stdin.on('end', stop).on('close', stop).resume();
} catch { /* no stdin */ }
