//! The little of x86-64 decoding the plugin needs: whether an instruction is an atomic
//! read-modify-write, and how a block's last instruction leaves it.

/// How a block ends, for the call chain.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Exit {
    /// A jump, a fall-through, a system call's return: the chain stays.
    Other,
    /// A near call whose return lands at `ret`.
    Call { ret: u64 },
    /// A near return.
    Ret,
    /// An unconditional jump that may be a tail call into another function: an indirect
    /// one, or a direct one further than [`NEAR_JUMP`] bytes.
    FarJump,
    /// An `iret`: the end of an interrupt or exception.
    Iret,
}

/// A direct jump this far or nearer stays in its function (loops, branches); further, it
/// may be a tail call.
pub const NEAR_JUMP: u64 = 2048;

/// The instruction's legacy prefixes, whether one was `lock`, and the rest from the
/// opcode on (after a REX prefix).
fn split_prefixes(bytes: &[u8]) -> (bool, &[u8]) {
    let mut lock = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0xf0 => lock = true,
            0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0x66 | 0x67 => {}
            _ => break,
        }
        i += 1;
    }
    if i < bytes.len() && (0x40..=0x4f).contains(&bytes[i]) {
        i += 1;
    }
    (lock, &bytes[i.min(bytes.len())..])
}

/// The `reg` field of the ModRM byte after the opcode, and whether it names memory.
fn modrm(rest: &[u8]) -> Option<(u8, bool)> {
    let m = *rest.get(1)?;
    Some(((m >> 3) & 7, m >> 6 != 3))
}

/// Whether the instruction is an atomic read-modify-write: a `lock` prefix, or `xchg`
/// with a memory operand (locked without one).
pub fn is_locked(bytes: &[u8]) -> bool {
    let (lock, rest) = split_prefixes(bytes);
    lock || (matches!(rest.first(), Some(0x86 | 0x87)) && modrm(rest).is_some_and(|(_, mem)| mem))
}

/// How the instruction `bytes`, last in its block and followed by `next`, leaves it.
pub fn exit(bytes: &[u8], next: u64) -> Exit {
    let (_, rest) = split_prefixes(bytes);
    let far = |rel: i64| rel.unsigned_abs() + bytes.len() as u64 > NEAR_JUMP;
    match rest.first() {
        Some(0xe9) if rest.len() >= 5 => {
            if far(i32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]) as i64) {
                Exit::FarJump
            } else {
                Exit::Other
            }
        }
        Some(0xff) if modrm(rest).is_some_and(|(reg, _)| reg == 4) => Exit::FarJump,
        Some(0xe8) => Exit::Call { ret: next },
        Some(0xff) if modrm(rest).is_some_and(|(reg, _)| reg == 2) => Exit::Call { ret: next },
        Some(0xc3 | 0xc2) => Exit::Ret,
        Some(0xcf) => Exit::Iret,
        _ => Exit::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locked() {
        assert!(is_locked(&[0xf0, 0x48, 0x0f, 0xb1, 0x17])); // lock cmpxchg %rdx,(%rdi)
        assert!(is_locked(&[0xf0, 0xff, 0x07])); // lock incl (%rdi)
        assert!(is_locked(&[0x87, 0x07])); // xchg %eax,(%rdi)
        assert!(!is_locked(&[0x87, 0xc7])); // xchg %eax,%edi
        assert!(!is_locked(&[0x48, 0x8b, 0x07])); // mov (%rdi),%rax
    }

    #[test]
    fn exits() {
        assert_eq!(exit(&[0xe8, 0, 0, 0, 0], 10), Exit::Call { ret: 10 });
        assert_eq!(exit(&[0xff, 0xd0], 7), Exit::Call { ret: 7 }); // call *%rax
        assert_eq!(exit(&[0x41, 0xff, 0xd3], 7), Exit::Call { ret: 7 }); // call *%r11
        assert_eq!(exit(&[0xff, 0xe0], 7), Exit::FarJump); // jmp *%rax
        assert_eq!(exit(&[0xe9, 0x00, 0x10, 0x00, 0x00], 5), Exit::FarJump); // jmp +4096
        assert_eq!(exit(&[0xe9, 0x00, 0x01, 0x00, 0x00], 5), Exit::Other); // jmp +256
        assert_eq!(exit(&[0xeb, 0x10], 2), Exit::Other); // jmp short
        assert_eq!(exit(&[0xc3], 1), Exit::Ret);
        assert_eq!(exit(&[0xf3, 0xc3], 1), Exit::Ret); // rep ret
        assert_eq!(exit(&[0x48, 0xcf], 1), Exit::Iret); // iretq
        assert_eq!(exit(&[0x0f, 0x07], 1), Exit::Other); // sysret
    }
}
