-- Sliding-window rate limits shared by every instance: at most p_max events per
-- key in any window of p_window. Each key's check-and-insert runs under a
-- transaction-scoped advisory lock, so a burst from many instances at once
-- cannot overshoot. Refused attempts are not recorded.
CREATE TABLE rate_events (
    key text NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX rate_events_key_at ON rate_events (key, at);

CREATE FUNCTION tusko_rate_take(p_key text, p_max integer, p_window interval,
                                OUT allowed boolean, OUT retry_after_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := clock_timestamp();
    n integer;
    frees timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('tusko_rate:' || p_key, 0));
    DELETE FROM rate_events WHERE key = p_key AND at <= t - p_window;
    SELECT count(*) INTO n FROM rate_events WHERE key = p_key;
    IF n < p_max THEN
        INSERT INTO rate_events (key, at) VALUES (p_key, t);
        allowed := true;
        retry_after_ms := 0;
    ELSE
        -- the next slot frees when the (n - p_max + 1)-th oldest event leaves the window
        SELECT at INTO frees FROM rate_events WHERE key = p_key
            ORDER BY at OFFSET (n - p_max) LIMIT 1;
        allowed := false;
        retry_after_ms := GREATEST(1, ceil(extract(epoch FROM (frees + p_window - t)) * 1000));
    END IF;
    -- now and then, forget keys nobody has used for a day
    IF random() < 0.001 THEN
        DELETE FROM rate_events WHERE at < t - interval '1 day';
    END IF;
END
$$;

-- Forgets a key's events (a successful sign-in clears its account's failures).
CREATE FUNCTION tusko_rate_reset(p_key text) RETURNS void
LANGUAGE sql AS $$ DELETE FROM rate_events WHERE key = p_key $$;
