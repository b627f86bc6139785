-- Credentials, stored only as SHA-256 hashes of 256-bit random secrets.

-- Personal API tokens (`tusko token create`), sent as Authorization: Bearer.
CREATE TABLE api_tokens (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL UNIQUE,
    name text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    expires_at timestamptz        -- NULL: until deleted
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- Server-side sign-in sessions, referenced by the session cookie.
CREATE TABLE web_sessions (
    token_hash bytea PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token text NOT NULL,     -- sent back in X-CSRF-Token on writes
    method text NOT NULL,         -- 'password' or 'oidc'
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    client_ip text,
    user_agent text
);
CREATE INDEX web_sessions_user ON web_sessions (user_id);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);

-- OpenID Connect sign-ins in progress (between /oidc/start and /oidc/callback),
-- shared by every instance. browser_hash binds the flow to the browser that
-- started it (a cookie), so a callback URL cannot be replayed in another browser.
CREATE TABLE oidc_flows (
    state_hash bytea PRIMARY KEY,
    browser_hash bytea NOT NULL,
    code_verifier text NOT NULL,
    nonce text NOT NULL,
    return_to text NOT NULL DEFAULT '/',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX oidc_flows_expires ON oidc_flows (expires_at);
