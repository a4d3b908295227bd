package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// The benchmarks run the adapter against the tightest raw go-redis code for
// the same work (one command, arguments prepared outside the loop, no
// validation, replies kept as the strings go-redis returns), in the same
// run, on the shared standalone server, interleaved op by op with
// internal/testkit/interleave: each side's median time per op (raw-ns/op,
// lib-ns/op; a median, so that a stall of the shared machine does not
// decide the ratio), x-raw = lib ÷ raw, and allocations per op counted
// apart.

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

// run interleaves raw and the adapter with interleave.Run; an error of
// either fails the benchmark.
func run(b *testing.B, prep func(), raw, adapter func() error) map[string]float64 {
	b.Helper()
	must := func(f func() error) func() {
		return func() {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return interleave.Run(b, prep, must(adapter), interleave.Side{Name: "raw", Op: must(raw)})
}

func benchSetup(b *testing.B, opts Options) (context.Context, goredis.UniversalClient, *Store, *Session, string) {
	b.Helper()
	c := standaloneClient(b)
	opts.KeyPrefix = uniquePrefix(b)
	st := newStore(b, c, opts)
	s, err := st.Session("bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := st.LoadScripts(ctx); err != nil {
		b.Fatal(err)
	}
	rawKey := st.Options().KeyPrefix + ":raw"
	b.Cleanup(func() { c.Del(ctx, append([]string{rawKey}, s.keys...)...) })
	return ctx, c, st, s, rawKey
}

// BenchmarkAppend20: a 20-item batch onto an existing session. Raw: one
// RPUSH of the 20 items. Adapter: AddItems, which validates the batch and
// sends one RPUSHX (no TTL), or the append script (with a TTL: the raw
// side is then one RPUSH and one PEXPIRE per key, pipelined).
func BenchmarkAppend20(b *testing.B) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		b.Run("ttl="+ttl.String(), func(b *testing.B) {
			ctx, c, _, s, rawKey := benchSetup(b, Options{TTL: ttl})
			items := benchItems("a", 20)
			args := itemArgs(items)
			raw := func() error { return c.RPush(ctx, rawKey, args...).Err() }
			if ttl > 0 {
				raw = func() error {
					_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
						p.RPush(ctx, rawKey, args...)
						p.PExpire(ctx, rawKey, ttl)
						p.PExpire(ctx, rawKey+":meta", ttl)
						return nil
					})
					return err
				}
			}
			rounds := 0
			run(b, func() {
				if rounds%1000 == 0 { // keep the lists small, but never empty
					c.Del(ctx, rawKey, s.keys[0])
					c.RPush(ctx, rawKey, args[0])
					if err := s.AddItems(ctx, items[:1]); err != nil {
						b.Fatal(err)
					}
				}
				rounds++
			}, raw, func() error { return s.AddItems(ctx, items) })
		})
	}
}

// BenchmarkLatest50: the newest 50 items of a history of 1k, 100k and 1M
// items: the time must not grow with the history. Raw: LRANGE -50 -1.
// Adapter: LatestItems(50), which also checks that every record is a JSON
// object.
func BenchmarkLatest50(b *testing.B) {
	for _, size := range []int{1_000, 100_000, 1_000_000} {
		b.Run("history="+strconv.Itoa(size), func(b *testing.B) {
			ctx, c, _, s, _ := benchSetup(b, Options{})
			batch := benchItems("l", 1000)
			for n := 0; n < size; n += len(batch) {
				if err := s.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			run(b, nil,
				func() error {
					got, err := c.LRange(ctx, s.keys[0], -50, -1).Result()
					if err == nil && len(got) != 50 {
						err = fmt.Errorf("raw: got %d items", len(got))
					}
					return err
				},
				func() error {
					got, err := s.LatestItems(ctx, 50)
					if err == nil && len(got) != 50 {
						err = fmt.Errorf("got %d items", len(got))
					}
					return err
				})
		})
	}
}

// BenchmarkPop: pop the newest item. Raw: RPOP. Adapter: PopItem, one
// script that pops the newest record only if the server's cheap check
// (readableSrc) says the client reads it, and returns it (one round trip;
// the client then decodes it).
func BenchmarkPop(b *testing.B) {
	ctx, c, _, s, rawKey := benchSetup(b, Options{})
	batch := benchItems("p", 1000)
	args := itemArgs(batch)
	refill := func() {
		c.RPush(ctx, rawKey, args...)
		if err := s.AddItems(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	rounds := 0
	run(b, func() {
		if rounds%500 == 0 { // 1000 more on both lists every 500 rounds
			refill()
		}
		rounds++
	},
		func() error { return c.RPop(ctx, rawKey).Err() },
		func() error {
			_, ok, err := s.PopItem(ctx)
			if err == nil && !ok {
				err = fmt.Errorf("empty")
			}
			return err
		})
}

// BenchmarkConcurrentAppend: 16 goroutines, each appending 5-item batches
// to its own session (and, in "one-session", all to one session), 20
// batches each per round; raw and adapter rounds alternate. Reports
// batches per second of each side and the throughput ratio adapter/raw
// (higher is better). Raw: one RPUSH per batch.
func BenchmarkConcurrentAppend(b *testing.B) {
	const goroutines, perRound = 16, 20
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "own-sessions", true: "one-session"}[shared]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			c := goredis.NewClient(func() *goredis.Options {
				o, err := goredis.ParseURL(testservers.Redis(b))
				if err != nil {
					b.Fatal(err)
				}
				o.PoolSize = goroutines
				return o
			}())
			b.Cleanup(func() { _ = c.Close() })
			st := newStore(b, c, Options{KeyPrefix: uniquePrefix(b)})
			sessions := make([]*Session, goroutines)
			rawKeys := make([]string, goroutines)
			for g := range sessions {
				id := "g" + strconv.Itoa(g)
				if shared {
					id = "shared"
				}
				var err error
				if sessions[g], err = st.Session(id); err != nil {
					b.Fatal(err)
				}
				rawKeys[g] = st.Options().KeyPrefix + ":raw:" + id
			}
			items := benchItems("c", 5)
			args := itemArgs(items)
			reset := func() {
				for g := range sessions {
					c.Del(ctx, rawKeys[g], sessions[g].keys[0], sessions[g].keys[1])
					if err := sessions[g].AddItems(ctx, items); err != nil { // the sessions exist
						b.Fatal(err)
					}
				}
			}
			round := func(op func(g int) error) time.Duration {
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for range perRound {
							if err := op(g); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				t0 := time.Now()
				close(start)
				wg.Wait()
				return time.Since(t0)
			}
			raw := func(g int) error { return c.RPush(ctx, rawKeys[g], args...).Err() }
			ad := func(g int) error { return sessions[g].AddItems(ctx, items) }
			reset()
			var rawT, adT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%200 == 199 {
					b.StopTimer()
					reset()
					b.StartTimer()
				}
				if i%2 == 0 {
					rawT += round(raw)
					adT += round(ad)
				} else {
					adT += round(ad)
					rawT += round(raw)
				}
			}
			b.StopTimer()
			batches := float64(b.N * goroutines * perRound)
			b.ReportMetric(batches/rawT.Seconds(), "raw-batches/s")
			b.ReportMetric(batches/adT.Seconds(), "adapter-batches/s")
			b.ReportMetric(float64(rawT)/float64(adT), "throughput-ratio")
		})
	}
}

// BenchmarkItems: the whole history, at 1k, 10k and 100k items: time and
// allocations grow linearly with the history, on both sides. Raw:
// LRANGE 0 -1. Adapter: Items, which also checks every record.
func BenchmarkItems(b *testing.B) {
	for _, size := range []int{1_000, 10_000, 100_000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			ctx, c, _, s, _ := benchSetup(b, Options{})
			batch := benchItems("i", 1000)
			for n := 0; n < size; n += len(batch) {
				if err := s.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			run(b, nil,
				func() error { return c.LRange(ctx, s.keys[0], 0, -1).Err() },
				func() error {
					got, err := s.Items(ctx)
					if err == nil && len(got) != size {
						err = fmt.Errorf("got %d items", len(got))
					}
					return err
				})
		})
	}
}
