-- Raw payloads are encrypted at rest (host/src/support/sealing.rs): `body` holds the sealed
-- bytes and `key_id` names the payload key that sealed them. The keys live in a key file or
-- the environment, never here. A NULL key id is a body stored before this migration, in
-- plaintext; `wharf payloads reencrypt` seals those too.
ALTER TABLE webhook_payloads ADD COLUMN key_id TEXT;

-- A sealed body does not compress: store it out of line as it is, without the lz4 attempt
-- (compression happens before sealing, in the host).
ALTER TABLE webhook_payloads ALTER COLUMN body SET STORAGE EXTERNAL;
