// Probe: hole 7: two clones of a DmaBuf (Send + Sync) copy in and out of the same bytes
// expect: ok

// What a transport can do with a shared buffer: copies in and out, which are volatile
// accesses synced for exactly their bytes (racing ones may tear the data, no undefined
// behaviour), and a raw address, unusable without `unsafe`. No accessor gives a
// `&[u8]` or `&mut [u8]` into the memory, so no probe of one can compile.
#[allow(dead_code)]
fn hole_7_clones_copy_the_same_bytes(buf: &crate::rdma::DmaBuf) -> kernel::error::Result {
    fn across_threads<T: Send + Sync + Clone>(_: &T) {}
    let other = buf.clone();
    across_threads(&other);
    buf.copy_in(0, &[1u8; 16])?;
    other.fill(0, 16, 0)?;
    other.fill_pattern(16, 7)?;
    let mut out = [0u8; 16];
    other.copy_out(0, &mut out)?;
    let _command: [u8; 64] = buf.read_64(0)?;
    let _first = buf.first_difference(&other, 16)?;
    let _at: *mut u8 = buf.cpu_ptr(0)?;
    Ok(())
}
