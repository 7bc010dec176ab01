ALTER TABLE users DROP COLUMN password_changed;
