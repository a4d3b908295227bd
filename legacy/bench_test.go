package legacy_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
)

// The benchmarks compare each shim with calling the session it wraps
// directly, doing the least work that gives the same result. Each runs raw
// first, then shim, and the shim reports its cost as a multiple of raw's:
// x-raw-ns and x-raw-allocs (1.00 = no overhead).

type cost struct{ ns, allocs float64 }

func measure(b *testing.B, fn func()) cost {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		fn()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	return cost{float64(b.Elapsed().Nanoseconds()) / float64(b.N), float64(after.Mallocs-before.Mallocs) / float64(b.N)}
}

func pair(b *testing.B, raw, shim func()) {
	var r cost
	b.Run("raw", func(b *testing.B) { r = measure(b, raw) })
	b.Run("shim", func(b *testing.B) {
		s := measure(b, shim)
		if r.ns > 0 {
			b.ReportMetric(s.ns/r.ns, "x-raw-ns")
		}
		if r.allocs > 0 {
			b.ReportMetric(s.allocs/r.allocs, "x-raw-allocs")
		}
	})
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

func rawBatch(items []session.Item) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		out[i] = json.RawMessage(it.Bytes())
	}
	return out
}

// FromLimitSession's LatestItems(20) against GetItems(ctx, 20) on the
// reference nlpodyssey-shaped store holding 1000 items.
func BenchmarkFromLimitLatest20(b *testing.B) {
	ctx := context.Background()
	st := newLimitStore()
	ref := st.session("s")
	require.NoError(b, ref.AddItems(ctx, rawBatch(msgs("m", 1000))))
	shim := legacy.FromLimitSession[json.RawMessage](ref, nil).(session.LatestReader)
	pair(b,
		func() { _, err := ref.GetItems(ctx, 20); must(b, err) },
		func() { _, err := shim.LatestItems(ctx, 20); must(b, err) })
}

// FromLimitSession's AddItems of 10 items against AddItems of the same 10
// raw messages.
func BenchmarkFromLimitAppend10(b *testing.B) {
	ctx := context.Background()
	batch := msgs("a", 10)
	raw := rawBatch(batch)
	ref := newLimitStore().session("s")
	shim := legacy.FromLimitSession[json.RawMessage](newLimitStore().session("s"), nil)
	n := 0
	pair(b,
		func() {
			must(b, ref.AddItems(ctx, raw))
			if n++; n%1000 == 0 {
				must(b, ref.ClearSession(ctx))
			}
		},
		func() {
			must(b, shim.AddItems(ctx, batch))
			if n++; n%1000 == 0 {
				must(b, shim.Clear(ctx))
			}
		})
}

// ToLimitSession's GetItems(ctx, 20) against the memory adapter's
// LatestItems(20), 1000 items stored.
func BenchmarkToLimitGetItems20(b *testing.B) {
	ctx := context.Background()
	mem, err := memory.NewSession("s")
	require.NoError(b, err)
	require.NoError(b, mem.AddItems(ctx, msgs("m", 1000)))
	shim := legacy.ToLimitSession[json.RawMessage](mem, nil)
	pair(b,
		func() { _, err := mem.LatestItems(ctx, 20); must(b, err) },
		func() { _, err := shim.GetItems(ctx, 20); must(b, err) })
}

// FromPlain's Items against the plain session's Items, 100 items stored.
func BenchmarkFromPlainItems100(b *testing.B) {
	ctx := context.Background()
	p := newPlainStore(nil).session("s")
	require.NoError(b, p.AddItems(msgs("m", 100)))
	shim := legacy.FromPlain(p)
	pair(b,
		func() { _, err := p.Items(); must(b, err) },
		func() { _, err := shim.Items(ctx); must(b, err) })
}
