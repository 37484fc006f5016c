//! The two kinds of device memory a kernel follows rather than just reads:
//! the pointer-chase chain (each word an index of the next read) and the
//! peer table (each word another buffer's address). Their contents can
//! only be written through these types, which check every word first
//! ([`super::launch_checks`]); a plain [`DeviceBuffer`] never reaches a
//! kernel as a chain or a table.

use std::rc::Rc;

use super::launch_checks::{check_chain_words, table_words};
use super::{DeviceBuffer, Gpu};

/// A pointer-chase chain: every word is a word index inside it.
#[derive(Debug)]
pub struct ChaseChain {
    buf: DeviceBuffer,
}

impl ChaseChain {
    /// Make `buf` (a whole number of words, at least one) a chain: zeroed
    /// first, so that every word already points inside it (at word 0)
    /// before any is written.
    pub fn from_buffer(buf: DeviceBuffer) -> Result<ChaseChain, String> {
        if buf.is_empty() || !buf.len().is_multiple_of(8) {
            return Err(format!(
                "pointer-chase chain: {} bytes is not a whole number of words",
                buf.len()
            ));
        }
        buf.fill(0)?;
        Ok(ChaseChain { buf })
    }

    /// Words in the chain.
    pub fn words(&self) -> u64 {
        (self.buf.len() / 8) as u64
    }

    /// Write `words` from word `first` on; each must be an index inside
    /// the chain.
    pub fn write(&self, first: usize, words: &[u64]) -> Result<(), String> {
        check_chain_words(words, self.words())?;
        let offset = first
            .checked_mul(8)
            .ok_or("pointer-chase chain: offset overflows")?;
        self.buf.upload(offset, words)
    }

    /// The GPU that holds it.
    pub fn gpu(&self) -> &Gpu {
        self.buf.gpu()
    }

    pub(crate) fn ptr(&self) -> u64 {
        self.buf.ptr()
    }
}

/// The table the barrier and the one-shot sum follow (layout:
/// [`super::kernels`]), on one GPU, holding the buffers it names so that no
/// address in it outlives its allocation.
#[derive(Debug)]
pub struct PeerTable {
    buf: DeviceBuffer,
    n: usize,
    input_bytes: usize,
    _named: Vec<Rc<DeviceBuffer>>,
}

impl PeerTable {
    /// The table on `gpu` for GPU `j`'s input `inputs[j]` and barrier flag
    /// array `flags[j]`.
    pub fn new(
        gpu: &Gpu,
        inputs: &[Rc<DeviceBuffer>],
        flags: &[Rc<DeviceBuffer>],
    ) -> Result<PeerTable, String> {
        let at = |b: &[Rc<DeviceBuffer>]| b.iter().map(|x| (x.ptr(), x.len())).collect::<Vec<_>>();
        let words = table_words(&at(inputs), &at(flags))?;
        let buf = DeviceBuffer::alloc(gpu, std::mem::size_of_val(&words))?;
        buf.upload(0, &words)?;
        Ok(PeerTable {
            buf,
            n: inputs.len(),
            input_bytes: inputs.iter().map(|b| b.len()).min().unwrap_or(0),
            _named: inputs.iter().chain(flags).cloned().collect(),
        })
    }

    /// GPUs in the table.
    pub fn gpus(&self) -> usize {
        self.n
    }

    /// Bytes of its smallest input.
    pub fn input_bytes(&self) -> usize {
        self.input_bytes
    }

    /// The GPU that holds it.
    pub fn gpu(&self) -> &Gpu {
        self.buf.gpu()
    }

    pub(crate) fn ptr(&self) -> u64 {
        self.buf.ptr()
    }
}
