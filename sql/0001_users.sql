-- Accounts. A user signs in with a local password (password_hash, argon2id in
-- libsodium's crypt format) or through OpenID Connect (user_identities), or both.
CREATE TABLE users (
    id uuid PRIMARY KEY,
    email text UNIQUE,          -- lower-cased; NULL for an OIDC account without one
    password_hash text,         -- NULL: no local sign-in
    name text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (email IS NULL OR email = lower(email))
);

-- OpenID Connect identities: a user is found by (issuer, subject), never by email
-- alone (see docs/AUTH.md, OIDC_LINK_BY_EMAIL).
CREATE TABLE user_identities (
    issuer text NOT NULL,
    subject text NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email text,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user ON user_identities (user_id);
