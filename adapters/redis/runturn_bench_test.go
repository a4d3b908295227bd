package redis

import (
	"fmt"
	"testing"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// runTurnItems is a 20-item turn whose calls are unique to turn i: 8
// function calls with their outputs and 4 assistant messages.
func runTurnItems(i int) []session.Item {
	var out []session.Item
	for k := range 8 {
		out = append(out,
			session.MustItem(fmt.Sprintf(`{"type":"function_call","id":"fc_%d_%d","call_id":"call_%d_%d","name":"get_weather","arguments":"{\"location\": \"Paris\"}","status":"completed"}`, i, k, i, k)),
			session.MustItem(fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d_%d","output":"{\"temperature\": 18}"}`, i, k)))
	}
	for k := range 4 {
		out = append(out, session.MustItem(fmt.Sprintf(`{"type":"message","id":"msg_%d_%d","role":"assistant","status":"completed","content":[{"type":"output_text","text":"reply %d","annotations":[]}]}`, i, k, k)))
	}
	return out
}

// BenchmarkRunTurn (issue 23 item 2): the crash-safe save of a 20-item
// turn on Redis against a plain AddItems of the same turn, interleaved op
// by op on sessions of one store. "append": Session.AddItems. "run-turn":
// runstate's Run.Turn, which registers the batch and commits it with the
// run's checkpoint in one script (AppendWithCheckpoint, no tail read).
// "append-with-checkpoint": the adapter's part of that, the same commit
// sent directly (the document a turn commits, any version).
// "save-register": Checkpoint.Save with Register and Slice on a bare
// Checkpoint, whose append is the digest protocol's (a tail read first),
// for comparison. Reported: the append's median and the others' ratios
// to it. The lists are emptied every 500 turns.
func BenchmarkRunTurn(b *testing.B) {
	for _, ttl := range []string{"none", "1h"} {
		b.Run("ttl="+ttl, func(b *testing.B) {
			opts := Options{}
			if ttl == "1h" {
				opts.TTL = 3600e9
			}
			ctx, c, st, plain, _ := benchSetup(b, opts)
			atomic, err := st.Session("bench-run")
			if err != nil {
				b.Fatal(err)
			}
			digest, err := st.Session("bench-digest")
			if err != nil {
				b.Fatal(err)
			}
			direct, err := st.Session("bench-commit")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				c.Del(ctx, atomic.keys...)
				c.Del(ctx, digest.keys...)
				c.Del(ctx, direct.all...)
			})
			run, err := runstate.Open(ctx, atomic, runstate.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := run.Turn(ctx, "", runTurnItems(-1)...); err != nil {
				b.Fatal(err)
			}
			cp := runstate.New()
			// the document Run.Turn commits, as it stands after a turn
			doc, _, err := atomic.LoadCheckpoint(ctx, runstate.DefaultName)
			if err != nil {
				b.Fatal(err)
			}
			turn := 0
			var batch []session.Item
			interleaveN(b, []side{
				{"append", func() error { return plain.AddItems(ctx, batch) }},
				{"run-turn", func() error { return run.Turn(ctx, "", batch...) }},
				{"append-with-checkpoint", func() error {
					_, err := direct.AppendWithCheckpoint(ctx, batch, runstate.DefaultName, doc, session.AnyVersion)
					return err
				}},
				{"save-register", func() error {
					cp.StartTurn()
					cp.SetStep(runstate.StepRunAgain)
					_, err := cp.Save(ctx, digest, runstate.SaveArgs{NewItems: batch, Slice: true, Register: true})
					return err
				}},
			}, func(i int) {
				batch = runTurnItems(turn)
				turn++
				if i%500 == 0 {
					c.Del(ctx, plain.keys[0], atomic.keys[0], digest.keys[0], direct.keys[0])
				}
			})
		})
	}
}
