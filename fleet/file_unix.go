//go:build unix

package fleet

import (
	"os"
	"syscall"
)

// devIno returns the device and inode of fi: which file a path leads to.
func devIno(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
