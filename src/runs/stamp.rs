//! What identifies a file's content without reading it (as git's index
//! keeps for each file): its device, inode, size, mtime and ctime. The run
//! index trusts a row only while its journal still has the row's stamp.

use nix::sys::stat::FileStat;

/// How recent a change must be for its stamp not to be trusted: covers the
/// coarse kernel clock behind file times and filesystems with 1 or 2 s times.
pub const RACY_NS: i64 = 2_000_000_000;

/// A file's stamp. Journals only grow (every write changes the size);
/// ctime cannot be set from user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Stamp {
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    pub fn of(st: &FileStat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as i64,
            mtime_ns: (st.st_mtime as i64).saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec as i64),
            ctime_ns: (st.st_ctime as i64).saturating_mul(1_000_000_000).saturating_add(st.st_ctime_nsec as i64),
        }
    }

    pub fn of_meta(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size() as i64,
            mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
        }
    }

    /// Changed so shortly before `at_ns` (within `window_ns`) that another
    /// write in the same tick could go unseen.
    pub fn racy(&self, at_ns: i64, window_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns) >= at_ns.saturating_sub(window_ns)
    }
}

/// Nanoseconds since the epoch (0 before it).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
