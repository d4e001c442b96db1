//! rust_store: the seed's shared-memory object store (writer and reader) in
//! Rust with the standard library only, driven by shmref's process protocol
//! (docs/protocol.md): one JSON request a line on stdin, one reply a line on
//! stdout. Build: `make rust`; judge: examples/rust_store/README.md.

mod bench;
mod error;
mod json;
mod proto;
mod ring;
mod sha256;
mod storage;
mod sys;

fn main() {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut server = proto::Server::new(stdin.lock(), std::io::BufWriter::new(stdout.lock()));
    if let Err(message) = server.run() {
        eprintln!("rust_store: {message}");
        std::process::exit(2);
    }
}
