//! What `print` ops write ([`tpukit_dsl::OpKind::Print`]): one line on the process's standard
//! output, written whole under stdout's lock (lines of concurrent grid steps do not mix) and
//! flushed, so a caller capturing the file descriptor (Python's `capfd`) sees it at once.

use std::io::Write;

/// Writes `text` and a newline to standard output; a closed or failing stdout drops the line
/// (printing never fails a kernel).
pub(crate) fn line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// The helper compiled kernels call for a `print` op: `message` (`len` bytes of UTF-8) with
/// `$i` replaced by `args[i]` (`n` of them).
///
/// # Safety
/// `message` addresses `len` bytes of UTF-8 and `args` `n` values, valid for the call.
pub(crate) unsafe extern "C" fn print(message: *const u8, len: i64, args: *const i64, n: i64) {
    // SAFETY: the caller's contract.
    let (message, args) = unsafe {
        (
            std::slice::from_raw_parts(message, len as usize),
            std::slice::from_raw_parts(args, n as usize),
        )
    };
    line(&tpukit_dsl::format_message(
        &String::from_utf8_lossy(message),
        args,
    ));
}
