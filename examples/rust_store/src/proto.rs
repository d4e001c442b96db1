//! shmref's process protocol (docs/protocol.md, version 2): one JSON object
//! a line on stdin and stdout. The program names its rings ("r1"), storages
//! ("s1") and reads in flight ("g1"); arguments arrive as the caller's
//! values and are converted the way the seed's Python would take them.

use crate::error::{Result, StoreError};
use crate::json::{b64decode, b64encode, parse, Value};
use crate::ring::{byte2int, int2byte, Ring};
use crate::storage::{KeyArg, Num, OpenRead, SigArg, Storage};
use std::collections::HashMap;
use std::io::{BufRead, Write};

/// Non-string keys (Python accepts any hashable key) are kept under their
/// JSON text behind this prefix, which no JSON string key starts with in practice.
pub const FOREIGN_KEY: &str = "\u{0}json:";

pub fn hello() -> Value {
    let mut name = format!("rust_store {}", env!("CARGO_PKG_VERSION"));
    for (on, f) in [
        (cfg!(feature = "free_without_readers"), "free_without_readers"),
        (cfg!(feature = "unsigned_count"), "unsigned_count"),
        (cfg!(feature = "short_header"), "short_header"),
        (cfg!(feature = "zero_secret"), "zero_secret"),
        (cfg!(feature = "uncounted_read"), "uncounted_read"),
    ] {
        if on {
            name.push_str(&format!(" (mutant {f})"));
        }
    }
    let caps = [
        "storage.get_begin", "storage.get_copy", "storage.get_end",
        "ring.data_buffer_start", "ring.data_buffer_end", "ring.monotonic_id_start", "ring.monotonic_id_end",
        "ring.ID_MAX", "ring.allocate_buf", "ring.access_buf", "ring.free_buf", "ring.int2byte",
        "ring.byte2int", "ring.get_auth_secret", "bench", "reply.ring_state", "request.pipeline",
        "request.free_ids",
    ];
    obj(vec![
        ("type", s("hello")),
        ("protocol", Value::Int(2)),
        ("name", Value::Str(name)),
        ("roles", Value::Arr(vec![s("writer"), s("reader")])),
        ("capabilities", Value::Arr(caps.iter().map(|c| s(c)).collect())),
        ("reader_lock", s("oracle")),
    ])
}

fn s(text: &str) -> Value {
    Value::Str(text.to_string())
}

fn obj(fields: Vec<(&str, Value)>) -> Value {
    Value::Obj(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn pair(a: i128, b: i128) -> Value {
    Value::Arr(vec![Value::Int(a), Value::Int(b)])
}

fn type_error(what: &str, v: &Value) -> StoreError {
    StoreError::new("TypeError", format!("{what}: an integer is required, not {}", v.type_name()))
}

/// An integer argument as Python takes one (a bool is an int there).
fn int_arg(req: &Value, field: &str) -> Result<i128> {
    match req.get(field).unwrap_or(&Value::Null) {
        Value::Int(i) => Ok(*i),
        Value::Bool(b) => Ok(*b as i128),
        v => Err(type_error(field, v)),
    }
}

/// An integer argument kept as the caller gave it (see storage::Num).
fn num_arg(req: &Value, field: &str) -> Num {
    match req.get(field).unwrap_or(&Value::Null) {
        Value::Int(i) => Num::Int(*i),
        Value::Bool(b) => Num::Int(*b as i128),
        v => Num::Other(v.type_name()),
    }
}

fn str_arg<'a>(req: &'a Value, field: &str) -> Result<&'a str> {
    req.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| StoreError::new("TypeError", format!("{field} must be a string")))
}

fn bytes_arg(v: &Value, field: &str) -> Result<Vec<u8>> {
    let text = v.as_str().ok_or_else(|| StoreError::new("TypeError", format!("{field}: base64 expected")))?;
    b64decode(text).map_err(|e| StoreError::new("ValueError", format!("{field}: {e}")))
}

/// A key as a dict key: a string as it is, another hashable value by its
/// JSON text (Python would store it too), a list or dict refused.
fn dict_key(v: &Value) -> Result<String> {
    match v {
        Value::Str(k) => Ok(k.clone()),
        Value::Arr(_) => Err(StoreError::new("TypeError", "unhashable type: 'list'")),
        Value::Obj(_) if v.type_name() == "dict" => Err(StoreError::new("TypeError", "unhashable type: 'dict'")),
        other => Ok(format!("{FOREIGN_KEY}{}", other.to_json())),
    }
}

fn key_arg(v: &Value) -> KeyArg {
    match v {
        Value::Null => KeyArg::None,
        Value::Str(k) => KeyArg::Str(k.clone()),
        other => KeyArg::Other { dict_key: dict_key(other).ok() },
    }
}

fn sig_arg(v: &Value) -> SigArg {
    match v {
        Value::Null => SigArg::None,
        Value::Arr(items) if items.len() == 32 => {
            let bytes: Option<Vec<u8>> = items
                .iter()
                .map(|b| match b {
                    Value::Int(i) if (0..=255).contains(i) => Some(*i as u8),
                    _ => None,
                })
                .collect();
            bytes.map(SigArg::Bytes).unwrap_or(SigArg::Bad)
        }
        _ => SigArg::Bad,
    }
}

/// What `ring_state` answers, and what every reply to a request on a ring or
/// a storage carries (the capability reply.ring_state): the oracle compares
/// the ring's positions after each step without asking.
fn state_value(ring: &Ring) -> Value {
    obj(vec![
        ("data_buffer_start", Value::Int(ring.data_buffer_start)),
        ("data_buffer_end", Value::Int(ring.data_buffer_end)),
        ("monotonic_id_start", Value::Int(ring.monotonic_id_start)),
        ("monotonic_id_end", Value::Int(ring.monotonic_id_end)),
        ("ID_MAX", Value::Int(ring.id_max)),
    ])
}

fn sig_value(sig: &[u8]) -> Value {
    Value::Arr(sig.iter().map(|b| Value::Int(*b as i128)).collect())
}

struct Entry {
    storage: Storage,
    ring: String,
}

#[derive(Clone)]
struct Read {
    open: OpenRead,
    storage: String,
}

/// The program's objects and its two pipes.
pub struct Server<R: BufRead, W: Write> {
    input: R,
    output: W,
    rings: HashMap<String, Ring>,
    storages: HashMap<String, Entry>,
    reads: HashMap<String, Read>,
    next: u64,
}

fn unknown(kind: &str, id: &str) -> StoreError {
    StoreError::new("KeyError", format!("no {kind} named {id:?} (closed, or never made)"))
}

impl<R: BufRead, W: Write> Server<R, W> {
    pub fn new(input: R, output: W) -> Self {
        Server { input, output, rings: HashMap::new(), storages: HashMap::new(), reads: HashMap::new(), next: 0 }
    }

    fn send(&mut self, v: &Value) -> std::io::Result<()> {
        let mut line = v.to_json();
        line.push('\n');
        self.output.write_all(line.as_bytes())?;
        self.output.flush()
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// Serve until stdin closes; then every object is dropped (a writer
    /// ring unlinks its segment). A line that is not JSON ends the program.
    pub fn run(&mut self) -> std::result::Result<(), String> {
        self.send(&hello()).map_err(|e| e.to_string())?;
        loop {
            let mut line = String::new();
            match self.input.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(format!("reading stdin: {e}")),
            }
            if line.trim().is_empty() {
                continue;
            }
            let req = parse(line.trim_end()).map_err(|e| format!("a request that is not JSON ({e}): {}", line.trim_end()))?;
            let id = match req.get("id") {
                Some(Value::Int(i)) if req.get("type") == Some(&Value::Str("request".into())) => *i,
                _ => return Err(format!("not a request: {}", line.trim_end())),
            };
            let outcome = self.dispatch(id, &req);
            let state = self.ring_state_of(&req, outcome.as_ref().ok());
            let mut reply = match outcome {
                Ok(result) => obj(vec![("type", s("reply")), ("in_reply_to", Value::Int(id)), ("result", result)]),
                Err(e) if e.kind == "ProtocolError" => return Err(e.message),
                Err(e) => obj(vec![
                    ("type", s("reply")),
                    ("in_reply_to", Value::Int(id)),
                    ("error", obj(vec![("kind", s(e.kind)), ("message", Value::Str(e.message))])),
                ]),
            };
            if let (Some(state), Value::Obj(fields)) = (state, &mut reply) {
                fields.push(("ring_state".to_string(), state));
            }
            self.send(&reply).map_err(|e| e.to_string())?;
        }
        self.reads.clear();
        self.storages.clear();
        self.rings.clear();
        Ok(())
    }

    /// The state of the request's ring (its target, or its target's ring)
    /// after the request; for a constructor, of the ring its result names
    /// (or its storage's ring); None for an id it never gave.
    fn ring_state_of(&self, req: &Value, result: Option<&Value>) -> Option<Value> {
        let target = match req.get("object") {
            Some(object) => object.as_str()?,
            None => {
                let made = result?;
                match made.get("ring") {
                    Some(ring) => ring.as_str()?,
                    None => made.get("storage")?.as_str()?,
                }
            }
        };
        let ring = match self.rings.get(target) {
            Some(ring) => ring,
            None => self.rings.get(&self.storages.get(target)?.ring)?,
        };
        Some(state_value(ring))
    }

    fn dispatch(&mut self, id: i128, req: &Value) -> Result<Value> {
        let op = str_arg(req, "op")?.to_string();
        match op.as_str() {
            "create_ring" => return self.create_ring(req),
            "create" => {
                // A ring that is not one of ours: the seed's constructor reads
                // `ring_buffer.is_writer` first (an AttributeError).
                let given = req.get("ring").cloned().unwrap_or(Value::Null);
                let ring_id = given.as_str().unwrap_or("").to_string();
                let ring = self.rings.get(&ring_id).ok_or_else(|| {
                    StoreError::new("AttributeError", format!("'{}' object has no attribute 'is_writer'", given.type_name()))
                })?;
                let storage = Storage::new(
                    ring,
                    int_arg(req, "max_object_size")?,
                    int_arg(req, "n_readers")?,
                    req.get("reader_lock") == Some(&Value::Bool(true)),
                )?;
                let is_writer = storage.is_writer;
                let sid = self.fresh("s");
                self.storages.insert(sid.clone(), Entry { storage, ring: ring_id });
                return Ok(obj(vec![("storage", Value::Str(sid)), ("is_writer", Value::Bool(is_writer))]));
            }
            "attach" => {
                let handle = match req.get("ring_buffer_handle") {
                    Some(Value::Arr(h)) if h.len() == 2 => h,
                    _ => return Err(StoreError::new("TypeError", "ring_buffer_handle: [size, name] expected")),
                };
                let size = match &handle[0] {
                    Value::Int(i) => *i,
                    v => return Err(type_error("data_buffer_size", v)),
                };
                let name = handle[1].as_str().ok_or_else(|| StoreError::new("TypeError", "segment name: a string expected"))?;
                let ring = Ring::attach(size, name)?;
                let storage = Storage::new(
                    &ring,
                    int_arg(req, "max_object_size")?,
                    int_arg(req, "n_readers")?,
                    req.get("reader_lock") == Some(&Value::Bool(true)),
                )?;
                let (rid, sid) = (self.fresh("r"), self.fresh("s"));
                self.rings.insert(rid.clone(), ring);
                self.storages.insert(sid.clone(), Entry { storage, ring: rid.clone() });
                return Ok(obj(vec![
                    ("storage", Value::Str(sid)),
                    ("ring", Value::Str(rid)),
                    ("is_writer", Value::Bool(false)),
                ]));
            }
            _ => {}
        }
        let target = str_arg(req, "object")?.to_string();
        if self.rings.contains_key(&target) {
            return self.ring_op(id, &op, &target, req);
        }
        self.storage_op(&op, &target, req)
    }

    fn create_ring(&mut self, req: &Value) -> Result<Value> {
        let size = int_arg(req, "data_buffer_size")?;
        let create = match req.get("create") {
            Some(Value::Bool(b)) => *b,
            Some(Value::Null) | None => false,
            Some(Value::Int(i)) => *i != 0,
            Some(v) => return Err(StoreError::new("TypeError", format!("create: a bool expected, not {}", v.type_name()))),
        };
        let name = match req.get("name") {
            Some(Value::Null) | None => None,
            Some(Value::Str(n)) => Some(n.clone()),
            Some(v) => return Err(StoreError::new("TypeError", format!("name: a string expected, not {}", v.type_name()))),
        };
        let ring = if create {
            Ring::create(size, name.as_deref())?
        } else {
            let name = name.ok_or_else(|| StoreError::new("ValueError", "'name' can only be None if create=True"))?;
            Ring::attach(size, &name)?
        };
        let (size, name) = ring.handle();
        let is_writer = ring.is_writer;
        let rid = self.fresh("r");
        self.rings.insert(rid.clone(), ring);
        Ok(obj(vec![
            ("ring", Value::Str(rid)),
            ("is_writer", Value::Bool(is_writer)),
            ("handle", Value::Arr(vec![Value::Int(size), Value::Str(name)])),
        ]))
    }

    fn ring_op(&mut self, id: i128, op: &str, target: &str, req: &Value) -> Result<Value> {
        if op == "free_buf" {
            let nbytes = match req.get("nbytes") {
                Some(Value::Null) | None => None,
                Some(_) => Some(int_arg(req, "nbytes")?),
            };
            // request.free_ids: the ids the oracle's predicate frees, sent along; nothing to ask
            let free_ids: Option<Vec<i128>> = match req.get("free_ids") {
                Some(Value::Arr(items)) => Some(items.iter().filter_map(|v| match v {
                    Value::Int(i) => Some(*i),
                    _ => None,
                }).collect()),
                _ => None,
            };
            let mut ring = self.rings.remove(target).expect("checked");
            let (input, output) = (&mut self.input, &mut self.output);
            let res = match &free_ids {
                Some(ids) => ring.free_buf(&mut |_, chunk_id, _view| Ok(ids.contains(&chunk_id)), nbytes),
                None => ring.free_buf(&mut |_, chunk_id, view| ask_is_free(input, output, id, chunk_id, view), nbytes),
            };
            self.rings.insert(target.to_string(), ring);
            return res.map(|ids| Value::Arr(ids.into_iter().map(Value::Int).collect()));
        }
        let ring = self.rings.get_mut(target).expect("checked");
        Ok(match op {
            "handle" => {
                let (size, name) = ring.handle();
                Value::Arr(vec![Value::Int(size), Value::Str(name)])
            }
            "clear" => {
                ring.clear()?;
                Value::Null
            }
            "close" => {
                ring.close();
                Value::Null
            }
            "get_auth_secret" => Value::Str(b64encode(&ring.get_auth_secret()?)),
            "allocate_buf" => {
                let (a, i) = ring.allocate_buf(int_arg(req, "size")?)?;
                pair(a, i)
            }
            "access_buf" => {
                let (view, (chunk_id, size)) = ring.access_buf(int_arg(req, "address")?)?;
                obj(vec![
                    ("monotonic_id", Value::Int(chunk_id)),
                    ("size", Value::Int(size)),
                    ("offset", Value::Int(view.start as i128)),
                    ("length", Value::Int(view.len as i128)),
                ])
            }
            "int2byte" => Value::Str(b64encode(&int2byte(int_arg(req, "integer")?)?)),
            "byte2int" => Value::Int(byte2int(&bytes_arg(req.get("data").unwrap_or(&Value::Null), "data")?)),
            "ring_state" => state_value(ring),
            "set_id_max" => {
                ring.id_max = int_arg(req, "value")?;
                Value::Null
            }
            _ => return Err(StoreError::new("AttributeError", format!("a ring has no operation {op:?}"))),
        })
    }

    fn storage_op(&mut self, op: &str, target: &str, req: &Value) -> Result<Value> {
        if op == "get_copy" || op == "get_end" {
            let rid = str_arg(req, "read")?.to_string();
            let read = if op == "get_end" { self.reads.remove(&rid) } else { self.reads.get(&rid).cloned() };
            let read = read.ok_or_else(|| unknown("read", &rid))?;
            let entry = self.storages.get(&read.storage).ok_or_else(|| unknown("storage", &read.storage))?;
            let ring = self.rings.get(&entry.ring).ok_or_else(|| unknown("ring", &entry.ring))?;
            return if op == "get_copy" {
                Ok(obj(vec![("data", Value::Str(b64encode(&entry.storage.get_copy(ring, read.open)?)))]))
            } else {
                entry.storage.get_end(ring, read.open).map(|_| Value::Null)
            };
        }
        let entry = self.storages.get_mut(target).ok_or_else(|| unknown("storage or ring", target))?;
        let ring = self.rings.get_mut(&entry.ring).ok_or_else(|| unknown("ring", &entry.ring))?;
        let st = &mut entry.storage;
        let null = Value::Null;
        let field = |f: &str| req.get(f).unwrap_or(&null);
        Ok(match op {
            "put" => {
                let key = dict_key(field("key"))?;
                let metadata = bytes_arg(field("metadata"), "metadata")?;
                let frames = match field("data") {
                    Value::Arr(items) => items.iter().map(|f| bytes_arg(f, "data")).collect::<Result<Vec<_>>>()?,
                    _ => return Err(StoreError::new("TypeError", "data: a list of base64 frames expected")),
                };
                let (a, i) = st.put(ring, &key, &metadata, &frames)?;
                pair(a, i)
            }
            "get" | "get_begin" => {
                let (address, mid) = (num_arg(req, "address"), num_arg(req, "monotonic_id"));
                let (sig, key) = (sig_arg(field("signature")), key_arg(field("key")));
                if op == "get" {
                    obj(vec![("data", Value::Str(b64encode(&st.get(ring, address, mid, &sig, &key)?)))])
                } else {
                    let open = st.get_begin(ring, address, mid, &sig, &key)?;
                    let rid = {
                        self.next += 1;
                        format!("g{}", self.next)
                    };
                    self.reads.insert(rid.clone(), Read { open, storage: target.to_string() });
                    obj(vec![("read", Value::Str(rid))])
                }
            }
            "get_cached" => {
                let (a, i) = st.get_cached(&dict_key(field("key"))?)?;
                pair(a, i)
            }
            "is_cached" => Value::Bool(st.is_cached(&dict_key(field("key"))?)?),
            "get_signature" => sig_value(&st.get_signature(ring, &dict_key(field("key"))?)?),
            "verify_signature" | "touch" => {
                let (address, mid) = (num_arg(req, "address"), num_arg(req, "monotonic_id"));
                let (sig, key) = (sig_arg(field("signature")), key_arg(field("key")));
                if op == "touch" {
                    st.touch(ring, &key, address, mid, &sig)?;
                } else {
                    st.verify_signature(ring, &key, address, mid, &sig)?;
                }
                Value::Null
            }
            "release_touches" => {
                st.release_touches()?;
                Value::Null
            }
            "free_unused" => {
                st.free_unused(ring)?;
                Value::Null
            }
            "clear" => {
                st.clear(ring)?;
                Value::Null
            }
            "close" => {
                ring.close(); // the seed's storage.close() closes its ring
                self.reads.retain(|_, r| r.storage != target); // reads left open are abandoned
                Value::Null
            }
            "handle" => obj(vec![
                ("max_object_size", Value::Int(st.max_object_size)),
                ("n_readers", Value::Int(st.n_readers)),
                ("ring_buffer_handle", {
                    let (size, name) = ring.handle();
                    Value::Arr(vec![Value::Int(size), Value::Str(name)])
                }),
            ]),
            "read_count" => Value::Int(st.read_count(ring, int_arg(req, "address")?)?),
            "bench" => {
                // docs/protocol.md, "The bench request": the loop at our own pace
                let (count, size) = (int_arg(req, "count")?, int_arg(req, "size")?);
                if !(1..=1 << 24).contains(&count) || !(1..=1 << 30).contains(&size) {
                    return Err(StoreError::new("ValueError", format!("bench: count {count}, size {size}: out of range")));
                }
                let (prefix, metadata) = (str_arg(req, "prefix")?, bytes_arg(field("metadata"), "metadata")?);
                let (seconds, placed) = crate::bench::own_loop(st, ring, prefix, count as usize, size as usize, &metadata)?;
                let handles = placed
                    .iter()
                    .map(|(a, i, sig)| Value::Arr(vec![Value::Int(*a), Value::Int(*i), Value::Str(b64encode(sig))]))
                    .collect();
                obj(vec![("seconds", Value::Float(seconds)), ("handles", Value::Arr(handles))])
            }
            _ => return Err(StoreError::new("AttributeError", format!("a storage has no operation {op:?}"))),
        })
    }
}

/// free_buf's predicate: ask the oracle (a callback) and wait for its answer.
fn ask_is_free<R: BufRead, W: Write>(
    input: &mut R,
    output: &mut W,
    request: i128,
    chunk_id: i128,
    view: crate::ring::View,
) -> Result<bool> {
    let proto = |m: String| StoreError::new("ProtocolError", m);
    let cb = obj(vec![
        ("type", s("callback")),
        ("in_reply_to", Value::Int(request)),
        ("op", s("is_free")),
        ("monotonic_id", Value::Int(chunk_id)),
        ("offset", Value::Int(view.start as i128)),
        ("length", Value::Int(view.len as i128)),
    ]);
    let mut line = cb.to_json();
    line.push('\n');
    output.write_all(line.as_bytes()).and_then(|_| output.flush()).map_err(|e| proto(e.to_string()))?;
    let mut answer = String::new();
    if input.read_line(&mut answer).map_err(|e| proto(e.to_string()))? == 0 {
        return Err(proto("stdin closed while waiting for an is_free answer".into()));
    }
    let a = parse(answer.trim_end()).map_err(|e| proto(format!("an answer that is not JSON ({e}): {}", answer.trim_end())))?;
    if a.get("type") != Some(&s("answer")) || a.get("in_reply_to") != Some(&Value::Int(request)) {
        return Err(proto(format!("expected the answer to request {request}: {}", answer.trim_end())));
    }
    match (a.get("result"), a.get("error")) {
        (Some(Value::Bool(b)), None) => Ok(*b),
        (None, Some(e)) => {
            let kind = e.get("kind").and_then(Value::as_str).unwrap_or("Exception");
            let message = e.get("message").and_then(Value::as_str).unwrap_or("").to_string();
            Err(StoreError::new(leak_kind(kind), message))
        }
        _ => Err(proto(format!("an answer with neither result nor error: {}", answer.trim_end()))),
    }
}

/// Error kinds are `&'static str`: the oracle's own kinds are few, keep them.
fn leak_kind(kind: &str) -> &'static str {
    Box::leak(kind.to_string().into_boxed_str())
}
