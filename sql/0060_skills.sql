-- Skills a user installed (docs/SKILLS.md): one row a skill, one a version
-- (each upload of a name is a new, immutable version), the files of each
-- version; and a user's choice to enable or disable a skill by its name
-- (their own or a built-in: no row means enabled). Built-in skills live in the
-- binary, not here; their names are refused on upload by the server.

CREATE TABLE skills (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name text NOT NULL CHECK (name ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(name) <= 64),
    version integer NOT NULL CHECK (version >= 1), -- the version in use
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, name)
);

CREATE TABLE skill_versions (
    skill_id uuid NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
    version integer NOT NULL CHECK (version >= 1),
    digest text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    skill_md text NOT NULL,
    bytes bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (skill_id, version)
);

CREATE TABLE skill_files (
    skill_id uuid NOT NULL,
    version integer NOT NULL,
    path text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (skill_id, version, path),
    FOREIGN KEY (skill_id, version) REFERENCES skill_versions (skill_id, version) ON DELETE CASCADE
);

CREATE TABLE skill_settings (
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name text NOT NULL,
    enabled boolean NOT NULL,
    PRIMARY KEY (user_id, name)
);
