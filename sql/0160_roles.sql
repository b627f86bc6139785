-- locks: users
-- Roles (docs/ADMIN.md): every account is an 'admin' or a 'user'. An admin
-- reaches /api/admin/...; the server checks the role on every such request.
-- disabled_at: a disabled account cannot sign in, and its sessions and API
-- tokens stop working (the credential lookups join on it). last_seen_at: when
-- a credential of the account was last looked up (at most every
-- APP_AUTH_CACHE_S per credential). Adding columns with constant defaults
-- rewrites nothing; the CHECK is NOT VALID (every existing row is 'user').

ALTER TABLE users ADD COLUMN role text NOT NULL DEFAULT 'user';
ALTER TABLE users ADD CONSTRAINT users_role CHECK (role IN ('admin', 'user')) NOT VALID;
ALTER TABLE users ADD COLUMN disabled_at timestamptz;
ALTER TABLE users ADD COLUMN last_seen_at timestamptz;

-- An install that had accounts before roles: its oldest account is the admin.
UPDATE users SET role = 'admin'
 WHERE id = (SELECT id FROM users ORDER BY created_at, id LIMIT 1);

-- Creates an account. It is an admin when asked (p_admin: `tusko user add
-- --admin`) or when no admin exists yet: the first account of an install.
-- The advisory lock makes "no admin exists yet" true for one creation only,
-- whatever runs at once (it is held to the end of the caller's transaction).
-- Returns the role given.
CREATE FUNCTION tusko_user_insert(p_id uuid, p_email text, p_hash text, p_name text,
                                  p_admin boolean) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_role text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('tusko.users.first_admin'));
    v_role := CASE WHEN p_admin OR NOT EXISTS (SELECT 1 FROM users u WHERE u.role = 'admin')
                   THEN 'admin' ELSE 'user' END;
    INSERT INTO users (id, email, password_hash, name, role)
        VALUES (p_id, p_email, p_hash, p_name, v_role);
    RETURN v_role;
END $$;
