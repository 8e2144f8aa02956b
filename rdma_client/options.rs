// SPDX-License-Identifier: GPL-2.0

//! What the option strings of `ping` and `bench` share: text and bounded numbers, each
//! refused with `EINVAL` and one log line that names the file and the option.

#![forbid(unsafe_code)]

use kernel::prelude::*;

/// `input` as text; `file` names the debugfs file in the log line.
pub(crate) fn as_text<'a>(file: &str, input: &'a [u8]) -> Result<&'a str> {
    core::str::from_utf8(input).map_err(|_| {
        pr_err!("{}: options are not text\n", file);
        EINVAL
    })
}

/// The value of option `name` of `file` as a number from `min` to `max`.
pub(crate) fn number(file: &str, name: &str, value: &str, min: u32, max: u32) -> Result<u32> {
    match value.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => {
            pr_err!(
                "{}: {}={} is not a number from {} to {}\n",
                file,
                name,
                value,
                min,
                max
            );
            Err(EINVAL)
        }
    }
}
