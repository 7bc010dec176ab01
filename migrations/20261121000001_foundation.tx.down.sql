DROP TABLE node_queues;
--bun:split
DROP TABLE queues;
--bun:split
DROP TABLE nodes;
--bun:split
DROP TABLE sites;
--bun:split
DROP TABLE client_keys;
--bun:split
DROP TABLE user_permissions;
--bun:split
DROP TABLE user_groups;
--bun:split
DROP TABLE group_permissions;
--bun:split
DROP TABLE permissions;
--bun:split
DROP TABLE groups;
--bun:split
DROP TABLE users;
--bun:split
DROP TABLE configurations;
--bun:split
DROP TABLE hub_secrets;
