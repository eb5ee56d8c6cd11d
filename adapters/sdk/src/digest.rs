//! A digest of verified bytes, for providers that send no event id at all (Zoom, Meta's
//! unrecognised batch items): the id is then derived from the exact bytes that were signed, so
//! a retry that resends the same body is recognised, and two different bodies never share an
//! id. Never used for identity when the provider gives one.

use sha2::{Digest as _, Sha256};

/// The lowercase hex SHA-256 of `bytes` (64 characters).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // FIPS 180-2 test vectors.
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
