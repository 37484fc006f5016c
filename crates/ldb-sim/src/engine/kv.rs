//! KV cache as logical blocks with reference counts and a hash-addressed prefix cache.
//!
//! Free blocks that still hold a cached prefix stay addressable until they are reused; the
//! free queue is LRU (oldest freed block is reused first). Stale queue entries are skipped
//! lazily through a per-block stamp. An optional capacity (`kv.prefix_cache_blocks`) bounds
//! how many free blocks keep their prefix: past it the least recently freed one forgets its
//! hash (LRU eviction), which a small capacity makes visible as lost hits. A reset forgets
//! every cached prefix, and is refused while any block is in use (as vLLM's).

use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy, Default)]
struct Block {
    refs: u32,
    hash: Option<u64>,
    stamp: u64,
}

/// The block pool of one engine.
#[derive(Debug)]
pub(crate) struct KvCache {
    blocks: Vec<Block>,
    free_queue: VecDeque<(u32, u64)>,
    free_count: usize,
    by_hash: HashMap<u64, u32>,
    next_stamp: u64,
    prefix_caching: bool,
    /// Most free blocks that keep their prefix (None: every free block).
    cached_cap: Option<usize>,
    /// Free blocks holding a prefix, least recently freed first (lazy, like `free_queue`).
    cached_queue: VecDeque<(u32, u64)>,
    cached_free: usize,
}

impl KvCache {
    pub(crate) fn new(num_blocks: u32, prefix_caching: bool) -> Self {
        let mut free_queue = VecDeque::with_capacity(num_blocks as usize);
        for id in 0..num_blocks {
            free_queue.push_back((id, 0));
        }
        KvCache {
            blocks: vec![Block::default(); num_blocks as usize],
            free_queue,
            free_count: num_blocks as usize,
            by_hash: HashMap::new(),
            next_stamp: 1,
            prefix_caching,
            cached_cap: None,
            cached_queue: VecDeque::new(),
            cached_free: 0,
        }
    }

    /// Bound the free blocks that keep a cached prefix to `cap` (LRU beyond it).
    pub(crate) fn with_cached_cap(mut self, cap: Option<u32>) -> Self {
        self.cached_cap = cap.map(|c| c as usize);
        self
    }

    /// Free blocks that still hold a cached prefix.
    #[cfg(test)]
    pub(crate) fn cached_free(&self) -> usize {
        self.cached_free
    }

    /// Forget every cached prefix; refused (false) while any block is in use.
    pub(crate) fn reset_prefix_cache(&mut self) -> bool {
        if self.used() > 0 {
            return false;
        }
        for b in &mut self.blocks {
            b.hash = None;
        }
        self.by_hash.clear();
        self.cached_queue.clear();
        self.cached_free = 0;
        true
    }

    /// Drop the hash of block `id` (it stays where it is otherwise).
    fn forget(&mut self, id: u32) {
        if let Some(h) = self.blocks[id as usize].hash.take()
            && self.by_hash.get(&h) == Some(&id)
        {
            self.by_hash.remove(&h);
        }
    }

    /// Evict least recently freed cached blocks past the capacity.
    fn enforce_cap(&mut self) {
        let Some(cap) = self.cached_cap else { return };
        while self.cached_free > cap {
            let Some((id, stamp)) = self.cached_queue.pop_front() else {
                break;
            };
            let b = self.blocks[id as usize];
            if b.refs != 0 || b.stamp != stamp || b.hash.is_none() {
                continue;
            }
            self.forget(id);
            self.cached_free -= 1;
        }
    }

    pub(crate) fn total(&self) -> usize {
        self.blocks.len()
    }

    pub(crate) fn free(&self) -> usize {
        self.free_count
    }

    pub(crate) fn used(&self) -> usize {
        self.blocks.len() - self.free_count
    }

    /// Ids of the cached blocks matching the longest prefix of `hashes`.
    pub(crate) fn lookup(&self, hashes: &[u64]) -> Vec<u32> {
        if !self.prefix_caching {
            return Vec::new();
        }
        hashes
            .iter()
            .map_while(|h| self.by_hash.get(h).copied())
            .collect()
    }

    /// How many of `ids` are currently unreferenced (taking them shrinks the free pool).
    pub(crate) fn count_free(&self, ids: &[u32]) -> usize {
        ids.iter()
            .filter(|&&id| self.blocks[id as usize].refs == 0)
            .count()
    }

    /// Take a reference on a cached block.
    pub(crate) fn acquire(&mut self, id: u32) {
        let b = &mut self.blocks[id as usize];
        if b.refs == 0 {
            self.free_count -= 1;
            b.stamp = 0;
            if b.hash.is_some() {
                self.cached_free -= 1;
            }
        }
        b.refs += 1;
    }

    /// A fresh block (evicting the least recently freed cached block), or `None` when full.
    pub(crate) fn allocate(&mut self) -> Option<u32> {
        while let Some((id, stamp)) = self.free_queue.pop_front() {
            let b = &mut self.blocks[id as usize];
            if b.refs != 0 || b.stamp != stamp {
                continue;
            }
            if b.hash.is_some() {
                self.cached_free -= 1;
            }
            if let Some(h) = b.hash.take()
                && self.by_hash.get(&h) == Some(&id)
            {
                self.by_hash.remove(&h);
            }
            b.refs = 1;
            b.stamp = 0;
            self.free_count -= 1;
            return Some(id);
        }
        None
    }

    /// Drop a reference; the block returns to the free queue at zero.
    pub(crate) fn release(&mut self, id: u32) {
        let stamp = self.next_stamp;
        let b = &mut self.blocks[id as usize];
        if b.refs == 0 {
            return;
        }
        b.refs -= 1;
        if b.refs == 0 {
            self.next_stamp += 1;
            b.stamp = stamp;
            let cached = b.hash.is_some();
            self.free_count += 1;
            self.free_queue.push_back((id, stamp));
            if cached {
                self.cached_free += 1;
                self.cached_queue.push_back((id, stamp));
                self.enforce_cap();
            }
        }
    }

    /// Record that block `id` holds the prefix whose chained hash is `hash`.
    pub(crate) fn register(&mut self, id: u32, hash: u64) {
        if !self.prefix_caching {
            return;
        }
        let b = &mut self.blocks[id as usize];
        if b.hash.is_none() && !self.by_hash.contains_key(&hash) {
            b.hash = Some(hash);
            self.by_hash.insert(hash, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_release_and_hit() {
        let mut kv = KvCache::new(3, true);
        let a = kv.allocate();
        let b = kv.allocate();
        assert_eq!(kv.free(), 1);
        if let (Some(a), Some(b)) = (a, b) {
            kv.register(a, 77);
            kv.release(a);
            kv.release(b);
            assert_eq!(kv.free(), 3);
            assert_eq!(kv.lookup(&[77, 78]), vec![a]);
            kv.acquire(a);
            assert_eq!(kv.free(), 2);
            // a is referenced: the next two allocations are the other blocks, then none.
            assert!(kv.allocate().is_some());
            assert!(kv.allocate().is_some());
            assert!(kv.allocate().is_none());
            assert_eq!(kv.lookup(&[77]), vec![a]);
        } else {
            panic!("allocation failed");
        }
    }

    #[test]
    fn a_capacity_keeps_the_most_recently_freed_prefixes_and_a_reset_all_of_none() {
        let mut kv = KvCache::new(8, true).with_cached_cap(Some(2));
        let ids: Vec<u32> = (0..3).filter_map(|_| kv.allocate()).collect();
        for (i, &id) in ids.iter().enumerate() {
            kv.register(id, 100 + i as u64);
        }
        for &id in &ids {
            kv.release(id);
        }
        assert_eq!(kv.cached_free(), 2);
        assert!(kv.lookup(&[100]).is_empty(), "the oldest was evicted");
        assert_eq!(kv.lookup(&[101]).len(), 1);
        assert_eq!(kv.lookup(&[102]).len(), 1);
        let held = kv.lookup(&[101])[0];
        kv.acquire(held);
        assert_eq!(kv.cached_free(), 1);
        assert!(!kv.reset_prefix_cache(), "refused while a block is in use");
        kv.release(held);
        assert!(kv.reset_prefix_cache());
        assert!(kv.lookup(&[101]).is_empty() && kv.lookup(&[102]).is_empty());
        assert_eq!(kv.cached_free(), 0);
    }

    #[test]
    fn eviction_forgets_hash() {
        let mut kv = KvCache::new(1, true);
        let a = kv.allocate().unwrap_or(u32::MAX);
        kv.register(a, 5);
        kv.release(a);
        assert_eq!(kv.allocate(), Some(a));
        assert!(kv.lookup(&[5]).is_empty());
    }
}
