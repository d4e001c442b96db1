//! The seed's object storage on the ring: an object is
//! `[4-byte read count][serde metadata][serde data]`; the writer keeps
//! key -> (address, id), id -> key, id -> hand-outs (`writer_flag`) and the
//! touched ids; handles are signed with HMAC-SHA256 over
//! `sha256(key) || address (8 bytes LE) || id (4 bytes LE)`, keyed by the
//! segment's first 32 bytes. Values are the bytes a serde produced: the
//! program never needs to know the serde.

use crate::error::{assertion, attribute_error, key_error, overflow, value_error, Result, StoreError};
use crate::ring::{byte2int, int2byte, Ring, View};
use crate::sha256::{constant_time_eq, hmac_sha256, sha256};
use std::collections::{HashMap, HashSet};

pub const FLAG_BYTES: i128 = 4;

/// A key argument as the caller passed it (the seed checks its type late).
#[derive(Clone, Debug)]
pub enum KeyArg {
    None,
    Str(String),
    /// Not a string: its dict key if hashable (a number: proto's
    /// FOREIGN_KEY form), None if not (a list).
    Other { dict_key: Option<String> },
}

/// An integer argument as the caller passed it: Python would carry on with
/// a float or None until an operation refuses it, so the refusal comes
/// where the seed's would (AttributeError at `to_bytes`, TypeError at `%`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    Int(i128),
    Other(&'static str),
}

impl From<i128> for Num {
    fn from(i: i128) -> Num {
        Num::Int(i)
    }
}

impl Num {
    fn to_bytes(self) -> Result<i128> {
        match self {
            Num::Int(i) => Ok(i),
            Num::Other(t) => Err(StoreError::new("AttributeError", format!("'{t}' object has no attribute 'to_bytes'"))),
        }
    }

    fn modulo(self) -> Result<i128> {
        match self {
            Num::Int(i) => Ok(i),
            Num::Other(t) => Err(StoreError::new("TypeError", format!("unsupported operand type(s) for %: '{t}' and 'int'"))),
        }
    }
}

/// A signature argument: absent, 32 bytes, or anything else.
#[derive(Clone, Debug)]
pub enum SigArg {
    None,
    Bytes(Vec<u8>),
    Bad,
}

struct WriterIndex {
    key_index: HashMap<String, (i128, i128)>,
    id_index: HashMap<i128, String>,
    writer_flag: HashMap<i128, i128>,
    touched: HashSet<i128>,
}

pub struct Storage {
    pub is_writer: bool,
    pub max_object_size: i128,
    pub n_readers: i128,
    pub has_reader_lock: bool,
    w: Option<WriterIndex>,
}

/// A read opened but not yet counted: the chunk's data view as the id
/// check found it (the seed's `get` between its id check and its count).
#[derive(Clone, Copy, Debug)]
pub struct OpenRead {
    pub view: View,
}

impl Storage {
    pub fn new(ring: &Ring, max_object_size: i128, n_readers: i128, has_reader_lock: bool) -> Result<Storage> {
        let w = if ring.is_writer {
            Some(WriterIndex {
                key_index: HashMap::new(),
                id_index: HashMap::new(),
                writer_flag: HashMap::new(),
                touched: HashSet::new(),
            })
        } else {
            if !has_reader_lock {
                return Err(value_error("Lock must be provided for readers."));
            }
            None
        };
        Ok(Storage { is_writer: ring.is_writer, max_object_size, n_readers, has_reader_lock, w })
    }

    fn w(&self, what: &str) -> Result<&WriterIndex> {
        self.w.as_ref().ok_or_else(|| attribute_error(what))
    }

    fn w_mut(&mut self, what: &str) -> Result<&mut WriterIndex> {
        self.w.as_mut().ok_or_else(|| attribute_error(what))
    }

    pub fn clear(&mut self, ring: &mut Ring) -> Result<()> {
        if let Some(w) = self.w.as_mut() {
            ring.clear()?;
            w.key_index.clear();
            w.id_index.clear();
            w.writer_flag.clear();
            w.touched.clear();
        }
        Ok(())
    }

    fn make_signature(&self, ring: &Ring, key: &str, address: Num, id: Num) -> Result<[u8; 32]> {
        let (address, id) = (address.to_bytes()?, id.to_bytes()?);
        if !(0..(1i128 << 64)).contains(&address) || !(0..(1i128 << 32)).contains(&id) {
            return Err(overflow(if address < 0 || id < 0 {
                "can't convert negative int to unsigned"
            } else {
                "int too big to convert"
            }));
        }
        let mut payload = sha256(key.as_bytes()).to_vec();
        payload.extend_from_slice(&(address as u64).to_le_bytes());
        payload.extend_from_slice(&(id as u32).to_le_bytes());
        Ok(hmac_sha256(&ring.get_auth_secret()?, &payload))
    }

    /// The writer checks that the handle is the key's current entry; then
    /// everyone checks the HMAC.
    pub fn verify_signature(&self, ring: &Ring, key: &KeyArg, address: impl Into<Num>, id: impl Into<Num>, sig: &SigArg) -> Result<()> {
        let (address, id): (Num, Num) = (address.into(), id.into());
        let invalid = || value_error("Invalid SHM handle signature for cache key.");
        if let Some(w) = self.w.as_ref() {
            let current = match key {
                KeyArg::None => return Err(invalid()),
                KeyArg::Str(k) => w.key_index.get(k).copied(),
                KeyArg::Other { dict_key: None } => {
                    return Err(StoreError::new("TypeError", "unhashable key"))
                }
                KeyArg::Other { dict_key: Some(k) } => w.key_index.get(k).copied(),
            };
            if current.map(|(a, i)| (Num::Int(a), Num::Int(i))) != Some((address, id)) {
                return Err(invalid());
            }
        }
        let (sig, key) = match (sig, key) {
            (SigArg::None, _) | (_, KeyArg::None) => {
                return Err(value_error("Missing SHM handle signature for cache key."))
            }
            (SigArg::Bytes(s), KeyArg::Str(k)) if s.len() == 32 => (s, k),
            _ => return Err(invalid()),
        };
        let expected = self.make_signature(ring, key, address, id)?;
        if !constant_time_eq(sig, &expected) {
            return Err(invalid());
        }
        Ok(())
    }

    pub fn is_cached(&self, key: &str) -> Result<bool> {
        Ok(self.w("key_index")?.key_index.contains_key(key))
    }

    pub fn get_cached(&mut self, key: &str) -> Result<(i128, i128)> {
        let w = self.w_mut("key_index")?;
        let (address, id) = *w.key_index.get(key).ok_or_else(|| key_error(key))?;
        *w.writer_flag.entry(id).or_insert(0) += 1;
        w.touched.remove(&id);
        Ok((address, id))
    }

    pub fn release_touches(&mut self) -> Result<()> {
        self.w_mut("_touched")?.touched.clear();
        Ok(())
    }

    pub fn get_signature(&self, ring: &Ring, key: &str) -> Result<[u8; 32]> {
        let (address, id) = *self.w("key_index")?.key_index.get(key).ok_or_else(|| key_error(key))?;
        if key.starts_with(crate::proto::FOREIGN_KEY) {
            return Err(StoreError::new("AttributeError", "a key that is not a str has no 'encode'"));
        }
        self.make_signature(ring, key, address.into(), id.into())
    }

    /// Reclaim the oldest chunks that are done, aiming at 2 * max_object_size bytes.
    pub fn free_unused(&mut self, ring: &mut Ring) -> Result<Vec<i128>> {
        if !ring.is_writer {
            return Err(assertion("Only the writer can free buffers."));
        }
        let (w, n_readers) = (self.w.as_ref(), self.n_readers);
        let freed = ring
            .free_buf(&mut |r, id, v| is_free(w, n_readers, r, id, v), Some(2 * self.max_object_size))?;
        let w = self.w_mut("id_index")?;
        for id in &freed {
            let key = w.id_index.remove(id).ok_or_else(|| StoreError::new("KeyError", id.to_string()))?;
            w.key_index.remove(&key);
            w.writer_flag.remove(id);
        }
        Ok(freed)
    }

    /// Store an object `[count 0][metadata][data frames...]` under `key`.
    pub fn put<F: AsRef<[u8]>>(&mut self, ring: &mut Ring, key: &str, metadata: &[u8], frames: &[F]) -> Result<(i128, i128)> {
        if self.w("key_index")?.key_index.contains_key(key) {
            return Err(value_error(format!("Key '{key}' already exists in the storage.")));
        }
        let data_bytes: usize = frames.iter().map(|f| f.as_ref().len()).sum();
        let buffer_size = FLAG_BYTES + data_bytes as i128 + metadata.len() as i128;
        if buffer_size > self.max_object_size {
            return Err(value_error(format!(
                "Serialized object size ({buffer_size} bytes) exceeds max object size ({} bytes)",
                self.max_object_size
            )));
        }
        let (address, id) = match ring.allocate_buf(buffer_size) {
            Err(e) if e.kind == "MemoryError" => {
                self.free_unused(ring)?;
                ring.allocate_buf(buffer_size)?
            }
            other => other?,
        };
        let (view, _) = ring.access_buf(address)?;
        ring.write(view.sub(0, FLAG_BYTES), &int2byte(0)?)?;
        let mut at = FLAG_BYTES;
        ring.write(view.sub(at, at + metadata.len() as i128), metadata)?;
        at += metadata.len() as i128;
        for f in frames {
            let f = f.as_ref();
            ring.write(view.sub(at, at + f.len() as i128), f)?;
            at += f.len() as i128;
        }
        let w = self.w_mut("key_index")?;
        *w.writer_flag.entry(id).or_insert(0) += 1;
        w.key_index.insert(key.to_string(), (address, id));
        w.id_index.insert(id, key.to_string());
        Ok((address, id))
    }

    /// A read's first part: a reader checks the signature, then the chunk's
    /// id is checked.
    pub fn get_begin(&self, ring: &Ring, address: impl Into<Num>, id: impl Into<Num>, sig: &SigArg, key: &KeyArg) -> Result<OpenRead> {
        let (address, id): (Num, Num) = (address.into(), id.into());
        if !self.is_writer {
            self.verify_signature(ring, key, address, id, sig)?;
        }
        let (view, (chunk_id, _)) = ring.access_buf(address.modulo()?)?;
        if Num::Int(chunk_id) != id {
            let (address, id) = (show(address), show(id));
            return Err(value_error(format!(
                "Data for address:id '{address}:{id}' has been modified or is invalid."
            )));
        }
        Ok(OpenRead { view })
    }

    /// The copy: the object's bytes after the count, as they are now.
    pub fn get_copy(&self, ring: &Ring, open: OpenRead) -> Result<Vec<u8>> {
        ring.read(open.view.sub(FLAG_BYTES, open.view.len as i128))
    }

    /// A read's last part: count it in the view the id check found (the
    /// seed re-checks nothing here), under the readers' lock (the caller
    /// holds it: reader_lock "oracle"); a writer without the lock counts nothing.
    pub fn get_end(&self, ring: &Ring, open: OpenRead) -> Result<()> {
        if !self.has_reader_lock {
            if !self.is_writer {
                return Err(assertion("a reader without a lock"));
            }
            return Ok(());
        }
        #[cfg(feature = "uncounted_read")]
        if !self.is_writer {
            let _ = (ring, open);
            return Ok(()); // mutant: a reader never counts its read
        }
        let count_view = open.view.sub(0, FLAG_BYTES);
        let count = byte2int(&ring.read(count_view)?);
        ring.write(count_view, &int2byte(count + 1)?)
    }

    pub fn get(&self, ring: &Ring, address: impl Into<Num>, id: impl Into<Num>, sig: &SigArg, key: &KeyArg) -> Result<Vec<u8>> {
        let open = self.get_begin(ring, address, id, sig, key)?;
        let payload = self.get_copy(ring, open)?;
        self.get_end(ring, open)?;
        Ok(payload)
    }

    /// Writer without the lock: protect the key's chunk until its lookup or
    /// release_touches. Otherwise (readers, a writer with the lock): check
    /// the handle and the chunk's id, count nothing.
    pub fn touch(&mut self, ring: &Ring, key: &KeyArg, address: impl Into<Num>, id: impl Into<Num>, sig: &SigArg) -> Result<()> {
        let (address, id): (Num, Num) = (address.into(), id.into());
        if !self.has_reader_lock {
            let w = self.w_mut("key_index")?;
            let k = match key {
                KeyArg::Str(k) | KeyArg::Other { dict_key: Some(k) } => k,
                KeyArg::None => "\u{0}json:null",
                KeyArg::Other { dict_key: None } => {
                    return Err(StoreError::new("TypeError", "unhashable key"))
                }
            };
            if let Some(&(_, kid)) = w.key_index.get(k) {
                w.touched.insert(kid);
            }
            return Ok(());
        }
        self.verify_signature(ring, key, address, id, sig)?;
        let (_, (chunk_id, _)) = ring.access_buf(address.modulo()?)?;
        if Num::Int(chunk_id) != id {
            let (address, id) = (show(address), show(id));
            return Err(value_error(format!(
                "Data for address:id '{address}:{id}' has been modified or is invalid."
            )));
        }
        Ok(())
    }

    /// The read count of the object at `address` (the oracle's optional hook).
    pub fn read_count(&self, ring: &Ring, address: i128) -> Result<i128> {
        let (view, _) = ring.access_buf(address)?;
        Ok(byte2int(&ring.read(view.sub(0, FLAG_BYTES))?))
    }
}

/// The seed's free rule: not touched, and the chunk's count has reached
/// hand-outs * n_readers.
fn is_free(w: Option<&WriterIndex>, n_readers: i128, ring: &Ring, id: i128, view: View) -> Result<bool> {
    let w = w.ok_or_else(|| attribute_error("writer_flag"))?;
    if w.touched.contains(&id) {
        return Ok(false);
    }
    let reader_count = byte2int(&ring.read(view.sub(0, FLAG_BYTES))?);
    let writer_count = *w.writer_flag.get(&id).ok_or_else(|| StoreError::new("KeyError", id.to_string()))?;
    #[cfg(not(feature = "free_without_readers"))]
    return Ok(reader_count >= writer_count * n_readers);
    #[cfg(feature = "free_without_readers")]
    return Ok(reader_count >= writer_count + 0 * n_readers); // mutant: one read frees it
}


/// A number as Python prints it in the seed's messages.
fn show(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Other(t) => format!("<{t}>"),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A storage and its ring, as the program keeps them.
    struct St {
        r: Ring,
        s: Storage,
    }

    fn writer(size: i128, max: i128, n_readers: i128) -> St {
        let r = Ring::create(size, None).unwrap();
        let s = Storage::new(&r, max, n_readers, false).unwrap();
        St { r, s }
    }

    fn reader(w: &St) -> St {
        let (size, name) = w.r.handle();
        let r = Ring::attach(size, &name).unwrap();
        let s = Storage::new(&r, w.s.max_object_size, w.s.n_readers, true).unwrap();
        St { r, s }
    }

    impl St {
        fn put(&mut self, key: &str, md: &[u8], frames: &[Vec<u8>]) -> Result<(i128, i128)> {
            self.s.put(&mut self.r, key, md, frames)
        }
        fn get(&self, h: &(i128, i128, SigArg, KeyArg)) -> Result<Vec<u8>> {
            self.s.get(&self.r, h.0, h.1, &h.2, &h.3)
        }
        fn free(&mut self) {
            self.s.free_unused(&mut self.r).unwrap();
        }
        fn cached(&self, key: &str) -> bool {
            self.s.is_cached(key).unwrap()
        }
        fn handle(&self, key: &str, placed: (i128, i128)) -> (i128, i128, SigArg, KeyArg) {
            let sig = self.s.get_signature(&self.r, key).unwrap().to_vec();
            (placed.0, placed.1, SigArg::Bytes(sig), KeyArg::Str(key.into()))
        }
    }

    #[test]
    fn put_get_layout() {
        let mut w = writer(1024, 100, 1);
        let placed = w.put("k", b"MD", &[b"abc".to_vec(), b"de".to_vec()]).unwrap();
        assert_eq!(placed, (0, 0));
        // [id 0][size 8+4+2+5][count 0]["MD"]["abcde"] after the 32-byte secret
        let seg = w.r.seg().unwrap();
        assert_eq!(seg.read(32, 8), [0, 0, 0, 0, 19, 0, 0, 0]);
        assert_eq!(seg.read(40, 11), b"\0\0\0\0MDabcde");
        let r = reader(&w);
        assert_eq!(r.get(&w.handle("k", placed)).unwrap(), b"MDabcde");
        assert_eq!(w.s.read_count(&w.r, 0).unwrap(), 1);
        assert_eq!(w.put("k", b"", &[b"x".to_vec()]).unwrap_err().kind, "ValueError");
        assert_eq!(w.put("big", &[0; 97], &[]).unwrap_err().kind, "ValueError");
    }

    #[test]
    fn signatures_refuse_forgeries() {
        let mut w = writer(1024, 100, 1);
        let placed = w.put("k", b"", &[b"v".to_vec()]).unwrap();
        let r = reader(&w);
        let h = w.handle("k", placed);
        let (a, i, s, k) = h.clone();
        r.s.verify_signature(&r.r, &k, a, i, &s).unwrap();
        w.s.verify_signature(&w.r, &k, a, i, &s).unwrap();
        let SigArg::Bytes(mut bad) = s.clone() else { unreachable!() };
        bad[0] ^= 1;
        let e = r.get(&(a, i, SigArg::Bytes(bad), k.clone())).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), ("ValueError", "Invalid SHM handle signature for cache key."));
        let e = r.get(&(a, i, SigArg::None, k.clone())).unwrap_err();
        assert_eq!(e.message, "Missing SHM handle signature for cache key.");
        assert_eq!(r.get(&(a, i, SigArg::Bad, k.clone())).unwrap_err().kind, "ValueError");
        assert_eq!(r.get(&(a, i + 1, s.clone(), k.clone())).unwrap_err().kind, "ValueError");
        assert_eq!(r.get(&(a, i, s.clone(), KeyArg::Str("j".into()))).unwrap_err().kind, "ValueError");
        assert_eq!(r.get(&(-1, i, s.clone(), k.clone())).unwrap_err().kind, "OverflowError");
        // the writer also wants the key's current entry
        assert_eq!(w.s.verify_signature(&w.r, &KeyArg::None, a, i, &s).unwrap_err().kind, "ValueError");
    }

    #[test]
    fn free_rule_counts_every_reader() {
        let mut w = writer(1024, 100, 2);
        let placed = w.put("k", b"", &[b"v".to_vec()]).unwrap();
        let (r1, r2) = (reader(&w), reader(&w));
        let h = w.handle("k", placed);
        r1.get(&h).unwrap();
        w.free();
        assert!(w.cached("k"), "one read of two freed it");
        r2.get(&h).unwrap();
        w.free();
        assert!(!w.cached("k"));
    }

    #[test]
    fn touches_protect_until_lookup_or_release() {
        let mut w = writer(1024, 100, 1);
        let placed = w.put("k", b"", &[b"v".to_vec()]).unwrap();
        let mut r = reader(&w);
        let h = w.handle("k", placed);
        r.get(&h).unwrap();
        w.s.touch(&w.r, &KeyArg::Str("k".into()), 0, 0, &SigArg::None).unwrap();
        w.s.touch(&w.r, &KeyArg::Str("absent".into()), 0, 0, &SigArg::None).unwrap();
        w.free();
        assert!(w.cached("k"));
        w.s.release_touches().unwrap();
        w.free();
        assert!(!w.cached("k"));
        // a reader's touch only validates (the freed chunk's bytes are still there)
        r.s.touch(&r.r, &h.3, h.0, h.1, &h.2).unwrap();
    }

    #[test]
    fn put_frees_oldest_when_full_and_clear_keeps_ids() {
        let mut w = writer(256, 64, 1);
        let r = reader(&w);
        for n in 0..40 {
            let key = format!("k{n}");
            let placed = w.put(&key, b"", &[vec![7u8; 41]]).unwrap();
            assert_eq!(placed.1, n);
            r.get(&w.handle(&key, placed)).unwrap();
        }
        assert!(!w.cached("k0"));
        assert!(w.cached("k39"));
        w.s.clear(&mut w.r).unwrap();
        assert_eq!(w.put("k39", b"", &[b"v".to_vec()]).unwrap(), (0, 40));
        assert_eq!(w.s.get_cached("k0").unwrap_err().kind, "KeyError");
        assert_eq!(r.s.is_cached("k").unwrap_err().kind, "AttributeError");
    }

    #[test]
    fn readers_need_a_lock_and_the_writer_counts_nothing() {
        let mut w = writer(64, 32, 1);
        let (size, name) = w.r.handle();
        let e = Storage::new(&Ring::attach(size, &name).unwrap(), 32, 1, false).err().unwrap();
        assert_eq!(e.kind, "ValueError");
        let placed = w.put("k", b"", &[b"v".to_vec()]).unwrap();
        let plain = (placed.0, placed.1, SigArg::None, KeyArg::None);
        assert_eq!(w.get(&plain).unwrap(), b"v");
        assert_eq!(w.s.read_count(&w.r, 0).unwrap(), 0);
        w.r.close();
        assert_eq!(w.get(&plain).unwrap_err().kind, "AssertionError");
    }

    #[test]
    fn split_read_counts_where_the_id_check_looked() {
        let mut w = writer(1024, 100, 1);
        let placed = w.put("k", b"", &[b"v".to_vec()]).unwrap();
        let r = reader(&w);
        let h = w.handle("k", placed);
        let open = r.s.get_begin(&r.r, h.0, h.1, &h.2, &h.3).unwrap();
        assert_eq!(r.s.get_copy(&r.r, open).unwrap(), b"v");
        r.s.get_end(&r.r, open).unwrap();
        assert_eq!(w.s.read_count(&w.r, 0).unwrap(), 1);
    }

    #[test]
    fn secret_is_random() {
        let (a, b) = (writer(64, 32, 1), writer(64, 32, 1));
        let (sa, sb) = (a.r.get_auth_secret().unwrap(), b.r.get_auth_secret().unwrap());
        assert_eq!(sa.len(), 32);
        assert_ne!(sa, sb);
    }
}
