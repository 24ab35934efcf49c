//! Who a process is, beyond its pid: a pid is reused once its process is
//! gone, so a recorded pid names the same process only while its start time
//! (field 22 of `/proc/<pid>/stat`, in clock ticks since boot) and the boot
//! (`/proc/sys/kernel/random/boot_id`) are still the recorded ones. Control
//! uses this to signal only what runwire started and to talk only to the
//! supervisor it registered (`spec/SUPERVISOR.md`, "Trust").

use serde::{Deserialize, Serialize};
use std::os::unix::net::UnixStream;

/// One process, identified so that a reused pid or a reboot never matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ident {
    pub pid: i32,
    /// Start time in clock ticks after boot.
    pub start: u64,
    pub boot_id: String,
}

/// What `/proc/<pid>/stat` says after the command name: the state, the
/// process group and the start time.
struct Stat {
    state: u8,
    pgid: i32,
    start: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let close = memchr::memrchr(b')', &s)?;
    let rest = std::str::from_utf8(&s[close + 1..]).ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
    Some(Stat {
        state: *f.first()?.as_bytes().first()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// This boot's id, read once.
pub fn boot_id() -> Option<&'static str> {
    static ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

impl Ident {
    /// The process `pid` now; `None` when it does not exist (or is a zombie).
    pub fn of(pid: i32) -> Option<Ident> {
        let st = stat(pid).filter(|s| s.state != b'Z')?;
        Some(Ident { pid, start: st.start, boot_id: boot_id()?.to_string() })
    }

    /// This process.
    pub fn me() -> Option<Ident> {
        Ident::of(std::process::id() as i32)
    }

    /// Why `self` (a record) is not the process its pid names now, if it is not.
    pub fn mismatch(&self) -> Option<String> {
        match Ident::of(self.pid) {
            None => Some(format!("process {} is gone", self.pid)),
            Some(now) if now.boot_id != self.boot_id => {
                Some(format!("process {} was recorded before a reboot", self.pid))
            }
            Some(now) if now.start != self.start => Some(format!(
                "pid {} now names another process (started at tick {}, not {})",
                self.pid, now.start, self.start
            )),
            Some(_) => None,
        }
    }

    /// Whether the process is stopped (SIGSTOP, SIGTSTP from a terminal's
    /// Ctrl-Z, or held by a debugger): there, but running nothing until it
    /// is continued.
    pub fn stopped(&self) -> bool {
        stat(self.pid).is_some_and(|s| matches!(s.state, b'T' | b't'))
    }

    /// Why the process group this record's process leads is not the
    /// recorded one: the leader must be the recorded process and still lead
    /// its group (a group whose leader died cannot be told from a reused id).
    pub fn group_mismatch(&self) -> Option<String> {
        if let Some(why) = self.mismatch() {
            return Some(why);
        }
        match stat(self.pid) {
            Some(s) if s.pgid == self.pid => None,
            Some(s) => Some(format!("process {} no longer leads its group (group {})", self.pid, s.pgid)),
            None => Some(format!("process {} is gone", self.pid)),
        }
    }
}

/// The pid of the process at the other end of a connected unix socket, as
/// the kernel recorded it when the connection was made (`SO_PEERCRED`).
pub fn peer_pid(s: &UnixStream) -> std::io::Result<i32> {
    let cred = nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(cred.pid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_matches_and_a_reused_or_gone_pid_does_not() {
        let me = Ident::me().expect("/proc is mounted");
        assert_eq!(me.mismatch(), None);
        let older = Ident { start: me.start.wrapping_sub(1), ..me.clone() };
        assert!(older.mismatch().unwrap().contains("another process"), "{:?}", older.mismatch());
        let rebooted = Ident { boot_id: "not-this-boot".into(), ..me.clone() };
        assert!(rebooted.mismatch().unwrap().contains("reboot"));
        let gone = Ident { pid: 2_147_483_000, ..me };
        assert!(gone.mismatch().unwrap().contains("gone"));
    }

    #[test]
    fn peer_pid_is_the_connecting_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(peer_pid(&a).unwrap(), std::process::id() as i32);
    }
}
