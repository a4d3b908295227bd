package adapters_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters"
)

// openTargets are a URL of each backend but its password and query, on a
// port nothing listens on.
var openTargets = []struct{ scheme, rest string }{
	{"memory", ""},
	{"sqlite", "/tmp/agentsessions-fuzz-none/s.db"},
	{"redis", "127.0.0.1:1/0"},
	{"rediss", "127.0.0.1:1/0"},
	{"redis+cluster", "127.0.0.1:1"},
	{"redis+sentinel", "127.0.0.1:1/mymaster"},
	{"unix", "/tmp/agentsessions-fuzz-none.sock"},
	{"mongodb", "127.0.0.1:1/db"},
	{"postgres", "127.0.0.1:1/db"},
	{"postgresql", "127.0.0.1:1/db"},
}

// FuzzOpenHidesPassword: whatever query follows it, on every scheme, the
// error Open returns (an option refused, the driver's own error, a server
// that cannot be reached) never shows the URL's password, nor the value of
// an unknown option (a mistyped "passwrd") added to the query, nor what
// Redact writes of the URL. The password and the value are random for
// every call, so no input the fuzzer makes holds them.
func FuzzOpenHidesPassword(f *testing.F) {
	for i := range openTargets {
		for _, q := range []string{"", "tll=1h", "layout=bad", "db=x", "dial_timeout=-1s", "sslmode=bogus", "connect_timeout=1",
			"schema=bad%20name", "replicaSet=rs0&sessions_colection=x", "ttl=1h&refresh_on_read=maybe", "pool_size=%zz", "a=b;c"} {
			f.Add(uint8(i), q)
		}
	}
	f.Fuzz(func(t *testing.T, target uint8, query string) {
		o := openTargets[int(target)%len(openTargets)]
		var b [8]byte
		_, _ = rand.Read(b[:])
		secret := "Zq" + hex.EncodeToString(b[:])
		_, _ = rand.Read(b[:])
		unknown := "Zu" + hex.EncodeToString(b[:])
		for _, dsn := range []string{
			o.scheme + "://u:" + secret + "@" + o.rest + "?" + query,
			o.scheme + "://u:" + secret + "@" + o.rest + "?" + query + "&passwrd=" + unknown,
			o.scheme + "://u:" + secret + "@" + o.rest + "?zz_opt=" + unknown + "&" + query,
		} {
			check := func(what, msg string) {
				for _, s := range []string{secret, unknown} {
					for i := 0; i+6 <= len(s); i++ {
						if strings.Contains(msg, s[i:i+6]) {
							t.Fatalf("%s of %q shows part of a secret: %s", what, dsn, msg)
						}
					}
				}
			}
			check("Redact", adapters.Redact(dsn))
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := adapters.Open(ctx, dsn)
			cancel()
			if err == nil {
				_ = st.Close()
				continue
			}
			check("Open's error", err.Error())
		}
	})
}
