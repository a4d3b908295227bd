package redis

import (
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
)

// floorScript is the least a Lua-fenced commit can run: the version
// compared, the items pushed, the version and document set. It checks no
// key type and keeps no expiry.
const floorScript = `if redis.call('HGET', KEYS[2], 'v') ~= ARGV[1] then return -1 end
redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('HSET', KEYS[2], 'v', tostring(tonumber(ARGV[1]) + 1), 'd', ARGV[2])
return 1`

// BenchmarkCommitFloor measures what a versioned commit of a 20-item turn
// and its checkpoint can cost on Redis, against the append of the same
// items, interleaved op by op. lib is the adapter's AppendWithCheckpoint
// (the fenced commit); the other sides are raw go-redis:
//
//	rpush    one RPUSH of the items: the append
//	append   the adapter's AddItems (one RPUSHX)
//	unfenced MULTI, RPUSH, HSET of version and document, EXEC: no version
//	         check at all, so no commit can be cheaper and still write both
//	evalsha  one EVALSHA of floorScript with the items in ARGV: the
//	         cheapest Lua fence
//	watch    MULTI, RPUSH, HSET, EXEC, then WATCH and HGET of the new
//	         version for the next commit, on one connection kept for it:
//	         the cheapest fence without Lua
//
// Reported besides interleave's metrics: each side ÷ rpush (<side>/rpush),
// and lib ÷ append, the ratio issue 34 asks about without runstate's part.
func BenchmarkCommitFloor(b *testing.B) {
	ctx, c, st, s, rawKey := benchSetup(b, Options{})
	plain, err := st.Session("bench-plain")
	if err != nil {
		b.Fatal(err)
	}
	items := benchItems("turn", 20)
	args := itemArgs(items)
	doc := []byte(`{"$schemaVersion":"1.17","current_step":{"type":"next_step_run_again"},"current_turn_persisted_item_count":20}`)
	keys := map[string][2]string{}
	for _, side := range []string{"unfenced", "evalsha", "watch"} {
		k := [2]string{rawKey + ":" + side, rawKey + ":" + side + ":ck"}
		keys[side] = k
		if err := c.HSet(ctx, k[1], "v", "0", "d", doc).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		c.Del(ctx, plain.keys...)
		for _, k := range keys {
			c.Del(ctx, k[0], k[1])
		}
	})
	if err := plain.AddItems(ctx, items); err != nil {
		b.Fatal(err)
	}
	if err := s.AddItems(ctx, items); err != nil {
		b.Fatal(err)
	}
	libV, err := s.SaveCheckpoint(ctx, "run", doc, 0)
	if err != nil {
		b.Fatal(err)
	}
	sha, err := c.ScriptLoad(ctx, floorScript).Result()
	if err != nil {
		b.Fatal(err)
	}
	conn := c.(*goredis.Client).Conn()
	b.Cleanup(func() { conn.Close() })
	evalV, watchV := 0, 0
	watched := "" // the version the last watch commit read back
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	med := interleave.Run(b, nil, func() {
		var err error
		libV, err = s.AppendWithCheckpoint(ctx, items, "run", doc, libV)
		must(err)
	}, interleave.Side{Name: "rpush", Op: func() {
		must(c.RPush(ctx, rawKey, args...).Err())
	}}, interleave.Side{Name: "append", Op: func() {
		must(plain.AddItems(ctx, items))
	}}, interleave.Side{Name: "unfenced", Op: func() {
		k := keys["unfenced"]
		_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.RPush(ctx, k[0], args...)
			p.HSet(ctx, k[1], "v", "1", "d", doc)
			return nil
		})
		must(err)
	}}, interleave.Side{Name: "evalsha", Op: func() {
		k := keys["evalsha"]
		n, err := c.EvalSha(ctx, sha, k[:], append([]any{strconv.Itoa(evalV), doc}, args...)...).Int()
		must(err)
		if n != 1 {
			b.Fatalf("evalsha: version %d refused", evalV)
		}
		evalV++
	}}, interleave.Side{Name: "watch", Op: func() {
		k := keys["watch"]
		next := strconv.Itoa(watchV + 1)
		if watched != "" && watched != strconv.Itoa(watchV) {
			b.Fatalf("watch: stored version %s, not %d", watched, watchV)
		}
		var exec, get *goredis.Cmd
		_, err := conn.Pipelined(ctx, func(p goredis.Pipeliner) error {
			if watched == "" {
				p.Do(ctx, "watch", k[0], k[1])
			}
			p.Do(ctx, "multi")
			p.Do(ctx, append([]any{"rpush", k[0]}, args...)...)
			p.Do(ctx, "hset", k[1], "v", next, "d", doc)
			exec = p.Do(ctx, "exec")
			p.Do(ctx, "watch", k[0], k[1])
			get = p.Do(ctx, "hget", k[1], "v")
			return nil
		})
		must(err)
		if r, err := exec.Slice(); err != nil || len(r) != 2 {
			b.Fatalf("watch: EXEC aborted or failed: %v %v", r, err)
		}
		watched, err = get.Text()
		must(err)
		watchV++
	}})
	for _, side := range []string{"append", "unfenced", "evalsha", "watch", interleave.Lib} {
		b.ReportMetric(med[side]/med["rpush"], side+"/rpush")
	}
	b.ReportMetric(med[interleave.Lib]/med["append"], "lib/append")
}
