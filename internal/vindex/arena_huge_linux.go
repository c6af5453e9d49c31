package vindex

import "golang.org/x/sys/unix"

// adviseHuge asks the kernel to back b with transparent huge pages
// (madvise MADV_HUGEPAGE: honoured when
// /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise",
// the usual default). A refusal (THP off, an old kernel) leaves b on
// small pages, which is only slower.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
