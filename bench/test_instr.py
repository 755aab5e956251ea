"""Unit tests of instr.py's reading of callgrind_annotate's function list
(no processes). Run: python3 -m unittest discover -s bench -p 'test_*.py'"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instr  # noqa: E402

ANNOTATE = """--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
1,000,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                file:function
--------------------------------------------------------------------------------
400,000 (40.00%)  providers/tcp/src/device.rs:rfabric_tcp::device::ConnDevice<T>::read [/work/main/build/lib/libfabric.so.1.2.8.0]
150,000 (15.00%)  ./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:__memcpy_avx_unaligned_erms [/usr/lib/x86_64-linux-gnu/libc.so.6]
100,000 (10.00%)  /rustc/0123/library/core/src/slice/iter/macros.rs:rfabric_rudp::engine::iov_len
 90,000 ( 9.00%)  ???:0x0000000000005760 [/usr/bin/fi_pingpong]
 80,000 ( 8.00%)  src/ucs/datastruct/mpool.c:ucs_mpool_get [/usr/lib/x86_64-linux-gnu/libucs.so.0.0.0]
 70,000 ( 7.00%)  ./elf/./elf/dl-lookup.c:do_lookup_x [/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2]
 60,000 ( 6.00%)  ???:0x0000000000001234 [/usr/libexec/valgrind/vgpreload_core-amd64-linux.so]
 50,000 ( 5.00%)  ???:0x0000000000004321 [/usr/lib/x86_64-linux-gnu/libgcc_s.so.1]
"""


class SplitCounts(unittest.TestCase):
    def test_library_is_all_but_libc_loader_program_and_valgrind(self):
        total, own = instr.split_counts(ANNOTATE)
        self.assertEqual(total, 1_000_000)
        # Our object, code inlined into it from std, and UCX's libraries.
        self.assertEqual(own, 400_000 + 100_000 + 80_000)

    def test_no_totals_reads_zero(self):
        self.assertEqual(instr.split_counts("nothing here\n"), (0, 0))


if __name__ == "__main__":
    unittest.main()
