//! `[adapters]`: the folder of provider components and the sandbox's limits.

use std::path::PathBuf;

use crate::support::adapter_key::AdapterKey;

section! {
    #[derive(Debug, Clone)]
    pub struct AdaptersConfig as a {
        pub dir: PathBuf,
        /// Where compiled components are cached (keyed by content hash and engine); none: no cache.
        pub cache_dir: Option<PathBuf>,
        pub memory_mib: usize = 64; 1..=4096,
        pub call_timeout_ms: u64 = 100; 1..=1000,
        pub max_concurrency: u32 = 64; 1..=1024,
        /// Threads that run adapter code (default: one per core), apart from those serving HTTP.
        pub threads: Option<usize>; 1..=256,
        /// Signers whose adapter files may load (`ed25519:<base64>`, as `wharf adapter keygen`
        /// writes them); empty: any file loads, and a `.sig` beside it is still checked.
        pub trusted_keys: Vec<AdapterKey> = Vec::new(),
    }
}
