//! The endpoints serving now: read at start from `[[endpoint]]`, swapped whole when the
//! watched config file changes (`reload::ConfigReloader`). Ingest and processing share one
//! table, so an endpoint added live is known to the workers that process its events.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::endpoints::EndpointConfig;

/// The endpoints by id, as one consistent table.
#[derive(Debug, Default)]
pub struct EndpointTable {
    by_id: HashMap<String, Arc<EndpointConfig>>,
    /// In the order the file lists them.
    ordered: Vec<Arc<EndpointConfig>>,
}

impl EndpointTable {
    pub fn new(endpoints: &[EndpointConfig]) -> Self {
        let ordered: Vec<Arc<EndpointConfig>> = endpoints.iter().cloned().map(Arc::new).collect();
        let by_id = ordered
            .iter()
            .map(|e| (e.id.clone(), Arc::clone(e)))
            .collect();
        Self { by_id, ordered }
    }

    pub fn get(&self, id: &str) -> Option<&Arc<EndpointConfig>> {
        self.by_id.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<EndpointConfig>> {
        self.ordered.iter()
    }
}

/// The live endpoint table: every reader sees the old table or the new one, never a mix.
#[derive(Debug, Default)]
pub struct LiveEndpoints {
    current: ArcSwap<EndpointTable>,
}

impl LiveEndpoints {
    pub fn new(endpoints: &[EndpointConfig]) -> Self {
        Self {
            current: ArcSwap::from_pointee(EndpointTable::new(endpoints)),
        }
    }

    /// The table serving now; a request keeps the one it started with.
    pub fn load(&self) -> Arc<EndpointTable> {
        self.current.load_full()
    }

    /// One endpoint as configured now.
    pub fn get(&self, id: &str) -> Option<Arc<EndpointConfig>> {
        self.current.load().get(id).cloned()
    }

    /// Swaps the whole table atomically.
    pub fn replace(&self, endpoints: &[EndpointConfig]) {
        self.current.store(Arc::new(EndpointTable::new(endpoints)));
    }
}
