DROP TABLE settings_tasks;
--bun:split
DROP TABLE settings;
--bun:split
DROP TABLE actions;
--bun:split
DROP TABLE alerts;
--bun:split
DROP TABLE tags;
--bun:split
DROP TABLE certificate_lifetimes;
--bun:split
DROP TABLE file_status_types;
--bun:split
DROP TABLE features;
--bun:split
DROP TABLE workflows;
