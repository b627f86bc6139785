-- Alerts after repeated failures (docs/SCHEDULES.md, "Alerts"): a schedule
-- whose last alert_after finished runs all failed or timed out sends one alert
-- to its owner's linked Telegram chat and, with pause_after_alert, is paused
-- (paused_reason says why; resuming clears it). alert_after 0: no alerts.
-- Adding checked columns scans the table:
-- locks: schedules
ALTER TABLE schedules
    ADD COLUMN alert_after integer NOT NULL DEFAULT 3 CHECK (alert_after BETWEEN 0 AND 100),
    ADD COLUMN pause_after_alert boolean NOT NULL DEFAULT false,
    ADD COLUMN paused_reason text CHECK (length(paused_reason) <= 200);

DROP FUNCTION tusko_schedule_create(uuid, uuid, text, text, text, text, text, boolean, text,
                                    timestamptz, integer);
CREATE FUNCTION tusko_schedule_create(p_id uuid, p_user uuid, p_name text, p_prompt text,
                                      p_cron text, p_zone text, p_notify text, p_paused boolean,
                                      p_missed text, p_next timestamptz, p_max integer,
                                      p_alert_after integer, p_pause_after_alert boolean,
                                      OUT outcome text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM users WHERE id = p_user FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    IF (SELECT count(*) FROM schedules WHERE user_id = p_user AND deleted_at IS NULL) >= p_max THEN
        outcome := 'limit';
        RETURN;
    END IF;
    INSERT INTO schedules (id, user_id, name, prompt, cron, zone, notify, paused, missed_policy,
                           next_run_at, alert_after, pause_after_alert)
        VALUES (p_id, p_user, p_name, p_prompt, p_cron, p_zone, p_notify, p_paused, p_missed,
                p_next, p_alert_after, p_pause_after_alert);
    outcome := 'ok';
END
$$;

-- After a run ends failed or timed out: the schedule's finished runs
-- (succeeded, failed, timed_out; newest first) that failed since the last
-- success. Exactly alert_after of them: the alert (once per streak; a longer
-- streak sends no more) and, with pause_after_alert, the pause. Fires after
-- schedule_runs_notify (triggers fire in name order), so the run's own outcome
-- comes first.
CREATE FUNCTION tusko_schedule_run_alert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    s record;
    streak integer;
    paused_now boolean := false;
BEGIN
    SELECT sc.user_id, sc.alert_after, sc.pause_after_alert, sc.paused, sc.zone,
           coalesce(nullif(sc.name, ''), left(sc.prompt, 60)) AS title
        INTO s FROM schedules sc WHERE sc.id = NEW.schedule_id AND sc.deleted_at IS NULL
        FOR UPDATE;
    IF NOT FOUND OR s.alert_after = 0 THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO streak FROM schedule_runs r
        WHERE r.schedule_id = NEW.schedule_id AND r.status IN ('failed', 'timed_out')
          AND r.finished_at > coalesce((SELECT max(ok.finished_at) FROM schedule_runs ok
                                        WHERE ok.schedule_id = NEW.schedule_id
                                          AND ok.status = 'succeeded'), '-infinity');
    IF streak <> s.alert_after THEN
        RETURN NULL;
    END IF;
    IF s.pause_after_alert AND NOT s.paused THEN
        UPDATE schedules SET paused = true, updated_at = now(),
            paused_reason = format('paused after %s failed runs in a row', streak)
            WHERE id = NEW.schedule_id;
        paused_now := true;
    END IF;
    IF EXISTS (SELECT 1 FROM telegram_links l WHERE l.user_id = s.user_id AND l.active) THEN
        INSERT INTO telegram_outbox (user_id, text) VALUES (s.user_id,
            format('Alert: schedule "%s" failed %s times in a row (the last at %s %s).', s.title,
                   streak, to_char(NEW.scheduled_for AT TIME ZONE s.zone, 'YYYY-MM-DD HH24:MI'),
                   s.zone)
            || CASE WHEN paused_now THEN ' It is paused now; resume it in Schedules.' ELSE '' END);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER schedule_runs_notify_alert AFTER UPDATE OF status ON schedule_runs
    FOR EACH ROW WHEN (NEW.status IN ('failed', 'timed_out')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION tusko_schedule_run_alert();
