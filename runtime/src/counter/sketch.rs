//! One limit's count of the keys the exact table has no room for, in that
//! limit's own window: each key's first request in a filter of a few bits a
//! key, its later requests in a count-min sketch with conservative update,
//! its counters only as wide as the limit needs.
//!
//! Why two parts: a flood is keys that send one request each, so almost
//! every key past the table is counted once. A blocked Bloom filter holds
//! "sent one" in [`FILTER_BITS_PER_KEY`] bits a key and mistakes a new key for
//! a seen one 0.19 % of the time at the number of keys it is sized for;
//! only keys sending two or more reach the count-min sketch, which so stays
//! nearly empty and counts them exactly. A count-min sketch alone would need
//! as many counters as the filter has bits to tell a new key from a seen one
//! as often, each of them 8 to 32 bits wide.

use super::Verdict;
use crate::limits::Limit;

/// Filter bits a key: with as many keys as the sketch is sized for, a key
/// never counted is taken for a counted one 0.19 % of the time (8 bits set a
/// key, one in each 64-bit word of a 512-bit block).
pub(super) const FILTER_BITS_PER_KEY: usize = 14;

/// Keys a sketch is sized for, per counter of each row of its count-min
/// part: that part counts only the requests after a key's first, which a
/// flood of one request a key never reaches, so it is 32 times narrower.
pub(super) const KEYS_PER_COUNTER: usize = 32;

/// Rows of the count-min part: a key is refused early only when each of
/// its rows holds a count of another key.
pub(super) const ROWS: usize = 4;

/// The widest a row gets: its index is 16 bits of a hash.
const MAX_ROW_WIDTH: usize = 1 << 16;

/// 512 bits, one cache line: a key's 8 filter bits are all in one block, one
/// bit in each word, so checking a key costs one memory access.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Block([u64; 8]);

const BLOCK_BYTES: usize = std::mem::size_of::<Block>();

/// The count-min part's counters: as wide as `limit - 1`, the most a key's
/// later requests can reach; none for a limit of 1.
enum Later {
    None,
    U8(Box<[u8]>),
    U16(Box<[u16]>),
    U32(Box<[u32]>),
}

/// A counter of one width.
trait Cell: Copy {
    fn get(self) -> u32;
    fn of(n: u32) -> Self;
}

macro_rules! cell {
    ($t:ty) => {
        impl Cell for $t {
            fn get(self) -> u32 {
                u32::from(self)
            }
            fn of(n: u32) -> $t {
                <$t>::try_from(n).unwrap_or(<$t>::MAX)
            }
        }
    };
}
cell!(u8);
cell!(u16);
cell!(u32);

/// `$body` with `$cells` the counters, whatever their width; `$none` without any.
macro_rules! with_cells {
    ($later:expr, $cells:ident => $body:expr, none => $none:expr) => {
        match $later {
            Later::None => $none,
            Later::U8($cells) => $body,
            Later::U16($cells) => $body,
            Later::U32($cells) => $body,
        }
    };
}

fn min_of<C: Cell>(cells: &[C], at: &[usize; ROWS]) -> u32 {
    at.iter().map(|&i| cells[i].get()).min().unwrap_or(0)
}

/// Conservative update: counters below `to` rise to it, the others stay.
fn raise<C: Cell>(cells: &mut [C], at: &[usize; ROWS], to: u32) {
    for &i in at {
        if cells[i].get() < to {
            cells[i] = C::of(to);
        }
    }
}

impl Later {
    /// The bytes of one counter for a limit of `requests`: enough for
    /// `requests - 1` (0: no counters, for a limit of 1).
    fn cell_bytes(requests: u32) -> usize {
        match requests.saturating_sub(1) {
            0 => 0,
            1..=0xFF => 1,
            0x100..=0xFFFF => 2,
            _ => 4,
        }
    }

    fn new(requests: u32, cells: usize) -> Later {
        match Later::cell_bytes(requests) {
            0 => Later::None,
            1 => Later::U8(vec![0; cells].into_boxed_slice()),
            2 => Later::U16(vec![0; cells].into_boxed_slice()),
            _ => Later::U32(vec![0; cells].into_boxed_slice()),
        }
    }

    fn min(&self, at: &[usize; ROWS]) -> u32 {
        with_cells!(self, c => min_of(c, at), none => 0)
    }

    fn raise(&mut self, at: &[usize; ROWS], to: u32) {
        with_cells!(self, c => raise(c, at, to), none => {})
    }

    fn clear(&mut self) {
        with_cells!(self, c => c.fill(0), none => {})
    }

    fn bytes(&self) -> usize {
        with_cells!(self, c => std::mem::size_of_val(&**c), none => 0)
    }
}

/// The filter and the counters, allocated the first time the table has no
/// room for one of the limit's keys.
struct Storage {
    filter: Box<[Block]>,
    later: Later,
    /// A row's width - 1 (a power of two).
    row_mask: usize,
}

/// Where a key lives in a sketch: its block, and the hash that places its
/// bit in each of the block's words (6 bits a word) and (mixed once more,
/// only when needed) its counter in each row.
struct Spots {
    block: usize,
    hash: u64,
}

impl Spots {
    /// The key's bit in word `word` of its block.
    #[inline]
    fn bit(&self, word: usize) -> u64 {
        (self.hash >> (6 * word)) & 63
    }
}

/// SplitMix64's finaliser: well-mixed bits from the digest for the filter's
/// bits and the rows, apart from the bits that chose the block.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Storage {
    fn new(requests: u32, keys: usize) -> Storage {
        let width = row_width(keys);
        Storage {
            filter: vec![Block::default(); blocks(keys)].into_boxed_slice(),
            later: Later::new(requests, ROWS * width),
            row_mask: width - 1,
        }
    }

    #[inline]
    fn spots(&self, digest: u64) -> Spots {
        // The block from the digest's high 32 bits (a multiply-shift, so any
        // number of blocks below 2^32, in 64-bit arithmetic, which wasm32
        // has), the bits from a mix of all 64.
        Spots {
            block: (((digest >> 32) * self.filter.len() as u64) >> 32) as usize,
            hash: mix(digest),
        }
    }

    fn rows(&self, spots: &Spots) -> [usize; ROWS] {
        let hash = mix(spots.hash);
        let width = self.row_mask + 1;
        std::array::from_fn(|row| row * width + ((hash >> (16 * row)) as usize & self.row_mask))
    }

    /// Whether all of the key's bits are set (without a branch a bit: on a
    /// flood's new keys, which bit is missing is a coin toss).
    #[inline]
    fn seen(&self, spots: &Spots) -> bool {
        let words = &self.filter[spots.block].0;
        let mut missing = 0;
        for (word, bits) in words.iter().enumerate() {
            missing |= !(bits >> spots.bit(word)) & 1;
        }
        missing == 0
    }

    /// Sets the key's bit in each word of its block, and says whether all of
    /// them were set already (the key was counted, or is taken for one that
    /// was). Unrolled by hand: the workspace is built for size, and the loop
    /// cost a flood's every new key half again as many instructions.
    #[inline]
    fn test_and_set(&mut self, spots: &Spots) -> bool {
        let words = &mut self.filter[spots.block].0;
        let mut missing = 0;
        macro_rules! words {
            ($($word:literal)*) => {$(
                let bit = 1 << spots.bit($word);
                missing |= bit & !words[$word];
                words[$word] |= bit;
            )*};
        }
        words!(0 1 2 3 4 5 6 7);
        missing == 0
    }

    /// The key's count: 0 if the filter never saw it, else 1 for its first
    /// request and the sketch's estimate of the later ones.
    fn count(&self, spots: &Spots) -> u32 {
        if self.seen(spots) {
            1 + self.later.min(&self.rows(spots))
        } else {
            0
        }
    }

    fn bytes(&self) -> usize {
        self.filter.len() * BLOCK_BYTES + self.later.bytes()
    }
}

/// The filter's blocks for `keys` keys.
fn blocks(keys: usize) -> usize {
    keys.saturating_mul(FILTER_BITS_PER_KEY)
        .div_ceil(BLOCK_BYTES * 8)
        .max(1)
}

/// A row's width for `keys` keys: a power of two, at most 2^16.
fn row_width(keys: usize) -> usize {
    keys.div_ceil(KEYS_PER_COUNTER)
        .next_power_of_two()
        .min(MAX_ROW_WIDTH)
}

/// One limit's keys past the exact table, in that limit's window. Windows
/// are aligned to the clock, so every key of the limit shares its window's
/// end: the whole sketch is cleared when it ends, and no counter needs a stamp.
pub(super) struct LimitSketch {
    limit: Limit,
    /// Distinct keys in one window it is sized for.
    keys: usize,
    /// When the counts held end, in whole seconds since the epoch (0: none yet).
    ends_at_s: u32,
    /// Whether anything was counted since it was last cleared.
    dirty: bool,
    storage: Option<Storage>,
}

impl LimitSketch {
    pub(super) fn new(limit: Limit, keys: usize) -> LimitSketch {
        LimitSketch {
            limit,
            keys,
            ends_at_s: 0,
            dirty: false,
            storage: None,
        }
    }

    pub(super) fn limit(&self) -> Limit {
        self.limit
    }

    pub(super) fn keys(&self) -> usize {
        self.keys
    }

    /// The bytes a sketch of `limit` sized for `keys` keys holds once used,
    /// itself (in its counter's list) included.
    pub(super) fn bound_bytes(limit: Limit, keys: usize) -> usize {
        (blocks(keys).saturating_mul(BLOCK_BYTES))
            .saturating_add(std::mem::size_of::<LimitSketch>())
            .saturating_add(ROWS * row_width(keys) * Later::cell_bytes(limit.requests))
    }

    /// The bytes it holds now, itself included: its filter and counters
    /// only once the table first had no room for one of its keys.
    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<LimitSketch>() + self.storage.as_ref().map_or(0, Storage::bytes)
    }

    fn is_live(&self, now_ms: u64) -> bool {
        now_ms < u64::from(self.ends_at_s) * 1000
    }

    /// The key's count in the window live at `now_ms`, and when that window
    /// ends; `None` when nothing of the key's window is held. Never below the
    /// key's true count.
    pub(super) fn count(&self, digest: u64, now_ms: u64) -> Option<(u32, u32)> {
        if !self.dirty || !self.is_live(now_ms) {
            return None;
        }
        let storage = self.storage.as_ref()?;
        let count = storage.count(&storage.spots(digest));
        (count > 0).then_some((count, self.ends_at_s))
    }

    /// Counts one request unless the key's count reached the limit; a
    /// refused request is not counted. `ends_at_s` is when the window of
    /// `now_ms` ends: once the held window has ended, the sketch starts
    /// again from nothing.
    pub(super) fn hit(&mut self, digest: u64, now_ms: u64, ends_at_s: u32) -> Verdict {
        if !self.is_live(now_ms) {
            if self.dirty
                && let Some(storage) = &mut self.storage
            {
                storage.filter.fill(Block::default());
                storage.later.clear();
            }
            self.dirty = false;
            self.ends_at_s = ends_at_s;
        }
        let (requests, keys) = (self.limit.requests, self.keys);
        if requests == 0 {
            return Verdict::Exceeded;
        }
        let storage = self
            .storage
            .get_or_insert_with(|| Storage::new(requests, keys));
        self.dirty = true;
        let spots = storage.spots(digest);
        if !storage.test_and_set(&spots) {
            // Its first request (a seen key's bits were all set already).
            return Verdict::Within;
        }
        // A later request: counted when 1 + their estimate is below the
        // limit, by raising the counters at the estimate.
        let rows = storage.rows(&spots);
        let count = 1 + storage.later.min(&rows);
        if count >= requests {
            return Verdict::Exceeded;
        }
        storage.later.raise(&rows, count);
        Verdict::Within
    }
}
