package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
)

// runAs is the unprivileged user postgres runs as when we are root.
type runAs struct{ uid, gid uint32 }

// credential returns the user to run postgres as: nil (ourselves) unless
// we are root, "nobody" then.
func credential() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil // also on Windows, where Geteuid is -1
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, postgres needs an unprivileged user, and looking up \"nobody\" failed: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user nobody: %w", err)
	}
	return &runAs{uid: uint32(uid), gid: uint32(gid)}, nil
}
