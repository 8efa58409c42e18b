//! A compiled kernel as bytes — what the disk cache and bundles store — and the checksummed
//! container both wrap their bytes in.

use super::codegen::OpSite;
use sha2::{Digest, Sha256};
use tpukit_dsl::{Loc, OperandId};

/// A kernel compiled for one host target: relocatable object code exporting `entry` (see
/// `abi`), plus what the runtime needs to call it and explain its failures.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// The exported symbol: unique per compilation, so objects never clash when linked.
    pub entry: String,
    pub object: Vec<u8>,
    pub workspace_bytes: u64,
    pub(crate) sites: Vec<OpSite>,
}

impl Artifact {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.str(&self.entry);
        w.bytes(&self.object);
        w.u64(self.workspace_bytes);
        w.u64(self.sites.len() as u64);
        for s in &self.sites {
            w.str(&s.name);
            match &s.loc {
                Some(l) => {
                    w.u64(1);
                    w.str(&l.file);
                    w.u64(l.line as u64);
                    w.u64(l.column as u64);
                }
                None => w.u64(0),
            }
            w.u64(s.operand.map_or(u64::MAX, |o| o.0 as u64));
        }
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<Artifact, String> {
        let mut r = Reader(bytes);
        let entry = r.str()?;
        let object = r.bytes()?.to_vec();
        let workspace_bytes = r.u64()?;
        let n = r.u64()?;
        let mut sites = Vec::new();
        for _ in 0..n {
            let name = r.str()?;
            let loc = match r.u64()? {
                0 => None,
                _ => {
                    let file = r.str()?;
                    let (line, column) = (r.u64()? as u32, r.u64()? as u32);
                    Some(Loc::new(&file, line, column))
                }
            };
            let operand = match r.u64()? {
                u64::MAX => None,
                o => Some(OperandId(o as u32)),
            };
            sites.push(OpSite { name, loc, operand });
        }
        if !r.0.is_empty() {
            return Err("trailing bytes after the artifact".into());
        }
        Ok(Artifact {
            entry,
            object,
            workspace_bytes,
            sites,
        })
    }
}

/// Little-endian, length-prefixed encoding.
#[derive(Default)]
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
}

/// The reading side of [`Writer`]: every read is bounds-checked.
pub(crate) struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!(
                "truncated: wanted {n} bytes, {} left",
                self.0.len()
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u64()?;
        self.take(usize::try_from(n).map_err(|_| "length overflows".to_string())?)
    }
    pub fn str(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "invalid UTF-8".to_string())
    }
}

/// Wraps `body` as `magic, format version, SHA-256 of body, body` (length-prefixed).
pub(crate) fn seal(magic: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 52);
    out.extend_from_slice(magic);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&Sha256::digest(body));
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of a [`seal`]ed container, if its magic, version, length and checksum hold.
pub(crate) fn open<'a>(magic: &[u8; 4], bytes: &'a [u8]) -> Result<&'a [u8], String> {
    let mut r = Reader(bytes);
    if r.take(4)? != magic {
        return Err("not a tpukit file of this kind (bad magic)".into());
    }
    let version = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
    if version != FORMAT {
        return Err(format!(
            "format version {version}, this tpukit reads {FORMAT}"
        ));
    }
    let sum = r.take(32)?;
    let body = r.bytes()?;
    if Sha256::digest(body).as_slice() != sum {
        return Err("checksum mismatch (the file is corrupt)".into());
    }
    Ok(body)
}

/// Bytes before a sealed body: magic, version, checksum, length.
pub(crate) const HEADER: usize = 4 + 4 + 32 + 8;

/// Version of every on-disk format here; bump it when any layout changes.
pub(crate) const FORMAT: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_round_trip_and_corruption_is_detected() {
        let a = Artifact {
            entry: "tpukit_x".into(),
            object: vec![1, 2, 3],
            workspace_bytes: 64,
            sites: vec![OpSite {
                name: "load".into(),
                loc: Some(Loc::new("k.rs", 3, 9)),
                operand: Some(OperandId(2)),
            }],
        };
        let sealed = seal(b"TEST", &a.encode());
        let b = Artifact::decode(open(b"TEST", &sealed).unwrap()).unwrap();
        assert_eq!(b.entry, a.entry);
        assert_eq!(b.object, a.object);
        assert_eq!(b.sites[0].loc, a.sites[0].loc);
        for i in [0, 5, 20, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[i] ^= 0x40;
            assert!(
                open(b"TEST", &bad).is_err(),
                "flipping byte {i} went unnoticed"
            );
        }
        assert!(open(b"TEST", &sealed[..sealed.len() - 1]).is_err());
        assert!(open(b"OTHR", &sealed).is_err());
    }
}
