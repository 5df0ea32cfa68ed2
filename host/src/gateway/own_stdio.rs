//! The gateway's own stdin and stdout, read and written by the runtime's I/O driver.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and every write to a blocking-pool
//! thread and wait for it: two thread hand-offs per message, which on a small machine
//! cost more than the rest of a relayed call. An MCP client starts `airlock serve` with
//! pipes (most clients) or socket pairs (Node's `child_process`), both of which epoll
//! can watch, so the gateway registers them with the runtime instead (non-blocking; the
//! file description is the gateway's own end of the client's pipe). Anything else (a
//! terminal, a file) keeps tokio's blocking-pool streams.

use tokio::io::{AsyncRead, AsyncWrite};

/// The gateway's stdin, however it is read.
pub(super) type Input = Box<dyn AsyncRead + Send + Sync + Unpin>;
/// The gateway's stdout, however it is written.
pub(super) type Output = Box<dyn AsyncWrite + Send + Sync + Unpin>;

/// Stdin and stdout as the runtime can best watch them (see the module). Call it inside
/// the runtime.
pub(super) fn own_stdio() -> (Input, Output) {
    #[cfg(unix)]
    {
        let input = watched::input().unwrap_or_else(|why| {
            tracing::debug!("stdin read through the blocking pool: {why}");
            Box::new(tokio::io::stdin())
        });
        let output = watched::output().unwrap_or_else(|why| {
            tracing::debug!("stdout written through the blocking pool: {why}");
            Box::new(tokio::io::stdout())
        });
        (input, output)
    }
    #[cfg(not(unix))]
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

#[cfg(unix)]
mod watched {
    use std::fs::{File, FileType};
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;

    use tokio::net::unix::pipe;

    use super::{Input, Output};

    /// A duplicate of `fd` (the original stays open, as the standard library expects),
    /// and what it is.
    fn own(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, FileType)> {
        let owned = fd.try_clone_to_owned()?;
        let kind = File::from(owned.try_clone()?).metadata()?.file_type();
        Ok((owned, kind))
    }

    fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
        let socket = std::os::unix::net::UnixStream::from(fd);
        socket.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(socket)
    }

    fn neither() -> io::Error {
        io::Error::other("not a pipe or a socket")
    }

    pub(super) fn input() -> io::Result<Input> {
        match own(io::stdin().as_fd())? {
            (fd, kind) if kind.is_fifo() => Ok(Box::new(pipe::Receiver::from_owned_fd(fd)?)),
            (fd, kind) if kind.is_socket() => Ok(Box::new(socket(fd)?)),
            _ => Err(neither()),
        }
    }

    pub(super) fn output() -> io::Result<Output> {
        match own(io::stdout().as_fd())? {
            (fd, kind) if kind.is_fifo() => Ok(Box::new(pipe::Sender::from_owned_fd(fd)?)),
            (fd, kind) if kind.is_socket() => Ok(Box::new(socket(fd)?)),
            _ => Err(neither()),
        }
    }
}
