// SPDX-License-Identifier: GPL-2.0

//! String module parameters, which `module!` does not offer (it takes integers only).
//!
//! `string_param!(addr, 64, "listen address")` declares a read-only (0444) parameter
//! `addr` of at most 63 bytes, backed by the kernel's `param_ops_string`, and a
//! `StringParam` named `addr` to read it with. Its value is set before `init` runs.

use kernel::prelude::*;

/// The storage of a string module parameter: a NUL-terminated byte buffer that the
/// kernel's `param_ops_string` writes once, before the module's `init`.
pub(crate) struct StringParam<const N: usize> {
    buffer: core::cell::UnsafeCell<[u8; N]>,
}

// SAFETY: the kernel writes the buffer only while parsing the module's arguments, before
// `init` runs and before any Rust code can read it; afterwards it is read-only (0444).
unsafe impl<const N: usize> Sync for StringParam<N> {}

impl<const N: usize> StringParam<N> {
    /// A parameter whose default is `default` (at most `N - 1` bytes).
    pub(crate) const fn new(default: &str) -> Self {
        let mut buffer = [0u8; N];
        let bytes = default.as_bytes();
        assert!(bytes.len() < N, "default too long");
        let mut i = 0;
        while i < bytes.len() {
            buffer[i] = bytes[i];
            i += 1;
        }
        Self {
            buffer: core::cell::UnsafeCell::new(buffer),
        }
    }

    /// The value, without its NUL terminator.
    pub(crate) fn value(&self) -> &[u8] {
        // SAFETY: see the `Sync` implementation: no writer exists once module code runs.
        let bytes = unsafe { &*self.buffer.get() };
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(N);
        &bytes[..len]
    }

    /// The buffer, for the `kparam_string` that describes it to the kernel.
    pub(crate) const fn as_mut_ptr(&self) -> *mut c_char {
        self.buffer.get().cast()
    }
}

/// A `struct kparam_string` in a `static`: it points at a [`StringParam`]'s buffer.
#[repr(transparent)]
pub(crate) struct KparamString(kernel::bindings::kparam_string);

// SAFETY: the struct itself is never written after compilation; the buffer it points to
// is synchronised as `StringParam` explains.
unsafe impl Sync for KparamString {}

impl KparamString {
    /// Describes `param` to the kernel: `maxlen` is the buffer size, NUL included.
    pub(crate) const fn new<const N: usize>(param: &'static StringParam<N>) -> Self {
        Self(kernel::bindings::kparam_string {
            maxlen: N as u32,
            string: param.as_mut_ptr(),
        })
    }

    /// The pointer for `kernel_param.str_`.
    pub(crate) const fn as_ptr(&self) -> *const kernel::bindings::kparam_string {
        core::ptr::from_ref(&self.0)
    }
}

/// Copies `text` into a byte array of exactly its length, for `.modinfo` entries.
pub(crate) const fn modinfo_bytes<const N: usize>(text: &str) -> [u8; N] {
    let bytes = text.as_bytes();
    assert!(bytes.len() == N);
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// Declares a string module parameter; see the module documentation.
#[allow(unused_macros)]
macro_rules! string_param {
    ($name:ident, $size:literal, $default:literal, $description:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::rdma::param::StringParam<$size> =
            $crate::rdma::param::StringParam::new($default);

        const _: () = {
            static KPARAM_STRING: $crate::rdma::param::KparamString =
                $crate::rdma::param::KparamString::new(&$name);

            #[link_section = "__param"]
            #[used(compiler)]
            static KERNEL_PARAM: ::kernel::module_param::KernelParam =
                ::kernel::module_param::KernelParam::new(::kernel::bindings::kernel_param {
                    name: ::kernel::str::as_char_ptr_in_const_context(
                        match ::core::ffi::CStr::from_bytes_with_nul(
                            concat!(stringify!($name), "\0").as_bytes(),
                        ) {
                            Ok(name) => name,
                            Err(_) => panic!("bad parameter name"),
                        },
                    ),
                    // `__this_module` is set up by the kernel at load time and lives until the
                    // module is unloaded, like the parameter.
                    mod_: (&raw const ::kernel::bindings::__this_module).cast_mut(),
                    // SAFETY: `param_ops_string` is an immutable kernel object.
                    ops: unsafe { ::core::ptr::from_ref(&::kernel::bindings::param_ops_string) },
                    perm: 0o444,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: ::kernel::bindings::kernel_param__bindgen_ty_1 {
                        str_: KPARAM_STRING.as_ptr(),
                    },
                });

            const PARMTYPE_TEXT: &str = concat!("parmtype=", stringify!($name), ":string\0");
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARMTYPE: [u8; PARMTYPE_TEXT.len()] =
                $crate::rdma::param::modinfo_bytes(PARMTYPE_TEXT);

            const PARM_TEXT: &str = concat!("parm=", stringify!($name), ":", $description, "\0");
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARM: [u8; PARM_TEXT.len()] = $crate::rdma::param::modinfo_bytes(PARM_TEXT);
        };
    };
}
#[allow(unused_imports)]
pub(crate) use string_param;
