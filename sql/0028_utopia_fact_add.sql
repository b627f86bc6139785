-- A fact is recorded in one round trip, as the agent's steps are (0016):
-- utopia_fact_add is the transaction kg.c ran statement by statement. C still
-- validates and normalises everything (names, predicate, dates); this file
-- only reads and writes. See docs/UTOPIA.md.

-- A fact as the API shows it (one definition for kg.c's queries and below).
CREATE FUNCTION utopia_fact_json(f utopia_facts, subject text) RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'id', f.id, 'subject', subject, 'subject_id', f.subject_id,
        'predicate', f.predicate, 'object', f.object, 'object_id', f.object_id,
        'valid_from', utopia_date_text(f.valid_from, f.valid_from_precision),
        'valid_from_precision', f.valid_from_precision,
        'valid_to', utopia_date_text(f.valid_to, f.valid_to_precision),
        'recorded_at', utopia_date_text(f.recorded_at, 'second'),
        'current', f.valid_to IS NULL,
        'source', json_strip_nulls(json_build_object('chat_id', f.source_chat_id,
                                                     'turn_id', f.source_turn_id,
                                                     'document_id', f.source_document_id)))
$$;

-- The entity a normalised name (p_norm) means for p_user; when there is none
-- and p_create, a new one (id p_new, named p_name). Creation of one name is
-- serialised by an advisory lock held to the end of the transaction.
CREATE FUNCTION utopia_entity_resolve(p_user uuid, p_name text, p_norm text, p_create boolean,
                                      p_new uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    found_id uuid;
BEGIN
    SELECT a.entity_id INTO found_id FROM utopia_aliases a
        WHERE a.user_id = p_user AND a.norm = p_norm;
    IF FOUND OR NOT p_create THEN
        RETURN found_id;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_user::text || '/' || p_norm, 7));
    SELECT a.entity_id INTO found_id FROM utopia_aliases a
        WHERE a.user_id = p_user AND a.norm = p_norm;
    IF FOUND THEN
        RETURN found_id;
    END IF;
    INSERT INTO utopia_entities (id, user_id, name) VALUES (p_new, p_user, p_name);
    INSERT INTO utopia_aliases (user_id, norm, alias, entity_id)
        VALUES (p_user, p_norm, p_name, p_new);
    RETURN p_new;
END
$$;

-- Records a fact of p_user and returns {fact, duplicate, closed, alias_conflicts,
-- single}. The subject (p_subject_name, normalised p_subject_norm; p_subject as
-- given, for the search vector) is found or made (id p_subject_new), with the
-- aliases p_aliases ([[name, norm], ...]); one that already names another
-- entity is returned in alias_conflicts. The object p_object (normalised
-- p_object_norm) is linked to an entity by p_object_ent_name/_norm when
-- p_object_mode is 'find' (if one exists) or 'create' (made if needed, id
-- p_object_new); 'none' keeps it a value. Cardinality (single): p_builtin_single
-- unless the user declared it (p_declared, the first declaration kept in
-- utopia_predicates). Dates: p_from ('-infinity' for unknown) with p_from_prec,
-- p_to (NULL: open) with p_to_prec, as C formatted them. Then, one writer per
-- (subject, predicate) timeline (an advisory lock):
--   - the same statement open at p_from: a duplicate (duplicate true), nothing
--     added; with p_to ("no longer") it is closed there, never before it starts;
--   - else the fact p_id is added; for a single-valued predicate it closes the
--     fact in force at p_from (closed: their ids), and without p_to it ends where
--     a later fact already recorded begins (closed by that one).
-- fact is the fact (the duplicate, or the new one) as utopia_fact_json shows it.
CREATE FUNCTION utopia_fact_add(p_user uuid, p_id uuid, p_subject text, p_subject_name text,
                                p_subject_norm text, p_subject_new uuid, p_aliases json,
                                p_pred text, p_declared boolean, p_builtin_single boolean,
                                p_object text, p_object_norm text, p_object_mode text,
                                p_object_ent_name text, p_object_ent_norm text,
                                p_object_new uuid, p_from text, p_from_prec text, p_to text,
                                p_to_prec text, p_chat uuid, p_turn uuid, p_document uuid,
                                p_fts text) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    subj_id uuid;
    obj_id uuid;
    single boolean := p_builtin_single;
    declared boolean;
    duplicate boolean := false;
    same uuid;
    next_id uuid;
    to_ts timestamptz := p_to::timestamptz;
    to_prec text := p_to_prec;
    next_prec text;
    al json;
    conflicts text[] := '{}';
    closed_ids uuid[] := '{}';
    shown uuid;
    fact json;
BEGIN
    subj_id := utopia_entity_resolve(p_user, p_subject_name, p_subject_norm, true, p_subject_new);
    FOR al IN SELECT a.value FROM json_array_elements(coalesce(p_aliases, '[]')) a LOOP
        INSERT INTO utopia_aliases (user_id, norm, alias, entity_id)
            VALUES (p_user, al->>1, al->>0, subj_id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            PERFORM 1 FROM utopia_aliases a
                WHERE a.user_id = p_user AND a.norm = al->>1 AND a.entity_id = subj_id;
            IF NOT FOUND THEN
                conflicts := conflicts || (al->>0);
            END IF;
        END IF;
    END LOOP;
    IF p_object_mode <> 'none' THEN
        obj_id := utopia_entity_resolve(p_user, p_object_ent_name, p_object_ent_norm,
                                     p_object_mode = 'create', p_object_new);
    END IF;
    IF p_declared IS NOT NULL THEN
        INSERT INTO utopia_predicates VALUES (p_user, p_pred, p_declared) ON CONFLICT DO NOTHING;
    END IF;
    SELECT p.single INTO declared FROM utopia_predicates p
        WHERE p.user_id = p_user AND p.name = p_pred;
    IF FOUND THEN
        single := declared;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_user::text || subj_id::text || p_pred, 9));

    SELECT f.id INTO same FROM utopia_facts f
        WHERE f.user_id = p_user AND f.subject_id = subj_id AND f.predicate = p_pred
          AND (f.object_id = obj_id OR (obj_id IS NULL AND f.object_id IS NULL
                                     AND lower(f.object) = p_object_norm))
          AND (f.valid_to IS NULL OR f.valid_to > p_from::timestamptz OR p_from = '-infinity')
        ORDER BY f.valid_from DESC LIMIT 1;
    IF FOUND THEN
        duplicate := true;
        IF p_to IS NOT NULL THEN /* "no longer": close it */
            UPDATE utopia_facts f
               SET valid_to = greatest(to_ts, f.valid_from), valid_to_precision = to_prec
             WHERE f.id = same AND f.valid_to IS NULL;
            closed_ids := closed_ids || same;
        END IF;
        shown := same;
    ELSE
        IF single AND p_from <> '-infinity' THEN
            /* close the fact in force at the new start */
            WITH c AS (
                UPDATE utopia_facts f
                   SET valid_to = p_from::timestamptz, valid_to_precision = p_from_prec,
                       closed_by = p_id
                 WHERE f.id = (SELECT o.id FROM utopia_facts o
                                WHERE o.user_id = p_user AND o.subject_id = subj_id
                                  AND o.predicate = p_pred
                                  AND o.valid_from <= p_from::timestamptz
                                  AND (o.valid_to IS NULL OR o.valid_to > p_from::timestamptz)
                                ORDER BY o.valid_from DESC LIMIT 1)
                RETURNING f.id)
            SELECT coalesce(array_agg(c.id), '{}') INTO closed_ids FROM c;
            /* a later fact already recorded ends this one where it starts */
            IF p_to IS NULL THEN
                SELECT f.id, date_trunc('milliseconds', f.valid_from), f.valid_from_precision
                  INTO next_id, to_ts, next_prec
                  FROM utopia_facts f
                 WHERE f.user_id = p_user AND f.subject_id = subj_id AND f.predicate = p_pred
                   AND f.valid_from > p_from::timestamptz
                 ORDER BY f.valid_from LIMIT 1;
                IF FOUND THEN
                    to_prec := CASE WHEN next_prec IN ('day', 'month', 'year') THEN next_prec
                                    ELSE 'second' END;
                END IF;
            END IF;
        END IF;
        INSERT INTO utopia_facts (id, user_id, subject_id, predicate, object_id, object,
                                  valid_from, valid_from_precision, valid_to, valid_to_precision,
                                  source_chat_id, source_turn_id, source_document_id, closed_by,
                                  tsv)
            VALUES (p_id, p_user, subj_id, p_pred, obj_id, p_object, p_from::timestamptz, p_from_prec,
                    to_ts, to_prec, p_chat, p_turn, p_document, next_id,
                    to_tsvector(p_fts::regconfig,
                                p_subject || ' ' || replace(p_pred, '_', ' ') || ' ' || p_object));
        shown := p_id;
    END IF;
    SELECT utopia_fact_json(f, s.name) INTO fact
        FROM utopia_facts f JOIN utopia_entities s ON s.id = f.subject_id
        WHERE f.id = shown AND f.user_id = p_user;
    RETURN json_build_object('fact', fact, 'duplicate', duplicate, 'closed', to_json(closed_ids),
                             'alias_conflicts', to_json(conflicts), 'single', single);
END
$$;
