package encrypted_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/agentsessions/sessions/encrypted"
)

// TestHostileEnvelopesCostWhatTheyWeigh: envelopes an attacker planted
// (a huge payload that is not a token, a huge token signed with another
// key, many keys to try) cost a read memory within a small constant of
// their size, and each is refused; what is measured is logged.
func TestHostileEnvelopesCostWhatTheyWeigh(t *testing.T) {
	ctx := context.Background()
	other := newMem(t, "s")
	w, err := encrypted.New(other, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "attacker"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddItems(ctx, items(t, `{"content":"`+strings.Repeat("x", 2<<20)+`"}`)); err != nil {
		t.Fatal(err)
	}
	signed, err := other.Items(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := []encrypted.Key{{ID: "k1", Secret: "mine"}}
	for _, id := range []string{"k2", "k3", "k4", "k5", "k6", "k7", "k8"} {
		keys = append(keys, encrypted.Key{ID: id, Secret: "mine-" + id})
	}
	for _, tc := range []struct{ name, stored string }{
		{"not a token", `{"__enc__":1,"v":1,"kid":null,"payload":"` + strings.Repeat("A", 4<<20) + `"}`},
		{"signed with another key, tried with 8", signed[0].String()},
	} {
		inner := newMem(t, "s")
		if err := inner.AddItems(ctx, items(t, tc.stored)); err != nil {
			t.Fatal(err)
		}
		r, err := encrypted.New(inner, encrypted.Options{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, rerr := r.Items(ctx)
		runtime.ReadMemStats(&after)
		n := after.TotalAlloc - before.TotalAlloc
		ratio := float64(n) / float64(len(tc.stored))
		t.Logf("%s: %d bytes stored, %d allocated (×%.1f): %v", tc.name, len(tc.stored), n, ratio, rerr)
		if rerr == nil {
			t.Fatalf("%s: read", tc.name)
		}
		if ratio > 16 {
			t.Errorf("%s: a read allocated ×%.1f the stored size, more than ×16", tc.name, ratio)
		}
	}
}
