-- Claim tokens that never repeat for a row. `attempt_count` was also the token every update
-- of a claimed row checked, but replay resets it and giving a claim back decrements it, so an
-- old holder could match a newer claim. Each claim now sets a fresh random `claim_id`; every
-- update of a claimed row checks it, and `attempt_count` is only the count operators see.
-- NULL: not claimed (never claimed, finished, given back or requeued by an operator).
ALTER TABLE webhook_inbox ADD COLUMN claim_id UUID;
ALTER TABLE deliveries ADD COLUMN claim_id UUID;
