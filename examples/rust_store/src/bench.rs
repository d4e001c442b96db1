//! The bench request (docs/protocol.md, "The bench request"): the put+get
//! loop at the store's own pace, timed by its own clock, with nothing
//! crossing the pipe until it is done. Value i is `size` bytes, byte j being
//! (i + j) mod 251: a slice of one pattern made before the clock starts, so
//! that the oracle's readers can check every object without being sent it.

use crate::error::Result;
use crate::ring::Ring;
use crate::storage::{KeyArg, SigArg, Storage};
use std::time::Instant;

pub const MODULUS: usize = 251;

/// (address, monotonic_id, signature) of one put, in order.
pub type Placed = (i128, i128, [u8; 32]);

/// Bytes 0, 1, ..., 250, 0, 1, ...: `size + 251` of them, value i starting at i mod 251.
pub fn pattern(size: usize) -> Vec<u8> {
    (0..size + MODULUS).map(|j| (j % MODULUS) as u8).collect()
}

/// Put value i under `prefix` + i, sign it, and get it as a reader of the
/// segment does (signature and id checked, copied, counted), `count` times.
/// The reader is attached to the writer's own segment before the clock
/// starts; it counts without a lock: nothing else reads during the request.
pub fn own_loop(
    st: &mut Storage,
    ring: &mut Ring,
    prefix: &str,
    count: usize,
    size: usize,
    metadata: &[u8],
) -> Result<(f64, Vec<Placed>)> {
    let made = pattern(size);
    let (buffer, name) = ring.handle();
    let reader_ring = Ring::attach(buffer, &name)?;
    let reader = Storage::new(&reader_ring, st.max_object_size, st.n_readers, true)?;
    let mut placed = Vec::with_capacity(count);
    let start = Instant::now();
    for i in 0..count {
        let key = format!("{prefix}{i}");
        let at = i % MODULUS;
        let (address, id) = st.put(ring, &key, metadata, &[&made[at..at + size]])?;
        let signature = st.get_signature(ring, &key)?;
        reader.get(&reader_ring, address, id, &SigArg::Bytes(signature.to_vec()), &KeyArg::Str(key))?;
        placed.push((address, id, signature));
    }
    Ok((start.elapsed().as_secs_f64(), placed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_in_the_segment_and_counted() {
        let mut ring = Ring::create(4 * (64 + 16), None).unwrap();
        let mut st = Storage::new(&ring, 4 + 1 + 64, 1, false).unwrap();
        let (seconds, placed) = own_loop(&mut st, &mut ring, "b-", 3, 64, b"\x01").unwrap();
        assert!(seconds > 0.0 && placed.len() == 3);
        for (i, (address, _, _)) in placed.iter().enumerate() {
            assert_eq!(st.read_count(&ring, *address).unwrap(), 1);
            let (view, _) = ring.access_buf(*address).unwrap();
            let object = ring.read(view.sub(4, view.len as i128)).unwrap();
            let value: Vec<u8> = (0..64).map(|j| ((i + j) % MODULUS) as u8).collect();
            assert_eq!(object, [b"\x01".to_vec(), value].concat());
        }
    }
}
