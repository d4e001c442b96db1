//! POSIX shared memory by hand: `shm_open`, `shm_unlink`, `mmap`, `munmap`
//! declared here (no libc crate). Sizes and closing go through std's `File`.

use crate::error::{Result, StoreError};
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    fn shm_open(name: *const c_char, oflag: c_int, mode: u32) -> c_int;
    fn shm_unlink(name: *const c_char) -> c_int;
    fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: i64)
        -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
}

// Linux values (x86_64 and aarch64 agree).
const O_RDWR: c_int = 0o2;
const O_CREAT: c_int = 0o100;
const O_EXCL: c_int = 0o200;
const PROT_READ: c_int = 1;
const PROT_WRITE: c_int = 2;
const MAP_SHARED: c_int = 1;

/// An OS error as the Python exception the seed's `SharedMemory` raises.
fn os_error(what: &str, name: &str) -> StoreError {
    let err = std::io::Error::last_os_error();
    let kind = match err.raw_os_error() {
        Some(2) => "FileNotFoundError",
        Some(17) => "FileExistsError",
        Some(13) | Some(1) => "PermissionError",
        _ => "OSError",
    };
    StoreError::new(kind, format!("{what} '/{name}': {err}"))
}

fn c_name(name: &str) -> Result<CString> {
    if name.is_empty() || name.contains('/') || name.len() > 250 {
        return Err(StoreError::new("ValueError", format!("bad segment name {name:?}")));
    }
    CString::new(format!("/{name}"))
        .map_err(|_| StoreError::new("ValueError", "segment name contains a NUL byte"))
}

/// A mapped segment: the whole of it, as one byte range.
pub struct Segment {
    ptr: *mut u8,
    len: usize,
    pub name: String,
    _file: File,
}

/// Random bytes from the kernel (the seed's `secrets.token_bytes`).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .expect("/dev/urandom is readable");
    out
}

impl Segment {
    /// Create a new segment of `size` bytes (`name` None: a fresh `psm_...` name).
    pub fn create(name: Option<&str>, size: usize) -> Result<Segment> {
        loop {
            let chosen = match name {
                Some(n) => n.to_string(),
                None => {
                    let r = random_bytes(4);
                    format!("psm_{:02x}{:02x}{:02x}{:02x}", r[0], r[1], r[2], r[3])
                }
            };
            let cname = c_name(&chosen)?;
            let fd = unsafe { shm_open(cname.as_ptr(), O_RDWR | O_CREAT | O_EXCL, 0o600) };
            if fd < 0 {
                if name.is_none() && std::io::Error::last_os_error().raw_os_error() == Some(17) {
                    continue;
                }
                return Err(os_error("cannot create", &chosen));
            }
            let file = unsafe { File::from_raw_fd(fd) };
            if let Err(e) = file.set_len(size as u64) {
                unsafe { shm_unlink(cname.as_ptr()) };
                return Err(StoreError::new("OSError", format!("ftruncate: {e}")));
            }
            return match Self::map(file, size, &chosen) {
                Ok(seg) => Ok(seg),
                Err(e) => {
                    unsafe { shm_unlink(cname.as_ptr()) };
                    Err(e)
                }
            };
        }
    }

    /// Attach to an existing segment, all of it (its size from the file).
    pub fn attach(name: &str) -> Result<Segment> {
        let cname = c_name(name)?;
        let fd = unsafe { shm_open(cname.as_ptr(), O_RDWR, 0o600) };
        if fd < 0 {
            return Err(os_error("cannot attach", name));
        }
        let file = unsafe { File::from_raw_fd(fd) };
        let size = file
            .metadata()
            .map_err(|e| StoreError::new("OSError", format!("fstat: {e}")))?
            .len() as usize;
        Self::map(file, size, name)
    }

    fn map(file: File, size: usize, name: &str) -> Result<Segment> {
        use std::os::fd::AsRawFd;
        if size == 0 {
            return Err(StoreError::new("ValueError", "cannot map an empty segment"));
        }
        let p = unsafe {
            mmap(std::ptr::null_mut(), size, PROT_READ | PROT_WRITE, MAP_SHARED, file.as_raw_fd(), 0)
        };
        if p as isize == -1 {
            return Err(os_error("cannot map", name));
        }
        Ok(Segment { ptr: p as *mut u8, len: size, name: name.to_string(), _file: file })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Copy `n` bytes out from `off` (the caller keeps `off + n <= len`).
    pub fn read(&self, off: usize, n: usize) -> Vec<u8> {
        assert!(off + n <= self.len);
        let mut out = vec![0u8; n];
        // Other processes write the segment concurrently: copy, never borrow.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), n) };
        out
    }

    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }

    /// Remove the segment's name (the writer's close).
    pub fn unlink(name: &str) -> Result<()> {
        let cname = c_name(name)?;
        if unsafe { shm_unlink(cname.as_ptr()) } != 0 {
            return Err(os_error("cannot unlink", name));
        }
        Ok(())
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        unsafe { munmap(self.ptr as *mut c_void, self.len) };
    }
}
