// Package capture runs a function and returns what it printed, for tests
// of Example functions that need a server (and so cannot rely on an
// "// Output:" comment, which runs whether a server is there or not).
package capture

import (
	"io"
	"os"
	"testing"
)

// Stdout runs f and returns what it wrote to os.Stdout.
func Stdout(t testing.TB, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	stdout := os.Stdout
	os.Stdout = w
	func() {
		defer func() { os.Stdout = stdout }()
		f()
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := <-got
	_ = r.Close()
	return string(out)
}
