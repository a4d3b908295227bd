package adapters

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzRedact: for any password p in a URL of the form
// scheme://user:p@rest, where user holds no ':' or '@' and rest no '@'
// (the forms a driver reads), Redact writes exactly
// scheme://user:xxxxx@rest, whatever p holds ('%', '#', '/', '@', ':',
// spaces, "://", invalid UTF-8). So the output holds p only where the
// public parts already hold it, which the property rules out before
// asserting that p (of 4 bytes or more) is gone.
func FuzzRedact(f *testing.F) {
	f.Add("redis", "", "Pa%ssWord", "127.0.0.1:6379/0")
	f.Add("redis", "user", "pass word", "h:1/0")
	f.Add("mongodb", "u", "pa#ss/w?rd@x", "h1:1,h2:2/db?replicaSet=rs0")
	f.Add("unix", "u", "p:a:s:s", "/tmp/redis.sock?db=0")
	f.Add("redis+cluster", "u", "a://b:c@", "h:1")
	f.Add("rediss", "u", "\xff\xfe\x00pw", "h:1/0")
	f.Fuzz(func(t *testing.T, scheme, user, p, rest string) {
		if strings.Index(scheme+"://", "://") != len(scheme) || strings.ContainsAny(user, ":@") ||
			strings.Contains(user, "://") || strings.Contains(rest, "@") {
			t.Skip("not of the form scheme://user:password@rest")
		}
		dsn := scheme + "://" + user + ":" + p + "@" + rest
		out := Redact(dsn)
		want := scheme + "://" + user + ":" + mask + "@" + rest
		if out != want {
			t.Fatalf("Redact(%q) = %q, want %q", dsn, out, want)
		}
		red, secret := redact(dsn)
		if red != out || secret != p {
			t.Fatalf("redact(%q) = %q, %q; want %q, %q", dsn, red, secret, out, p)
		}
		if len(p) >= 4 && !strings.Contains(want, p) && strings.Contains(out, p) {
			t.Fatalf("Redact(%q) = %q shows the password", dsn, out)
		}
		// A backend error that echoes the password loses it too.
		err := scrub(fmt.Errorf("dial %s: refused: %w", dsn, errBackend), p)
		if !errors.Is(err, errBackend) {
			t.Fatalf("scrub lost the error chain: %v", err)
		}
		if public := "dial " + want + ": refused: " + errBackend.Error(); len(p) >= 4 &&
			!strings.Contains(public, p) && strings.Contains(err.Error(), p) {
			t.Fatalf("scrub(%q) = %q shows the password", p, err)
		}
	})
}

var errBackend = errors.New("backend")

func TestRedactUnparseable(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:Pa%ssWord@127.0.0.1:6379/0": "redis://:xxxxx@127.0.0.1:6379/0",
		"  redis://u:p w@h":                   "  redis://u:xxxxx@h",
		"no scheme at all: p@ss":              "no scheme at all: p@ss",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrubHidesTheChain(t *testing.T) {
	inner := fmt.Errorf("dial redis://u:hunter22@h: %w", errBackend)
	err := scrub(fmt.Errorf("open: %w", inner), "hunter22")
	require := func(ok bool, msg string) {
		t.Helper()
		if !ok {
			t.Fatal(msg)
		}
	}
	require(errors.Is(err, errBackend), "errors.Is sees the chain")
	require(!strings.Contains(err.Error(), "hunter22"), "message masked")
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		require(!strings.Contains(e.Error(), "hunter22"), "an unwrapped error shows the password")
	}
	require(scrub(errBackend, "hunter22") == errBackend, "an error without the password is returned as it is")
}
