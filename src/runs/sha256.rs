//! SHA-256 of run ids' inputs, in lowercase hex (RustCrypto's `sha2`,
//! which the cluster crate's NATS client builds anyway).

/// Lowercase hex of the SHA-256 digest of `data`.
pub fn hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn standard_vectors() {
        assert_eq!(super::hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(super::hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
