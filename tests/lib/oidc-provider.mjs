// A real OpenID Connect provider on loopback for tests: the npm package
// oidc-provider (tests/package.json), run in the test's own process.
//
//   const op = await startOidcProvider({ clients: [{ client_id: 'tusko', client_secret: 's',
//     redirect_uris: ['http://127.0.0.1:PORT/api/auth/oidc/callback'] }] });
//   op.issuer                      // http://127.0.0.1:NNNN
//   op.accounts.set('alice', { email: 'alice@example.com', email_verified: true });
//   const { res, jar } = await op.signIn(startUrl, 'alice');   // drives the whole flow
//   await op.stop();
//
// signIn() follows redirects by hand with a cookie jar per origin, logs in and
// consents through oidc-provider's built-in development interaction pages (its
// devInteractions), and stops at the first redirect back to the relying party,
// returning that response unfollowed — so the test controls the callback.
import crypto from 'node:crypto';
import http from 'node:http';
import { once } from 'node:events';

import Provider from 'oidc-provider';

// A key pair as private JWKs: alg 'RS256' (RSA 2048) or 'ES256' (P-256).
export function makeKey(alg, kid = `${alg.toLowerCase()}-${crypto.randomBytes(4).toString('hex')}`) {
  const { privateKey } =
    alg === 'RS256'
      ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 })
      : crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
}

// A tiny cookie jar: origin → name → value (paths and expiry ignored; a cookie
// set with an empty value or Max-Age=0 is dropped).
export class Jar {
  constructor() {
    this.by = new Map();
  }
  store(url, res) {
    const o = new URL(url).origin;
    const m = this.by.get(o) || new Map();
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      if (!value || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) m.delete(name);
      else m.set(name, value);
    }
    this.by.set(o, m);
  }
  header(url) {
    const m = this.by.get(new URL(url).origin);
    return m ? [...m].map(([n, v]) => `${n}=${v}`).join('; ') : '';
  }
  get(url, name) {
    const m = this.by.get(new URL(url).origin);
    return m && m.get(name);
  }
}

// fetch without following redirects, carrying the jar's cookies for that origin.
export async function hop(jar, url, init = {}) {
  const headers = { ...(init.headers || {}) };
  const c = jar.header(url);
  if (c) headers.cookie = c;
  const res = await fetch(url, { ...init, headers, redirect: 'manual' });
  jar.store(url, res);
  return res;
}

export async function startOidcProvider({ port = 0, clients, keys, ttlIdToken = 600 } = {}) {
  const accounts = new Map();
  const server = http.createServer();
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const jwks = { keys: keys || [makeKey('RS256'), makeKey('ES256')] };
  const provider = new Provider(issuer, {
    clients,
    jwks,
    cookies: { keys: [crypto.randomBytes(16).toString('hex')] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    ttl: { IdToken: ttlIdToken },
    async findAccount(ctx, id) {
      const a = accounts.get(id) || {};
      return {
        accountId: id,
        async claims() {
          return { sub: id, ...a };
        },
      };
    },
  });
  provider.on('server_error', (ctx, err) => console.error('oidc-provider server_error', err));
  // the token endpoint's requests, for assertions
  const tokenRequests = [];
  provider.on('grant.success', (ctx) => tokenRequests.push({ client: ctx.oidc.client && ctx.oidc.client.clientId }));
  server.on('request', provider.callback());

  async function signIn(startUrl, login, { jar = new Jar(), consent = true } = {}) {
    let res = await hop(jar, startUrl);
    for (let i = 0; i < 20; i++) {
      if (res.status < 300 || res.status >= 400) return { res, jar };
      const loc = new URL(res.headers.get('location'), res.url || startUrl).toString();
      if (!loc.startsWith(issuer)) return { res, jar, location: loc }; // back to the relying party
      const uid = loc.match(/\/interaction\/([^/?#]+)/);
      if (uid) {
        const page = await hop(jar, loc);
        const html = await page.text();
        const body = new URLSearchParams();
        if (/name="prompt" value="login"/.test(html)) {
          body.set('prompt', 'login');
          body.set('login', login);
          body.set('password', 'any');
        } else if (/name="prompt" value="consent"/.test(html)) {
          if (!consent) {
            res = await hop(jar, `${issuer}/interaction/${uid[1]}/abort`);
            continue;
          }
          body.set('prompt', 'consent');
        } else {
          throw new Error(`unexpected interaction page: ${html.slice(0, 500)}`);
        }
        res = await hop(jar, `${issuer}/interaction/${uid[1]}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: body.toString(),
        });
        continue;
      }
      res = await hop(jar, loc);
    }
    throw new Error('too many redirects');
  }

  return {
    issuer,
    provider,
    accounts,
    jwks,
    tokenRequests,
    signIn,
    port: server.address().port,
    async stop() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
