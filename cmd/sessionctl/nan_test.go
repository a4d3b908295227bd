package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/storetest"
)

// TestMigrateNaNBetweenEveryPair: items holding Python's NaN, Infinity and
// -Infinity (json.dumps writes them by default) migrate between every pair
// of backends byte for byte, and are never reported unreadable.
func TestMigrateNaNBetweenEveryPair(t *testing.T) {
	items := []string{
		`{"type":"function_call","call_id":"c","name":"measure","arguments":"{}"}`,
		`{"type": "function_call_output", "call_id": "c", "output": NaN, "range": [-Infinity, Infinity]}`,
		`{"role":"assistant","content":"no number","score":NaN}`,
	}
	var backends []storetest.Backend
	for _, b := range storetest.Backends() {
		if b.Peer { // memory:// is a new store at every open: nothing to migrate between
			backends = append(backends, b)
		}
	}
	python := storetest.Backend{Name: "redis-python-layout", URL: func(t testing.TB) string {
		for _, b := range backends {
			if b.Name == "redis" {
				return b.URL(t) + "&layout=python"
			}
		}
		t.Fatal("no redis backend")
		return ""
	}}
	backends = append(backends, python)
	for _, from := range backends {
		t.Run(from.Name, func(t *testing.T) {
			src := from.URL(t)
			seed(t, src, "nan", items...)
			require.Equal(t, items, read(t, src, "nan"), "stored and read back byte for byte")
			for _, to := range backends {
				if to.Name == from.Name {
					continue
				}
				dst := to.URL(t)
				code, out, stderr := sessionctl(t, "migrate", "-offline", "--from", src, "--to", dst, "--session", "nan")
				require.Equal(t, 0, code, "%s -> %s: %s", from.Name, to.Name, stderr)
				require.Contains(t, out, "1 copied", "%s -> %s", from.Name, to.Name)
				require.NotContains(t, stderr, "unreadable")
				require.Equal(t, items, read(t, dst, "nan"), "%s -> %s", from.Name, to.Name)
			}
		})
	}
}
