//! The seed's ring buffer: `[32-byte secret][chunks...]`, a chunk being
//! `[4-byte id][4-byte size incl. header][data]`, little-endian signed.
//! Addresses grow monotonically across laps (physical = 32 + address % size);
//! ids run modulo `id_max`. Integers are i128 so that the arithmetic is
//! Python's (no overflow where the seed has none).

use crate::error::{assertion, overflow, Result, StoreError};
use crate::sys::{random_bytes, Segment};
use std::collections::HashMap;

pub const SECRET_BYTES: i128 = 32;
pub const ID_NBYTES: i128 = 4;
#[cfg(not(feature = "short_header"))]
pub const SIZE_NBYTES: i128 = 4;
#[cfg(feature = "short_header")]
pub const SIZE_NBYTES: i128 = 3; // mutant: the header is one byte short
pub const MD_SIZE: i128 = ID_NBYTES + SIZE_NBYTES;
pub const DEFAULT_ID_MAX: i128 = 1 << 31;

/// Python's `a % b` (the result takes b's sign).
pub fn py_mod(a: i128, b: i128) -> Result<i128> {
    if b == 0 {
        return Err(StoreError::new("ZeroDivisionError", "integer modulo by zero"));
    }
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r })
}

/// Python's `a // b`.
pub fn py_div(a: i128, b: i128) -> Result<i128> {
    let r = py_mod(a, b)?;
    Ok((a - r) / b)
}

/// Python's `buf[start:stop]` on a buffer of `len` bytes: (offset, length).
pub fn py_slice(start: i128, stop: i128, len: usize) -> (usize, usize) {
    let l = len as i128;
    let norm = |i: i128| if i < 0 { (i + l).max(0) } else { i.min(l) };
    let (s, e) = (norm(start), norm(stop));
    (s as usize, (e - s).max(0) as usize)
}

/// The seed's `int2byte`: 4 bytes, little-endian, signed.
pub fn int2byte(v: i128) -> Result<[u8; 4]> {
    #[cfg(not(feature = "unsigned_count"))]
    let ok = (-(1i128 << 31)..(1i128 << 31)).contains(&v);
    #[cfg(feature = "unsigned_count")]
    let ok = (0..(1i128 << 32)).contains(&v); // mutant: unsigned
    if !ok {
        return Err(overflow("int too big to convert"));
    }
    Ok((v as i64 as u32).to_le_bytes())
}

/// The seed's `byte2int`: little-endian, signed, any length (a short slice
/// reads what it has, as `int.from_bytes` does).
pub fn byte2int(b: &[u8]) -> i128 {
    let mut v: i128 = 0;
    for (i, x) in b.iter().enumerate() {
        v |= (*x as i128) << (8 * i);
    }
    #[cfg(not(feature = "unsigned_count"))]
    if !b.is_empty() && b[b.len() - 1] & 0x80 != 0 {
        v -= 1i128 << (8 * b.len());
    }
    v
}

/// A view on the segment: `len` bytes from `start` (absolute offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub start: usize,
    pub len: usize,
}

impl View {
    /// `view[a:b]` with Python's slice rules.
    pub fn sub(&self, a: i128, b: i128) -> View {
        let (s, n) = py_slice(a, b, self.len);
        View { start: self.start + s, len: n }
    }
}

pub struct Ring {
    seg: Option<Segment>,
    pub name: String,
    pub data_buffer_size: i128,
    pub is_writer: bool,
    pub id_max: i128,
    pub monotonic_id_start: i128,
    pub monotonic_id_end: i128,
    pub data_buffer_start: i128,
    pub data_buffer_end: i128,
    /// Writer only: id -> address of each live chunk.
    pub metadata: HashMap<i128, i128>,
}

impl Ring {
    /// The writer's ring: a new segment of `data_buffer_size + 32` bytes and a new secret.
    pub fn create(data_buffer_size: i128, name: Option<&str>) -> Result<Ring> {
        let total = data_buffer_size + SECRET_BYTES;
        if total <= 0 || total > (1i128 << 40) {
            return Err(StoreError::new("ValueError", "'size' must be a positive number different from zero"));
        }
        let seg = Segment::create(name, total as usize)?;
        let ring = Ring::new(seg, data_buffer_size, true);
        ring.init_auth_secret()?; // on an error the ring is dropped: unlinked
        Ok(ring)
    }

    /// A reader's ring on an existing segment.
    pub fn attach(data_buffer_size: i128, name: &str) -> Result<Ring> {
        let seg = Segment::attach(name)?;
        if (seg.len() as i128) < data_buffer_size + SECRET_BYTES {
            return Err(assertion(format!(
                "segment '{name}' has {} bytes, fewer than {}",
                seg.len(),
                data_buffer_size + SECRET_BYTES
            )));
        }
        Ok(Ring::new(seg, data_buffer_size, false))
    }

    fn new(seg: Segment, data_buffer_size: i128, is_writer: bool) -> Ring {
        Ring {
            name: seg.name.clone(),
            seg: Some(seg),
            data_buffer_size,
            is_writer,
            id_max: DEFAULT_ID_MAX,
            monotonic_id_start: 0,
            monotonic_id_end: 0,
            data_buffer_start: 0,
            data_buffer_end: 0,
            metadata: HashMap::new(),
        }
    }

    /// `buf[:32] = 32 random bytes` (a segment under 32 bytes refuses, as a memoryview does).
    fn init_auth_secret(&self) -> Result<()> {
        let whole = View { start: 0, len: self.seg()?.len() };
        let secret = random_bytes(SECRET_BYTES as usize);
        #[cfg(feature = "zero_secret")]
        let secret = vec![0u8; secret.len()]; // mutant: the secret stays at zeros
        self.write(whole.sub(0, SECRET_BYTES), &secret)
    }

    pub fn seg(&self) -> Result<&Segment> {
        self.seg.as_ref().ok_or_else(|| assertion("Buffer has been closed"))
    }

    pub fn handle(&self) -> (i128, String) {
        (self.data_buffer_size, self.name.clone())
    }

    pub fn get_auth_secret(&self) -> Result<Vec<u8>> {
        Ok(self.seg()?.read(0, SECRET_BYTES as usize))
    }

    pub fn read(&self, v: View) -> Result<Vec<u8>> {
        Ok(self.seg()?.read(v.start, v.len))
    }

    /// Write `data` into view `v`; like a memoryview slice assignment, the
    /// lengths must agree.
    pub fn write(&self, v: View, data: &[u8]) -> Result<()> {
        if v.len != data.len() {
            return Err(StoreError::new(
                "ValueError",
                "memoryview assignment: lvalue and rvalue have different structures",
            ));
        }
        self.seg()?.write(v.start, data);
        Ok(())
    }

    pub fn clear(&mut self) -> Result<()> {
        if !self.is_writer {
            return Err(assertion("Only the writer can clear the buffer."));
        }
        self.metadata.clear();
        // ids keep increasing: a handle from before the clear fails the id check
        self.monotonic_id_start = self.monotonic_id_end;
        self.data_buffer_start = 0;
        self.data_buffer_end = 0;
        Ok(())
    }

    pub fn close(&mut self) {
        if self.seg.take().is_some() && self.is_writer {
            let _ = Segment::unlink(&self.name); // already gone: fine, as the seed
        }
    }

    /// Place a chunk of `MD_SIZE + size` bytes; returns (address, id).
    pub fn allocate_buf(&mut self, size: i128) -> Result<(i128, i128)> {
        if !self.is_writer {
            return Err(assertion("Only the writer can allocate buffers."));
        }
        if size <= 0 {
            return Err(assertion("Size must be greater than 0"));
        }
        self.seg()?;
        let size = size + MD_SIZE;
        let n = self.data_buffer_size;
        let mut end = self.data_buffer_end;
        if py_mod(end, n)? + size > n {
            end = (py_div(end, n)? + 1) * n; // no room left in this lap: the next one
        }
        if end + size - self.data_buffer_start > n {
            return Err(StoreError::new(
                "MemoryError",
                "Not enough space in the data buffer, try calling free_buf() to free up space",
            ));
        }
        self.data_buffer_end = end;
        let phys = SECRET_BYTES + py_mod(end, n)?;
        let seg_len = self.seg()?.len();
        let id_bytes = int2byte(self.monotonic_id_end)?;
        let id_view = View { start: 0, len: seg_len }.sub(phys, phys + ID_NBYTES);
        self.write(id_view, &id_bytes)?;
        let size_bytes = int2byte(size)?;
        let size_view = View { start: 0, len: seg_len }.sub(phys + ID_NBYTES, phys + MD_SIZE);
        self.seg()?.write(size_view.start, &size_bytes[..size_view.len.min(4)]);
        self.metadata.insert(py_mod(self.monotonic_id_end, self.id_max)?, end);
        let placed = (end, self.monotonic_id_end);
        self.data_buffer_end += size;
        self.monotonic_id_end = py_mod(self.monotonic_id_end + 1, self.id_max)?;
        Ok(placed)
    }

    /// The chunk at `address`: its data view and the header's (id, size),
    /// read as the seed reads them (no bound check beyond Python's slices).
    pub fn access_buf(&self, address: i128) -> Result<(View, (i128, i128))> {
        let seg_len = self.seg()?.len();
        let whole = View { start: 0, len: seg_len };
        let phys = SECRET_BYTES + py_mod(address, self.data_buffer_size)?;
        let md = self.read(whole.sub(phys, phys + MD_SIZE))?;
        let id = byte2int(&md[..md.len().min(ID_NBYTES as usize)]);
        let size = byte2int(&md[md.len().min(ID_NBYTES as usize)..]);
        Ok((whole.sub(phys + MD_SIZE, phys + size), (id, size)))
    }

    /// Reclaim chunks oldest first while `is_free` says so and fewer than
    /// `nbytes` are freed; returns the freed ids in order.
    pub fn free_buf(
        &mut self,
        is_free: &mut dyn FnMut(&Ring, i128, View) -> Result<bool>,
        nbytes: Option<i128>,
    ) -> Result<Vec<i128>> {
        if !self.is_writer {
            return Err(assertion("Only the writer can free buffers."));
        }
        let before = self.monotonic_id_start;
        let nbytes = nbytes.unwrap_or(self.data_buffer_size);
        let mut freed: i128 = 0;
        while freed < nbytes {
            let Some(&address) = self.metadata.get(&self.monotonic_id_start) else { break };
            let (view, (_, size)) = self.access_buf(address)?;
            if !is_free(self, self.monotonic_id_start, view)? {
                break; // still being read
            }
            self.metadata.remove(&self.monotonic_id_start);
            self.monotonic_id_start = py_mod(self.monotonic_id_start + 1, self.id_max)?;
            if let Some(&next) = self.metadata.get(&self.monotonic_id_start) {
                self.data_buffer_start +=
                    py_mod(next - self.data_buffer_start, self.data_buffer_size)?;
            } else {
                self.data_buffer_start = 0;
                self.data_buffer_end = 0;
            }
            freed += size;
        }
        if self.data_buffer_start >= self.data_buffer_size {
            self.data_buffer_start -= self.data_buffer_size;
            self.data_buffer_end -= self.data_buffer_size;
        }
        let after = self.monotonic_id_start;
        Ok(if after >= before {
            (before..after).collect()
        } else {
            (before..self.id_max).chain(0..after).collect()
        })
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: i128) -> Ring {
        Ring::create(n, None).unwrap()
    }

    #[test]
    fn ints_are_little_endian_signed() {
        assert_eq!(int2byte(1).unwrap(), [1, 0, 0, 0]);
        assert_eq!(int2byte(-2).unwrap(), [0xfe, 0xff, 0xff, 0xff]);
        for v in [0, 1, -2, (1 << 31) - 1, -(1 << 31)] {
            assert_eq!(byte2int(&int2byte(v).unwrap()), v);
        }
        assert_eq!(int2byte(1 << 31).unwrap_err().kind, "OverflowError");
        assert_eq!(byte2int(&[0xff, 0x7f]), 0x7fff);
        assert_eq!(byte2int(&[0xff]), -1);
    }

    #[test]
    fn python_arithmetic() {
        assert_eq!(py_mod(-1, 100).unwrap(), 99);
        assert_eq!(py_div(-1, 100).unwrap(), -1);
        assert_eq!(py_slice(10, -5, 100), (10, 85));
        assert_eq!(py_slice(50, 20, 100), (50, 0));
        assert_eq!(py_slice(90, 200, 100), (90, 10));
        assert_eq!(py_mod(1, 0).unwrap_err().kind, "ZeroDivisionError");
    }

    #[test]
    fn the_seeds_scenarios() {
        // The seed's docstring: 100 bytes, 20 then 30, then frees, then a wrap.
        let mut r = ring(100);
        assert_eq!(r.allocate_buf(20).unwrap(), (0, 0));
        assert_eq!(r.allocate_buf(30).unwrap(), (28, 1));
        assert_eq!(r.data_buffer_end, 66);
        let (view, (id, size)) = r.access_buf(28).unwrap();
        assert_eq!((id, size, view.len), (1, 38, 30));
        let freed = r.free_buf(&mut |_, id, _| Ok(id == 0), None).unwrap();
        assert_eq!((freed, r.data_buffer_start), (vec![0], 28));
        let freed = r.free_buf(&mut |_, _, _| Ok(true), None).unwrap();
        assert_eq!((freed, r.data_buffer_start, r.data_buffer_end), (vec![1], 0, 0));
        assert_eq!(r.allocate_buf(20).unwrap(), (0, 2));
        assert_eq!(r.allocate_buf(30).unwrap(), (28, 3));
        let e = r.allocate_buf(40).unwrap_err();
        assert_eq!(e.kind, "MemoryError");
        r.free_buf(&mut |_, _, _| Ok(true), Some(1)).unwrap();
        assert_eq!(r.allocate_buf(20).unwrap(), (66, 4));
        r.free_buf(&mut |_, _, _| Ok(true), Some(1)).unwrap();
        assert_eq!(r.data_buffer_start, 66);
        assert_eq!(r.allocate_buf(40).unwrap(), (100, 5)); // the next lap
        r.clear().unwrap();
        assert_eq!((r.monotonic_id_start, r.monotonic_id_end), (6, 6));
        assert_eq!(r.allocate_buf(8).unwrap(), (0, 6));
    }

    #[test]
    fn refusals() {
        let mut r = ring(64);
        assert_eq!(r.allocate_buf(0).unwrap_err().kind, "AssertionError");
        assert_eq!(r.allocate_buf(57).unwrap_err().kind, "MemoryError");
        let reader = Ring::attach(64, &r.name.clone()).unwrap();
        assert_eq!(reader.get_auth_secret().unwrap(), r.get_auth_secret().unwrap());
        r.close();
        assert_eq!(r.allocate_buf(8).unwrap_err().kind, "AssertionError");
        assert_eq!(Ring::attach(64, &r.name).err().unwrap().kind, "FileNotFoundError");
    }

    #[test]
    fn small_id_max_wraps() {
        let mut r = ring(1000);
        r.id_max = 3;
        for want in [0, 1, 2] {
            assert_eq!(r.allocate_buf(8).unwrap().1, want);
        }
        let freed = r.free_buf(&mut |_, _, _| Ok(true), Some(17)).unwrap();
        assert_eq!(freed, vec![0, 1]);
        assert_eq!(r.allocate_buf(8).unwrap().1, 0);
        let freed = r.free_buf(&mut |_, _, _| Ok(true), None).unwrap();
        assert_eq!(freed, vec![2, 0]);
    }
}
