//! The PostgreSQL registry's migrations: the SQLite ones (`registry/mod.rs`) in
//! PostgreSQL's types, plus the triggers and functions only PostgreSQL needs.

/// Migrations, in the same order and with the same meaning as the SQLite ones; the
/// table `airlock_migrations` records how many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    "CREATE TABLE namespaces (
        service    TEXT PRIMARY KEY NOT NULL,
        namespace  TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );",
    "CREATE TABLE grants (
        agent      TEXT NOT NULL,
        service    TEXT NOT NULL,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        PRIMARY KEY (agent, service)
    );",
    "CREATE TABLE services (
        id                   BIGSERIAL PRIMARY KEY,
        scope                TEXT NOT NULL CHECK (scope IN ('user', 'project')),
        project              TEXT NOT NULL DEFAULT '',
        name                 TEXT NOT NULL,
        label                TEXT,
        description          TEXT,
        transport            TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
        command              TEXT,
        args                 TEXT NOT NULL DEFAULT '[]',
        cwd                  TEXT,
        env                  TEXT NOT NULL DEFAULT '{}',
        url                  TEXT,
        headers              TEXT NOT NULL DEFAULT '{}',
        auth                 TEXT,
        enabled              BOOLEAN NOT NULL DEFAULT TRUE,
        startup_timeout_secs DOUBLE PRECISION,
        tool_timeout_secs    DOUBLE PRECISION,
        adapters             TEXT,
        adapter_config       TEXT,
        repair               TEXT NOT NULL DEFAULT '[]',
        origin               TEXT,
        created_at           BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        updated_at           BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        UNIQUE (scope, project, name)
    );
    CREATE TABLE catalogs (
        service          TEXT NOT NULL,
        launch_digest    TEXT NOT NULL,
        tested_at        BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        protocol_version TEXT NOT NULL,
        server_name      TEXT NOT NULL,
        server_version   TEXT NOT NULL,
        transport        TEXT NOT NULL,
        tools            TEXT NOT NULL,
        PRIMARY KEY (service, launch_digest)
    );
    CREATE TABLE results (
        seq        BIGSERIAL,
        output_id  TEXT PRIMARY KEY NOT NULL,
        service    TEXT NOT NULL,
        agent      TEXT NOT NULL,
        size       BIGINT NOT NULL,
        digest     TEXT NOT NULL,
        complete   BOOLEAN NOT NULL,
        redacted   BOOLEAN NOT NULL,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );
    CREATE INDEX results_by_service ON results (service, created_at);
    CREATE TABLE import_previews (
        id         BIGSERIAL PRIMARY KEY,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        request    TEXT NOT NULL,
        entries    TEXT NOT NULL
    );",
    "CREATE TABLE gateway_tokens (
        id          TEXT PRIMARY KEY NOT NULL,
        agent       TEXT NOT NULL,
        fingerprint TEXT NOT NULL UNIQUE,
        secret_ref  TEXT NOT NULL,
        created_at  BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );",
    "CREATE TABLE approvals (
        id         BIGSERIAL PRIMARY KEY,
        agent      TEXT NOT NULL,
        service    TEXT NOT NULL,
        tool       TEXT NOT NULL,
        arguments  TEXT NOT NULL,
        plugin     TEXT NOT NULL,
        rule       TEXT NOT NULL,
        expires_at BIGINT,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT),
        -- The globs as anchored regular expressions (PostgreSQL has no GLOB).
        tool_re      TEXT NOT NULL,
        arguments_re TEXT NOT NULL
    );
    CREATE INDEX approvals_by_scope ON approvals (agent, service, plugin, rule);",
    "CREATE TABLE tasks (
        id               TEXT PRIMARY KEY NOT NULL,
        agent            TEXT NOT NULL,
        tool             TEXT NOT NULL,
        status           TEXT NOT NULL,
        status_message   TEXT,
        payload          TEXT,
        created_ms       BIGINT NOT NULL,
        updated_ms       BIGINT NOT NULL,
        ttl_ms           BIGINT NOT NULL,
        replica          TEXT NOT NULL,
        lease_until_ms   BIGINT NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE INDEX tasks_by_age ON tasks (created_ms);
    CREATE TABLE task_responses (
        task_id TEXT NOT NULL,
        key     TEXT NOT NULL,
        value   TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
    );",
    // Every write to these tables, by any replica or CLI, is counted in `changes` (one
    // statement-level trigger each; the function keeps the schema it was made in).
    "CREATE TABLE changes (
        topic      TEXT PRIMARY KEY NOT NULL,
        generation BIGINT NOT NULL DEFAULT 0
    );
    INSERT INTO changes (topic) VALUES ('services'), ('grants'), ('pauses');
    CREATE TABLE service_pauses (
        service    TEXT PRIMARY KEY NOT NULL,
        created_at BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)
    );
    CREATE FUNCTION airlock_count_change() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            UPDATE changes SET generation = generation + 1 WHERE topic = TG_ARGV[0];
            RETURN NULL;
        END $$;
    CREATE TRIGGER services_changed AFTER INSERT OR UPDATE OR DELETE ON services
        FOR EACH STATEMENT EXECUTE FUNCTION airlock_count_change('services');
    CREATE TRIGGER catalogs_changed AFTER INSERT OR UPDATE OR DELETE ON catalogs
        FOR EACH STATEMENT EXECUTE FUNCTION airlock_count_change('services');
    CREATE TRIGGER namespaces_changed AFTER INSERT OR UPDATE OR DELETE ON namespaces
        FOR EACH STATEMENT EXECUTE FUNCTION airlock_count_change('services');
    CREATE TRIGGER grants_changed AFTER INSERT OR UPDATE OR DELETE ON grants
        FOR EACH STATEMENT EXECUTE FUNCTION airlock_count_change('grants');
    CREATE TRIGGER service_pauses_changed AFTER INSERT OR UPDATE OR DELETE ON service_pauses
        FOR EACH STATEMENT EXECUTE FUNCTION airlock_count_change('pauses');",
    "CREATE TABLE console_sessions (
        id_digest    TEXT PRIMARY KEY NOT NULL,
        csrf         TEXT NOT NULL,
        created_ms   BIGINT NOT NULL,
        flash_failed BOOLEAN,
        flash_text   TEXT
    );",
    // Every counted write is also announced on `airlock_changes` as "<schema> <topic>"
    // (delivered when its transaction commits), so a host keeping grant answers in
    // memory forgets them at once (`registry/pg_listen.rs`).
    "CREATE OR REPLACE FUNCTION airlock_count_change() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            UPDATE changes SET generation = generation + 1 WHERE topic = TG_ARGV[0];
            PERFORM pg_notify('airlock_changes', TG_TABLE_SCHEMA || ' ' || TG_ARGV[0]);
            RETURN NULL;
        END $$;",
    "CREATE TABLE shared_secrets (
        name       TEXT PRIMARY KEY NOT NULL,
        sealed     TEXT NOT NULL,
        updated_ms BIGINT NOT NULL
    );",
    // Token changes are announced too, so a host keeping the tokens it has seen in
    // memory forgets them at once (`registry/grant_memo.rs`).
    "INSERT INTO changes (topic) VALUES ('tokens');
    CREATE TRIGGER gateway_tokens_changed AFTER INSERT OR UPDATE OR DELETE ON gateway_tokens
        FOR EACH STATEMENT EXECUTE FUNCTION airlock_count_change('tokens');",
];
