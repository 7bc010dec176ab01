CREATE TABLE hub_secrets (
    name TEXT PRIMARY KEY,
    value {{.BLOB}} NOT NULL,
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE configurations (
    id INTEGER PRIMARY KEY,
    data {{.JSON}} NOT NULL,
    updated_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE users (
    id {{.ID}},
    username VARCHAR(150) NOT NULL UNIQUE,
    password TEXT NOT NULL DEFAULT '',
    email TEXT NOT NULL DEFAULT '',
    first_name TEXT NOT NULL DEFAULT '',
    last_name TEXT NOT NULL DEFAULT '',
    is_active BOOLEAN NOT NULL DEFAULT TRUE,
    is_superuser BOOLEAN NOT NULL DEFAULT FALSE,
    date_joined {{.TS}} NOT NULL,
    last_login {{.TS}},
    nas_allow_ssh BOOLEAN NOT NULL DEFAULT FALSE,
    nas_primary_group TEXT,
    nas_uid BIGINT UNIQUE,
    profile {{.JSON}},
    idp_issuer TEXT,
    idp_subject TEXT
);
--bun:split
CREATE UNIQUE INDEX users_idp ON users (idp_issuer, idp_subject);
--bun:split
CREATE TABLE groups (
    id {{.ID}},
    name VARCHAR(150) NOT NULL UNIQUE
);
--bun:split
CREATE TABLE permissions (
    id {{.ID}},
    app_label TEXT NOT NULL,
    codename VARCHAR(100) NOT NULL UNIQUE,
    model TEXT NOT NULL,
    name TEXT NOT NULL
);
--bun:split
CREATE TABLE group_permissions (
    group_id BIGINT NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    permission_id BIGINT NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, permission_id)
);
--bun:split
CREATE TABLE user_groups (
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_id BIGINT NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, group_id)
);
--bun:split
CREATE TABLE user_permissions (
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    permission_id BIGINT NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, permission_id)
);
--bun:split
CREATE TABLE client_keys (
    id {{.ID}},
    name TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    prefix VARCHAR(32) NOT NULL UNIQUE,
    key_hash TEXT NOT NULL,
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE sites (
    id {{.ID}},
    name VARCHAR(150) NOT NULL UNIQUE,
    label TEXT NOT NULL DEFAULT '',
    shortcode TEXT NOT NULL DEFAULT '',
    type TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    public_url TEXT NOT NULL DEFAULT '',
    storage_search_url TEXT NOT NULL DEFAULT '',
    searchengine_url TEXT NOT NULL DEFAULT '',
    bandwidth BIGINT NOT NULL DEFAULT 0,
    color {{.JSON}},
    am_i_configured BOOLEAN NOT NULL DEFAULT FALSE,
    ready_to_configure BOOLEAN NOT NULL DEFAULT FALSE,
    addon_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    directories_count BIGINT NOT NULL DEFAULT 0,
    files_count BIGINT NOT NULL DEFAULT 0,
    files_hydrated_count BIGINT NOT NULL DEFAULT 0,
    files_stubbed_count BIGINT NOT NULL DEFAULT 0,
    enable_auto_file_batch_sizing BOOLEAN NOT NULL DEFAULT FALSE,
    file_batch_gb BIGINT NOT NULL DEFAULT 10,
    file_batch_size BIGINT NOT NULL DEFAULT 1000,
    fs_iscan_buckets BIGINT NOT NULL DEFAULT 0,
    fs_iscan_threads BIGINT NOT NULL DEFAULT 0,
    lock_threshold BIGINT NOT NULL DEFAULT 0,
    include {{.JSON}},
    exclude {{.JSON}},
    created_at {{.TS}} NOT NULL
);
--bun:split
CREATE TABLE nodes (
    id {{.ID}},
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    last_heartbeat {{.TS}},
    worker_version TEXT NOT NULL DEFAULT '',
    engine_version TEXT NOT NULL DEFAULT '',
    analytics_version TEXT NOT NULL DEFAULT '',
    search_version TEXT NOT NULL DEFAULT '',
    UNIQUE (site_id, name)
);
--bun:split
CREATE TABLE queues (
    id {{.ID}},
    site_id BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    last_heartbeat {{.TS}},
    UNIQUE (site_id, name)
);
--bun:split
CREATE TABLE node_queues (
    node_id BIGINT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    queue_id BIGINT NOT NULL REFERENCES queues (id) ON DELETE CASCADE,
    last_heartbeat {{.TS}} NOT NULL,
    PRIMARY KEY (node_id, queue_id)
);
