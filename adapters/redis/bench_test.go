package redis

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
)

// benchItems returns n realistic message items (about 170 bytes each).
func benchItems(tag string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"benchmark %s item %d: the quick brown fox jumps over the lazy dog"}]}`, tag, i))
	}
	return out
}

func itemArgs(items []session.Item) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it.Bytes()
	}
	return out
}

// pair runs raw and adapter b.N times each, alternating which goes first,
// and reports each one's time per op and their ratio (adapter/raw).
// between, when set, runs before iteration i with the timer stopped.
func pair(b *testing.B, raw, adapter func() error, between func(i int)) {
	b.Helper()
	var rawT, adT time.Duration
	run := func(f func() error, into *time.Duration) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into += time.Since(t0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if between != nil {
			b.StopTimer()
			between(i)
			b.StartTimer()
		}
		if i%2 == 0 {
			run(raw, &rawT)
			run(adapter, &adT)
		} else {
			run(adapter, &adT)
			run(raw, &rawT)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(adT.Nanoseconds())/float64(b.N), "adapter-ns/op")
	b.ReportMetric(float64(adT)/float64(rawT), "ratio")
}

func benchSetup(b *testing.B) (context.Context, goredis.UniversalClient, *Session, string) {
	b.Helper()
	c := standaloneClient(b)
	st := newStore(b, c, Options{KeyPrefix: uniquePrefix(b)})
	s, err := st.Session("bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := st.LoadScripts(ctx); err != nil {
		b.Fatal(err)
	}
	rawKey := st.Options().KeyPrefix + ":raw"
	b.Cleanup(func() { c.Del(ctx, rawKey, s.keys[0], s.keys[1]) })
	return ctx, c, s, rawKey
}

// BenchmarkAppend20: a 20-item batch. Raw: one RPUSH. Adapter: AddItems,
// one EVALSHA that also stamps the metadata.
func BenchmarkAppend20(b *testing.B) {
	ctx, c, s, rawKey := benchSetup(b)
	items := benchItems("a", 20)
	args := itemArgs(items)
	pair(b,
		func() error { return c.RPush(ctx, rawKey, args...).Err() },
		func() error { return s.AddItems(ctx, items) },
		func(i int) {
			if i%1000 == 999 { // keep the lists small
				c.Del(ctx, rawKey, s.keys[0])
			}
		})
}

// BenchmarkLatest50: the newest 50 items of a history of 1k and 100k.
// Raw: LRANGE -50 -1. Adapter: LatestItems(50), which also checks that
// every record is a JSON object.
func BenchmarkLatest50(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			ctx, c, s, _ := benchSetup(b)
			batch := benchItems("l", 1000)
			for n := 0; n < size; n += len(batch) {
				if err := s.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			pair(b,
				func() error { return c.LRange(ctx, s.keys[0], -50, -1).Err() },
				func() error {
					got, err := s.LatestItems(ctx, 50)
					if err == nil && len(got) != 50 {
						err = fmt.Errorf("got %d items", len(got))
					}
					return err
				}, nil)
		})
	}
}

// BenchmarkPop: pop the newest item. Raw: RPOP. Adapter: PopItem.
func BenchmarkPop(b *testing.B) {
	ctx, c, s, rawKey := benchSetup(b)
	batch := benchItems("p", 1000)
	args := itemArgs(batch)
	pair(b,
		func() error { return c.RPop(ctx, rawKey).Err() },
		func() error {
			_, ok, err := s.PopItem(ctx)
			if err == nil && !ok {
				err = fmt.Errorf("empty")
			}
			return err
		},
		func(i int) {
			if i%len(batch) == 0 { // refill both lists
				c.RPush(ctx, rawKey, args...)
				if err := s.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
}
