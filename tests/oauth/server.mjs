#!/usr/bin/env node
// OAuth-protected MCP server for mcpgate's upstream-OAuth integration tests, on the official
// TypeScript SDK 1.32.2 (see README.md in this folder).
//
//   node tests/oauth/server.mjs --issuer ISSUER [--scope mcp:tools] [--port 0]
//
// Serves Streamable HTTP (stateful sessions) at /mcp and legacy HTTP+SSE at /sse + /messages on
// 127.0.0.1, prints ONE JSON line {"url":"http://127.0.0.1:PORT/mcp","sse":"http://127.0.0.1:PORT/sse"}
// on stdout once ready, and runs until SIGTERM/SIGINT or until stdin (when it is a pipe) closes.
//
// Every request to /mcp (POST, GET, DELETE), /sse and /messages needs a bearer JWT from ISSUER
// (checked with the SDK's requireBearerAuth): signature against the issuer's JWKS (jwks_uri from
// its discovery, fetched on first use), typ at+jwt, iss, exp, aud equal to that endpoint's own
// resource URL (http://127.0.0.1:PORT/mcp, resp. /sse, so a token for one is refused by the
// other) and the --scope scopes (space separated; --scope "" requires none; default mcp:tools).
// RFC 9728 metadata: /.well-known/oauth-protected-resource/mcp and .../sse.
// Tools: whoami (JSON {sub, client_id, aud, scope} of the token carrying this call), echo {text}.
// Test hooks (no auth): GET /test/calls, GET /test/rejections. Token values are never recorded.
import * as fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import express from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError, ServerError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';

const { values: args } = parseArgs({
  options: {
    issuer: { type: 'string' },
    scope: { type: 'string', default: 'mcp:tools' },
    port: { type: 'string', default: '0' },
  },
});
if (!args.issuer) {
  console.error('usage: node tests/oauth/server.mjs --issuer ISSUER [--scope mcp:tools] [--port 0]');
  process.exit(2);
}
const issuer = args.issuer.replace(/\/$/, '');
const requiredScopes = args.scope.split(' ').filter(Boolean);

const calls = []; // {tool, sub, client_id, aud, transport, mcp_session}
const rejections = []; // {path, method, status, reason}

// ---- token verification -------------------------------------------------------------------------
let jwksPromise;
function issuerJwks() {
  jwksPromise ??= (async () => {
    const res = await fetch(`${issuer}/.well-known/oauth-authorization-server`);
    if (!res.ok) throw new Error(`issuer discovery answered ${res.status}`);
    const { jwks_uri: jwksUri } = await res.json();
    return createRemoteJWKSet(new URL(jwksUri), { cooldownDuration: 1000 });
  })().catch((e) => { jwksPromise = undefined; throw e; });
  return jwksPromise;
}

function verifierFor(resource) {
  return {
    async verifyAccessToken(token) {
      let jwks;
      try {
        jwks = await issuerJwks();
      } catch (e) {
        throw new ServerError(`cannot load the issuer's keys: ${e.message}`);
      }
      let claims;
      try {
        ({ payload: claims } = await jwtVerify(token, jwks, {
          issuer, audience: resource, typ: 'at+jwt', requiredClaims: ['exp'],
        }));
      } catch (e) {
        // No double quotes: the SDK puts this text unescaped into WWW-Authenticate's quoted string.
        throw new InvalidTokenError(`${e.code ?? 'ERR'}: ${e.message}`.replace(/"/g, "'"));
      }
      return {
        token,
        clientId: claims.client_id,
        scopes: (claims.scope ?? '').split(' ').filter(Boolean),
        expiresAt: claims.exp,
        resource: new URL(resource),
        extra: { claims },
      };
    },
  };
}

// requireBearerAuth, plus a record of every request it refuses (reason = the OAuth error).
function protect(resource) {
  const check = requireBearerAuth({
    verifier: verifierFor(resource),
    requiredScopes,
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(new URL(resource)),
    expectedResource: new URL(resource),
  });
  return (req, res, next) => {
    const json = res.json.bind(res);
    res.json = (body) => {
      rejections.push({
        path: req.path,
        method: req.method,
        status: res.statusCode,
        reason: `${body?.error}: ${body?.error_description}`,
      });
      return json(body);
    };
    check(req, res, () => { res.json = json; next(); });
  };
}

// ---- MCP ------------------------------------------------------------------------------------------
function buildServer(transport, sessionId) {
  const server = new McpServer({ name: 'oauth-fixture', version: '1.0.0' });
  const record = (tool, extra) => {
    const c = extra.authInfo?.extra?.claims ?? {};
    calls.push({ tool, sub: c.sub, client_id: c.client_id, aud: c.aud, transport, mcp_session: sessionId() ?? null });
    return c;
  };
  server.registerTool('whoami', { description: 'Claims of the access token that carried this call' }, async (extra) => {
    const c = record('whoami', extra);
    const text = JSON.stringify({ sub: c.sub, client_id: c.client_id, aud: c.aud, scope: c.scope });
    return { content: [{ type: 'text', text }] };
  });
  server.registerTool('echo', { description: 'Echoes text', inputSchema: { text: z.string() } }, async ({ text }, extra) => {
    record('echo', extra);
    return { content: [{ type: 'text', text }] };
  });
  return server;
}

const app = express();
const httpServer = await new Promise((resolve, reject) => {
  const s = app.listen(Number(args.port), '127.0.0.1', (err) => (err ? reject(err) : resolve(s)));
});
const base = `http://127.0.0.1:${httpServer.address().port}`;
const mcpResource = `${base}/mcp`;
const sseResource = `${base}/sse`;

for (const resource of [mcpResource, sseResource]) {
  app.get(new URL(getOAuthProtectedResourceMetadataUrl(new URL(resource))).pathname, (_req, res) => {
    res.json({
      resource,
      authorization_servers: [issuer],
      scopes_supported: requiredScopes,
      bearer_methods_supported: ['header'],
    });
  });
}
app.get('/test/calls', (_req, res) => res.json(calls));
app.get('/test/rejections', (_req, res) => res.json(rejections));

// Streamable HTTP, stateful: one McpServer + transport per Mcp-Session-Id.
const sessions = new Map();
app.post('/mcp', protect(mcpResource), express.json(), async (req, res) => {
  const sid = req.headers['mcp-session-id'];
  let transport = sid ? sessions.get(sid) : undefined;
  if (!transport) {
    if (sid || !isInitializeRequest(req.body)) {
      res.status(sid ? 404 : 400).json({
        jsonrpc: '2.0', id: null,
        error: { code: -32000, message: sid ? 'Session not found' : 'Bad Request: no valid session ID' },
      });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { sessions.set(id, transport); },
    });
    transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
    await buildServer('http', () => transport.sessionId).connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});
const existingSession = async (req, res) => {
  const transport = sessions.get(req.headers['mcp-session-id']);
  if (!transport) { res.status(404).send('Session not found'); return; }
  await transport.handleRequest(req, res);
};
app.get('/mcp', protect(mcpResource), existingSession);
app.delete('/mcp', protect(mcpResource), existingSession);

// Legacy HTTP+SSE: GET /sse opens the stream, POST /messages?sessionId=... carries requests.
const sseSessions = new Map();
app.get('/sse', protect(sseResource), async (_req, res) => {
  const transport = new SSEServerTransport('/messages', res);
  sseSessions.set(transport.sessionId, transport);
  res.on('close', () => sseSessions.delete(transport.sessionId));
  await buildServer('sse', () => transport.sessionId).connect(transport);
});
app.post('/messages', protect(sseResource), express.json(), async (req, res) => {
  const transport = sseSessions.get(req.query.sessionId);
  if (!transport) { res.status(404).send('Session not found'); return; }
  await transport.handlePostMessage(req, res, req.body);
});

process.stdout.write(`${JSON.stringify({ url: mcpResource, sse: sseResource })}\n`);

const stop = () => { httpServer.close(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
try {
  const st = fs.fstatSync(0);
  if (st.isFIFO() || st.isSocket()) process.stdin.on('end', stop).on('close', stop).resume();
} catch { /* no stdin */ }
