//! The upstream connection pools of the serving threads: one per thread,
//! made by the [`HttpClientFactory`] `server` passes down.
//!
//! A pooled connection is served by a task on the runtime that opened it.
//! One pool shared by the serving threads (one runtime each) would hand a
//! call on one thread a connection whose task runs on another, and every
//! request and response would cross threads; profiles showed those
//! wake-ups on every call. So each serving thread gets a pool of its own
//! when it starts: at most `pool_max_idle_per_host` idle connections per
//! host per thread (the bulkheads still bound the connections in use
//! across all of them). Any other thread (the process runtime: credential
//! refresh, the fleet relay, the admin listener) uses one shared pool.

use thread_local::ThreadLocal;

use crate::upstream::{HttpClient, HttpClientFactory, HttpPools};

/// The pools the upstream client is built on, per serving thread.
pub(super) struct WorkerPools {
    factory: HttpClientFactory,
    /// Every thread that is not a serving thread.
    shared: HttpClient,
    /// Each serving thread's own, made when the thread starts.
    own: ThreadLocal<HttpClient>,
}

impl WorkerPools {
    pub(super) fn new(factory: HttpClientFactory) -> Self {
        Self {
            shared: factory.client(),
            factory,
            own: ThreadLocal::new(),
        }
    }

    /// Gives the calling thread, a serving thread starting, its own pool.
    pub(super) fn install(&self) {
        self.own.get_or(|| self.factory.client());
    }
}

impl HttpPools for WorkerPools {
    fn current(&self) -> &HttpClient {
        self.own.get().unwrap_or(&self.shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serving_thread_has_its_own_pool_and_others_share_one() {
        let factory = HttpClientFactory::new(&crate::upstream::UpstreamConfig::default()).unwrap();
        let pools = std::sync::Arc::new(WorkerPools::new(factory));
        let shared: *const HttpClient = pools.current();
        let serving = std::thread::spawn({
            let pools = pools.clone();
            move || {
                let before = pools.current() as *const HttpClient as usize;
                pools.install();
                (before, pools.current() as *const HttpClient as usize)
            }
        })
        .join()
        .unwrap();
        assert_eq!(serving.0, shared as usize, "before it starts serving");
        assert_ne!(serving.1, shared as usize, "its own once serving");
        assert!(std::ptr::eq(pools.current(), shared), "other threads share");
    }
}
