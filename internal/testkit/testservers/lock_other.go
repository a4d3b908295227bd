//go:build !unix

package testservers

// lockFile does not lock outside Unix; concurrent builds of the launcher
// then both run, and the atomic rename keeps the result whole.
func lockFile(path string) (unlock func(), err error) { return func() {}, nil }
