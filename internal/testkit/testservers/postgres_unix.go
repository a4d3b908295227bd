//go:build unix

package testservers

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// pgOwner is the user the local cluster runs as: this process's own
// (cred nil) unless this process is root, which PostgreSQL refuses; then
// the unprivileged user "postgres".
type pgOwner struct{ cred *syscall.Credential }

func postgresOwner() (pgOwner, error) {
	if os.Geteuid() != 0 {
		return pgOwner{}, nil
	}
	u, err := user.Lookup(postgresUser)
	if err != nil {
		return pgOwner{}, fmt.Errorf("running as root, which PostgreSQL refuses, and user %q is missing (the Debian package postgresql creates it): %w", postgresUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return pgOwner{}, fmt.Errorf("user %q has non-numeric ids %q/%q", postgresUser, u.Uid, u.Gid)
	}
	return pgOwner{&syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}, nil
}

// sysProcAttr returns process attributes that run a command as o.
func (o pgOwner) sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: o.cred}
}

// chown gives path to o.
func (o pgOwner) chown(path string) error {
	if o.cred == nil {
		return nil
	}
	return os.Chown(path, int(o.cred.Uid), int(o.cred.Gid))
}
