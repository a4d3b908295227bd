package redis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
	"github.com/agentsessions/sessions/session"
)

// side is one contender of a multi-way interleaved benchmark.
type side struct {
	name string
	op   func() error
}

// interleaveN runs every side b.N times, one op of each per iteration, the
// order rotating every iteration, and reports each side's median time per
// op and its ratio to the first side's median. between, when set, runs
// before iteration i with the timer stopped.
func interleaveN(b *testing.B, sides []side, between func(i int)) {
	b.Helper()
	times := make([][]time.Duration, len(sides))
	for k := range times {
		times[k] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if between != nil {
			b.StopTimer()
			between(i)
			b.StartTimer()
		}
		for j := range sides {
			k := (i + j) % len(sides)
			t0 := time.Now()
			if err := sides[k].op(); err != nil {
				b.Fatalf("%s: %v", sides[k].name, err)
			}
			times[k] = append(times[k], time.Since(t0))
		}
	}
	b.StopTimer()
	base := interleave.Median(times[0])
	b.ReportMetric(float64(base.Nanoseconds()), sides[0].name+"-ns/op")
	for k := 1; k < len(sides); k++ {
		m := interleave.Median(times[k])
		b.ReportMetric(float64(m)/float64(base), sides[k].name+"-x")
	}
}

// popItemsOf returns n realistic items of about size bytes each.
func popItemsOf(size, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		head := fmt.Sprintf(`{"type":"message","role":"assistant","id":"msg_%06d","status":"completed","content":[{"type":"output_text","annotations":[],"text":"`, i)
		tail := `"}]}`
		fill := size - len(head) - len(tail)
		if fill < 1 {
			fill = 1
		}
		text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", fill/45+1)[:fill]
		out[i] = session.MustItem(head + text + tail)
	}
	return out
}

// BenchmarkPopFloor splits PopItem's cost (issue 23): raw RPOP against a
// script that only RPOPs (EVALSHA, and FCALL of a Redis 7 function), a
// script that reads with LINDEX then RPOPs, one that reads PTTL then RPOPs
// (what popping first, and pushing an unsure record back with its expiry,
// would cost), that one with the readability check, the pop script sent
// raw (no client decode), and PopItem, interleaved, for items of 170 and
// 600 bytes.
func BenchmarkPopFloor(b *testing.B) {
	for _, size := range []int{170, 600} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ctx, c, _, s, rawKey := benchSetup(b, Options{})
			items := popItemsOf(size, 1000)
			args := itemArgs(items)
			rpopOnly := newScript(`return redis.call('RPOP', KEYS[1])`)
			lindexPop := newScript(`
local v = redis.call('LINDEX', KEYS[1], -1)
if not v then return false end
redis.call('RPOP', KEYS[1])
return v
`)
			pttlPop := newScript(`
local pttl = redis.call('PTTL', KEYS[1])
local v = redis.call('RPOP', KEYS[1])
if not v then return false end
return v
`)
			rpopCheck := newScript(readableSrc + `
local pttl = redis.call('PTTL', KEYS[1])
local v = redis.call('RPOP', KEYS[1])
if not v then return false end
if not readable(v) then return {v} end
return v
`)
			for _, sc := range []*script{rpopOnly, lindexPop, pttlPop, rpopCheck, popScript, nativePopScript} {
				if err := c.ScriptLoad(ctx, sc.src).Err(); err != nil {
					b.Fatal(err)
				}
			}
			lib := "#!lua name=popbench\nredis.register_function('rpoponly', function(keys, args) return redis.call('RPOP', keys[1]) end)"
			if err := c.Do(ctx, "function", "load", "replace", lib).Err(); err != nil {
				b.Fatal(err)
			}
			k := map[string]string{}
			names := []string{"evalsha-rpop", "fcall-rpop", "evalsha-lindex-rpop", "evalsha-pttl-rpop", "evalsha-rpop-check", "evalsha-pop-script", "evalsha-native-pop-script"}
			for _, n := range names {
				k[n] = rawKey + ":" + n
			}
			ev := func(sc *script, keys []string, argv ...any) error {
				args := append(evalArgs("evalsha", sc.sha, keys, len(argv)), argv...)
				return c.Do(ctx, args...).Err()
			}
			refill := func() {
				c.RPush(ctx, rawKey, args...)
				for _, key := range k {
					c.RPush(ctx, key, args...)
				}
				if err := s.AddItems(ctx, items); err != nil {
					b.Fatal(err)
				}
			}
			b.Cleanup(func() {
				for _, key := range k {
					c.Del(ctx, key)
				}
			})
			popKeys := []string{k["evalsha-pop-script"]} // as PopItem sends it without a TTL (Python layout), and a pop record key per call
			// as PopItem sends it in the native layout, without a TTL: the
			// script records the pop when the metadata holds an epoch
			nativePopKeys := []string{k["evalsha-native-pop-script"], k["evalsha-native-pop-script"] + ":meta"}
			interleaveN(b, []side{
				{"rpop", func() error { return c.RPop(ctx, rawKey).Err() }},
				{"evalsha-rpop", func() error { return ev(rpopOnly, []string{k["evalsha-rpop"]}) }},
				{"fcall-rpop", func() error { return c.Do(ctx, "fcall", "rpoponly", 1, k["fcall-rpop"]).Err() }},
				{"evalsha-lindex-rpop", func() error { return ev(lindexPop, []string{k["evalsha-lindex-rpop"]}) }},
				{"evalsha-pttl-rpop", func() error { return ev(pttlPop, []string{k["evalsha-pttl-rpop"]}) }},
				{"evalsha-rpop-check", func() error { return ev(rpopCheck, []string{k["evalsha-rpop-check"]}) }},
				{"evalsha-pop-script", func() error {
					return ev(popScript, append(popKeys[:1:1], popKeys[0]+":pops", popKeys[0]+":pop:"+NewPopToken()), int64(0), popRecordMS)
				}},
				{"evalsha-native-pop-script", func() error {
					return ev(nativePopScript, append(nativePopKeys[:2:2], nativePopKeys[0]+":pops", nativePopKeys[0]+":pop:"+NewPopToken()), int64(0), popRecordMS)
				}},
				{"popitem", func() error {
					_, ok, err := s.PopItem(ctx)
					if err == nil && !ok {
						err = fmt.Errorf("empty")
					}
					return err
				}},
			}, func(i int) {
				if i%500 == 0 {
					refill()
				}
			})
		})
	}
}

// BenchmarkPopServerCPU reports redis-server's own time per call
// (INFO commandstats, usec_per_call) of each way to pop, each run alone
// after CONFIG RESETSTAT on the shared server.
func BenchmarkPopServerCPU(b *testing.B) {
	ctx, c, _, s, rawKey := benchSetup(b, Options{})
	items := popItemsOf(170, 1000)
	args := itemArgs(items)
	rpopOnly := newScript(`return redis.call('RPOP', KEYS[1])`)
	for _, src := range []string{rpopOnly.src, popScript.src, nativePopScript.src} {
		if err := c.ScriptLoad(ctx, src).Err(); err != nil {
			b.Fatal(err)
		}
	}
	stat := func(cmd string) float64 {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":"); ok {
				for _, f := range strings.Split(rest, ",") {
					if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
						var x float64
						fmt.Sscan(v, &x)
						return x
					}
				}
			}
		}
		return 0
	}
	run := func(name, cmd string, op func() error, refill func()) {
		refill()
		c.ConfigResetStat(ctx)
		for i := 0; i < b.N; i++ {
			if i%500 == 499 {
				refill()
			}
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(stat(cmd), name+"-server-us/call")
	}
	b.ResetTimer()
	run("rpop", "rpop", func() error { return c.RPop(ctx, rawKey).Err() },
		func() { c.RPush(ctx, rawKey, args...) })
	run("evalsha-rpop", "evalsha", func() error {
		return c.EvalSha(ctx, rpopOnly.sha, []string{rawKey}).Err()
	}, func() { c.RPush(ctx, rawKey, args...) })
	run("pop-script-unrecorded", "evalsha", func() error { // the pop script without the native layout's record of the pop (follow.go)
		return c.EvalSha(ctx, popScript.sha, []string{rawKey, rawKey + ":pops", rawKey + ":pop:" + NewPopToken()}, 0, popRecordMS).Err()
	}, func() { c.RPush(ctx, rawKey, args...) })
	run("popitem", "evalsha", func() error {
		_, ok, err := s.PopItem(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("empty")
		}
		return err
	}, func() {
		if err := s.AddItems(ctx, items); err != nil {
			b.Fatal(err)
		}
	})
}
