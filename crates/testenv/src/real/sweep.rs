//! Removing what a real node leaves on the host: processes (container shims and the
//! containers under them), mounts, Pod cgroups, iptables chains and the bridge. Used
//! when a node stops, and when the next one starts after a run that was killed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::host::{run, run_quietly};
use super::network::BRIDGE;

/// Cgroup folder the kubelet puts every Pod under (with the cgroupfs driver).
const POD_CGROUP: &str = "kubepods";

/// Every mount point at or under `dir`, deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .filter(|point| point.starts_with(dir))
        .collect();
    mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    mounts.dedup();
    mounts
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(index) = rest.find('\\') {
        out.push_str(&rest[..index]);
        let code = rest.get(index + 1..index + 4);
        if let Some(byte) = code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            out.push(char::from(byte));
            rest = &rest[index + 4..];
        } else {
            out.push('\\');
            rest = &rest[index + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Unmounts everything under `dir`, deepest first; a busy mount is detached lazily.
/// Returns what is still mounted.
pub fn unmount_all(dir: &Path) -> Vec<PathBuf> {
    for _ in 0..3 {
        let mounts = mounts_under(dir);
        if mounts.is_empty() {
            break;
        }
        for mount in mounts {
            let point = mount.display().to_string();
            if run("umount", &[&point]).is_err() {
                run_quietly("umount", &["-l", &point]);
            }
        }
    }
    mounts_under(dir)
}

/// Kills every process whose command line names `dir` (containerd's shims carry its
/// socket path) and every process in a Pod cgroup.
pub fn kill_processes(dir: &Path) {
    let needle = dir.display().to_string();
    let own = std::process::id().to_string();
    let mut pids: Vec<String> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.filter_map(Result::ok) {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == own {
                continue;
            }
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                pids.push(pid);
            }
        }
    }
    for cgroup in pod_cgroups() {
        let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        pids.extend(procs.lines().map(str::to_owned));
    }
    pids.sort();
    pids.dedup();
    for pid in &pids {
        run_quietly("kill", &["-KILL", pid]);
    }
    if !pids.is_empty() {
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every Pod cgroup folder in every cgroup v1 hierarchy, deepest first.
fn pod_cgroups() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return found;
    };
    for hierarchy in hierarchies.filter_map(Result::ok) {
        collect_dirs(&hierarchy.path().join(POD_CGROUP), &mut found);
    }
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

fn collect_dirs(dir: &Path, found: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    found.push(dir.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), found);
            }
        }
    }
}

/// Removes the Pod cgroups, deepest first (a cgroup folder goes once it has no process).
pub fn remove_pod_cgroups() {
    for _ in 0..10 {
        let left = pod_cgroups();
        if left.is_empty() {
            return;
        }
        for dir in &left {
            let _ = std::fs::remove_dir(dir);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes the rules and chains kube-proxy made (`KUBE-*`) from every table.
pub fn remove_iptables_chains() {
    for table in ["nat", "filter", "mangle"] {
        let Ok(rules) = run("iptables-save", &["-t", table]) else {
            continue;
        };
        // Jumps from built-in chains first, then the chains themselves.
        for line in rules.lines() {
            if let Some(rule) = line.strip_prefix("-A ")
                && line.contains("KUBE-")
                && !rule.starts_with("KUBE-")
            {
                let mut args = vec!["-t".to_owned(), table.to_owned(), "-D".to_owned()];
                args.extend(split_rule(rule));
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                run_quietly("iptables", &refs);
            }
        }
        let chains: Vec<String> = rules
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| c.starts_with("KUBE-"))
            .map(str::to_owned)
            .collect();
        for chain in &chains {
            run_quietly("iptables", &["-t", table, "-F", chain]);
        }
        for chain in &chains {
            run_quietly("iptables", &["-t", table, "-X", chain]);
        }
    }
}

/// Splits an iptables-save rule into arguments, keeping quoted comments whole.
fn split_rule(rule: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = rule.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Everything a node in `dir` may have left: processes, mounts, cgroups, chains and the
/// bridge. Returns the mounts that could not be removed (the folder must then be kept).
pub fn sweep(dir: &Path) -> Vec<PathBuf> {
    kill_processes(dir);
    let left = unmount_all(dir);
    remove_pod_cgroups();
    remove_iptables_chains();
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        run_quietly("ip", &["link", "delete", BRIDGE]);
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn iptables_rules_split_with_quoted_comments_whole() {
        let parts = split_rule(
            r#"PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES"#,
        );
        assert_eq!(
            parts,
            [
                "PREROUTING",
                "-m",
                "comment",
                "--comment",
                "kubernetes service portals",
                "-j",
                "KUBE-SERVICES"
            ]
        );
    }

    #[test]
    fn mounts_under_a_folder_that_has_none_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(mounts_under(dir.path()).is_empty());
    }
}
