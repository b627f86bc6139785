-- Accounts: local (password_hash, argon2id) or OpenID Connect (issuer + subject).
CREATE TABLE users (
    id uuid PRIMARY KEY,
    email text NOT NULL,
    password_hash text,
    oidc_issuer text,
    oidc_subject text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (email),
    UNIQUE (oidc_issuer, oidc_subject)
);
