//! KV cache as logical blocks with reference counts and a hash-addressed prefix cache.
//!
//! Free blocks that still hold a cached prefix stay addressable until they are reused; the
//! free queue is LRU (oldest freed block is reused first). Stale queue entries are skipped
//! lazily through a per-block stamp.

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
            self.free_count += 1;
            self.free_queue.push_back((id, stamp));
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
    fn eviction_forgets_hash() {
        let mut kv = KvCache::new(1, true);
        let a = kv.allocate().unwrap_or(u32::MAX);
        kv.register(a, 5);
        kv.release(a);
        assert_eq!(kv.allocate(), Some(a));
        assert!(kv.lookup(&[5]).is_empty());
    }
}
