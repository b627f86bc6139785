-- Skills an admin installs for everyone (docs/SKILLS.md): a shared skill is an
-- admin's skill every user sees (and may disable for themselves); only its
-- owner changes or deletes it. One shared skill a name.
-- The unique index reads the whole table:
-- locks: skills
ALTER TABLE skills ADD COLUMN shared boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX skills_shared_name ON skills (name) WHERE shared;
