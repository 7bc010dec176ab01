-- When a user's password last changed: tokens issued before are refused.
ALTER TABLE users ADD COLUMN password_changed {{.TS}};
