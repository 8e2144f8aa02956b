// SPDX-License-Identifier: GPL-2.0

//! IPv4 and IPv6 socket addresses for RDMA CM, parsed from and printed as text.

use super::bindings;
use kernel::prelude::*;

/// An IPv4 or IPv6 address with a port, in the `sockaddr_storage` layout RDMA CM takes.
#[derive(Clone, Copy)]
pub(crate) struct SocketAddr {
    storage: bindings::__kernel_sockaddr_storage,
}

// SAFETY: a socket address is plain data; the pointer member of the storage's union only
// gives it its alignment and is never dereferenced.
unsafe impl Send for SocketAddr {}
// SAFETY: as above.
unsafe impl Sync for SocketAddr {}

impl SocketAddr {
    /// Parses an IPv4 (`10.0.0.1`) or IPv6 (`fd00::1`) literal; an empty string is the
    /// IPv4 wildcard address. Anything else is `EINVAL`.
    pub(crate) fn parse(text: &[u8], port: u16) -> Result<Self> {
        let mut storage: bindings::__kernel_sockaddr_storage = pin_init::zeroed();
        let ptr = core::ptr::from_mut(&mut storage);
        let len = i32::try_from(text.len()).map_err(|_| EINVAL)?;
        if text.contains(&b':') {
            // SAFETY: `sockaddr_storage` is large enough and suitably aligned for
            // `sockaddr_in6`.
            let sin6 = unsafe { &mut *ptr.cast::<bindings::sockaddr_in6>() };
            // SAFETY: `in6_pton` reads `len` bytes of `text` (the -1 delimiter is not used
            // because the length is given) and writes 16 bytes into `sin6_addr`.
            let ok = unsafe {
                bindings::in6_pton(
                    text.as_ptr().cast(),
                    len,
                    core::ptr::from_mut(&mut sin6.sin6_addr).cast(),
                    -1,
                    core::ptr::null_mut(),
                )
            };
            if ok != 1 {
                return Err(EINVAL);
            }
            sin6.sin6_family = bindings::AF_INET6 as u16;
            sin6.sin6_port = port.to_be();
        } else {
            // SAFETY: as above, for `sockaddr_in`.
            let sin = unsafe { &mut *ptr.cast::<bindings::sockaddr_in>() };
            // An empty text leaves the address zeroed: the wildcard.
            if !text.is_empty() {
                // SAFETY: `in4_pton` reads `len` bytes of `text` and writes 4 bytes to
                // `sin_addr`.
                let ok = unsafe {
                    bindings::in4_pton(
                        text.as_ptr().cast(),
                        len,
                        core::ptr::from_mut(&mut sin.sin_addr).cast(),
                        -1,
                        core::ptr::null_mut(),
                    )
                };
                if ok != 1 {
                    return Err(EINVAL);
                }
            }
            sin.sin_family = bindings::AF_INET as u16;
            sin.sin_port = port.to_be();
        }
        Ok(Self { storage })
    }

    /// Copies an address the RDMA core filled in.
    ///
    /// # Safety
    ///
    /// `ptr` points to a valid `sockaddr_storage`.
    pub(crate) unsafe fn from_raw(ptr: *const bindings::__kernel_sockaddr_storage) -> Self {
        // SAFETY: the caller guarantees `ptr` is valid for reads.
        let storage = unsafe { ptr.read() };
        Self { storage }
    }

    /// The pointer RDMA CM calls take.
    pub(crate) fn as_raw(&self) -> *mut bindings::sockaddr {
        core::ptr::from_ref(&self.storage).cast_mut().cast()
    }

    fn is_ipv6(&self) -> bool {
        // SAFETY: every socket address starts with its `u16` family.
        let family = unsafe { core::ptr::from_ref(&self.storage).cast::<u16>().read() };
        u32::from(family) == bindings::AF_INET6
    }

    /// Whether this is the wildcard address (`0.0.0.0` or `::`).
    pub(crate) fn is_any(&self) -> bool {
        let ptr = core::ptr::from_ref(&self.storage);
        if self.is_ipv6() {
            let sin6 = ptr.cast::<bindings::sockaddr_in6>();
            // SAFETY: the family says the storage holds a `sockaddr_in6`, and every bit
            // pattern of its 16-byte address union is a valid byte array.
            let bytes = unsafe { (*sin6).sin6_addr.in6_u.u6_addr8 };
            bytes.iter().all(|&b| b == 0)
        } else {
            // SAFETY: otherwise it holds a `sockaddr_in` (or is zeroed).
            unsafe { (*ptr.cast::<bindings::sockaddr_in>()).sin_addr.s_addr == 0 }
        }
    }

    /// Writes the address without the port (`%pISc`: `10.0.0.1`, `fd00::1`) into `out` as
    /// a NUL-terminated string, truncated to fit; returns its length.
    pub(crate) fn write_ip(&self, out: &mut [u8]) -> usize {
        self.print(c"%pISc", out)
    }

    /// Prints the address with `format`, one `%pIS` directive taking a `sockaddr`, into
    /// `out` as a NUL-terminated string, truncated to fit; returns its length.
    fn print(&self, format: &CStr, out: &mut [u8]) -> usize {
        if out.is_empty() {
            return 0;
        }
        // SAFETY: `snprintf` writes at most `out.len()` bytes, NUL included; `format`'s
        // one `%pIS` directive reads a `sockaddr` of the family it names, which `storage`
        // holds.
        let n = unsafe {
            bindings::snprintf(
                out.as_mut_ptr().cast(),
                out.len(),
                format.as_char_ptr(),
                core::ptr::from_ref(&self.storage),
            )
        };
        usize::try_from(n).unwrap_or(0).min(out.len() - 1)
    }

    /// The port, in host order.
    pub(crate) fn port(&self) -> u16 {
        let ptr = core::ptr::from_ref(&self.storage);
        if self.is_ipv6() {
            // SAFETY: the family says the storage holds a `sockaddr_in6`.
            u16::from_be(unsafe { (*ptr.cast::<bindings::sockaddr_in6>()).sin6_port })
        } else {
            // SAFETY: otherwise it holds a `sockaddr_in` (or is zeroed, port 0).
            u16::from_be(unsafe { (*ptr.cast::<bindings::sockaddr_in>()).sin_port })
        }
    }
}

impl core::fmt::Display for SocketAddr {
    /// `10.0.0.1:7174` or `[fd00::1]:7174`, as the kernel's `%pISpc` prints them.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut text = [0u8; 64];
        let n = self.print(c"%pISpc", &mut text);
        f.write_str(core::str::from_utf8(&text[..n]).unwrap_or("?"))
    }
}

// `pr_*!` format through `kernel::fmt::Display`.
impl kernel::fmt::Display for SocketAddr {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}
