//! `insn-mark total|detail`: runs the marker instruction that the insn-count QEMU plugin
//! (plugin.rs) watches for, ending the interval being counted. Under any other QEMU, or
//! on hardware, the marker is a plain NOP and this does nothing.

use std::arch::asm;
use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        // SAFETY: a NOP with a memory operand does not access memory.
        Some("total") => unsafe { asm!(".byte 0x0f, 0x1f, 0x80, 0x01, 0x00, 0x52, 0x52") },
        // SAFETY: as above.
        Some("detail") => unsafe { asm!(".byte 0x0f, 0x1f, 0x80, 0x02, 0x00, 0x52, 0x52") },
        _ => {
            eprintln!("usage: insn-mark total|detail");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
