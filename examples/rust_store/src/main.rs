//! rust_store: the seed's shared-memory object store in Rust (standard
//! library only), driven by shmref's process protocol on stdin/stdout.

mod error;
mod ring;
mod sha256;
mod storage;
mod sys;

fn main() {
    println!("rust_store: protocol not wired yet");
}
