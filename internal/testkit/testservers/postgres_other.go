//go:build !unix

package testservers

import (
	"errors"
	"syscall"
)

// pgOwner: a local cluster is started on Unix only.
type pgOwner struct{}

func postgresOwner() (pgOwner, error) {
	return pgOwner{}, errors.New("a local PostgreSQL cluster is started on Unix only")
}

func (pgOwner) sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

func (pgOwner) chown(string) error { return nil }
