//! The gateway's own stdin and stdout, read and written by the runtime's I/O driver.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and every write to a blocking-pool
//! thread and wait for it: two thread hand-offs per message, which on a small machine
//! cost more than the rest of a relayed call. An MCP client starts `airlock serve` with
//! pipes (most clients) or socket pairs (Node's `child_process`), both of which epoll
//! can watch, so the gateway registers them with the runtime instead (non-blocking; the
//! file description is the gateway's own end of the client's pipe). Anything else (a
//! terminal, a file) keeps tokio's blocking-pool streams.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The gateway's stdin.
pub(super) enum Input {
    /// A pipe, watched by the I/O driver.
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Receiver),
    /// A socket, watched by the I/O driver.
    #[cfg(unix)]
    Socket(tokio::net::UnixStream),
    /// Anything else, through the blocking pool.
    Other(tokio::io::Stdin),
}

/// The gateway's stdout.
pub(super) enum Output {
    /// A pipe, watched by the I/O driver.
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Sender),
    /// A socket, watched by the I/O driver.
    #[cfg(unix)]
    Socket(tokio::net::UnixStream),
    /// Anything else, through the blocking pool.
    Other(tokio::io::Stdout),
}

/// Stdin and stdout as the runtime can best watch them (see the module). Call it inside
/// the runtime.
pub(super) fn own_stdio() -> (Input, Output) {
    #[cfg(unix)]
    {
        let input = unix::input().unwrap_or_else(|why| {
            tracing::debug!("stdin read through the blocking pool: {why}");
            Input::Other(tokio::io::stdin())
        });
        let output = unix::output().unwrap_or_else(|why| {
            tracing::debug!("stdout written through the blocking pool: {why}");
            Output::Other(tokio::io::stdout())
        });
        (input, output)
    }
    #[cfg(not(unix))]
    (
        Input::Other(tokio::io::stdin()),
        Output::Other(tokio::io::stdout()),
    )
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;

    use super::{Input, Output};

    /// A duplicate of `fd` (the original stays open, as the standard library expects).
    fn own(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(OwnedFd, std::fs::FileType)> {
        let owned = fd.try_clone_to_owned()?;
        let kind = File::from(owned.try_clone()?).metadata()?.file_type();
        Ok((owned, kind))
    }

    fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
        let socket = std::os::unix::net::UnixStream::from(fd);
        socket.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(socket)
    }

    pub(super) fn input() -> io::Result<Input> {
        let (fd, kind) = own(io::stdin().as_fd())?;
        if kind.is_fifo() {
            Ok(Input::Pipe(
                tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?,
            ))
        } else if kind.is_socket() {
            Ok(Input::Socket(socket(fd)?))
        } else {
            Err(io::Error::other("not a pipe or a socket"))
        }
    }

    pub(super) fn output() -> io::Result<Output> {
        let (fd, kind) = own(io::stdout().as_fd())?;
        if kind.is_fifo() {
            Ok(Output::Pipe(tokio::net::unix::pipe::Sender::from_owned_fd(
                fd,
            )?))
        } else if kind.is_socket() {
            Ok(Output::Socket(socket(fd)?))
        } else {
            Err(io::Error::other("not a pipe or a socket"))
        }
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            Input::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            #[cfg(unix)]
            Input::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            Input::Other(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_write(cx, buf),
            Output::Other(stdout) => Pin::new(stdout).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_write_vectored(cx, bufs),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_write_vectored(cx, bufs),
            Output::Other(stdout) => Pin::new(stdout).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            #[cfg(unix)]
            Output::Pipe(pipe) => pipe.is_write_vectored(),
            #[cfg(unix)]
            Output::Socket(socket) => socket.is_write_vectored(),
            Output::Other(stdout) => stdout.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Output::Other(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_shutdown(cx),
            Output::Other(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}
