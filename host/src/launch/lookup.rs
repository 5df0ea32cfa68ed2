//! Finding a bare command: PATH first, then common install folders (Homebrew, /usr/local,
//! ~/.local/bin, and the node/python version managers' bin folders).

use std::path::{Path, PathBuf};

/// Folders searched after PATH, in order.
pub fn fallback_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(home) = home {
        for rel in [
            ".local/bin",
            ".cargo/bin",
            ".volta/bin",
            ".bun/bin",
            ".asdf/shims",
            ".local/share/mise/shims",
            ".pyenv/shims",
            ".deno/bin",
        ] {
            dirs.push(home.join(rel));
        }
        // nvm and fnm keep one folder per installed node version: newest first.
        for versions in [
            home.join(".nvm/versions/node"),
            home.join(".local/share/fnm/node-versions"),
        ] {
            if let Ok(entries) = std::fs::read_dir(&versions) {
                let mut found: Vec<PathBuf> =
                    entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
                found.sort_by_key(|v| std::cmp::Reverse(version_key(v)));
                for v in found {
                    dirs.push(v.join("bin"));
                    dirs.push(v.join("installation/bin"));
                }
            }
        }
    }
    dirs
}

fn version_key(path: &Path) -> Vec<u64> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(|n| {
            n.trim_start_matches('v')
                .split('.')
                .map(|p| p.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default()
}

/// Resolves `command` to an executable: a path (absolute, or relative to `cwd`) is used
/// as given; a bare name is looked up on `path` and then in [`fallback_dirs`].
pub fn resolve_command(
    command: &str,
    path: &str,
    home: Option<&Path>,
    cwd: Option<&Path>,
) -> Option<PathBuf> {
    if command.contains('/') {
        let p = Path::new(command);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.map(|c| c.join(p)).unwrap_or_else(|| p.to_path_buf())
        };
        return p.exists().then_some(p);
    }
    let here = cwd
        .map(Path::to_path_buf)
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    if let Ok(found) = which::which_in(command, Some(path), &here) {
        return Some(found);
    }
    fallback_dirs(home)
        .into_iter()
        .find_map(|dir| which::which_in(command, Some(dir.as_os_str()), &here).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_commands_in_fallback_folders_when_path_is_empty() {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join(".local/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let tool = bin.join("airlock-test-tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            resolve_command("airlock-test-tool", "", Some(home.path()), None),
            Some(tool)
        );
        assert_eq!(
            resolve_command("sh", "", None, None),
            Some(PathBuf::from("/usr/bin/sh"))
                .filter(|p| p.exists())
                .or(Some(PathBuf::from("/bin/sh")))
        );
        assert!(resolve_command("surely-not-a-command-xyz", "", Some(home.path()), None).is_none());
        assert!(resolve_command("/bin/sh", "", None, None).is_some());
    }
}
