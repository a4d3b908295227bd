package history_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// bigHistory returns the stored rows of a 3.2 MB history: 25 call/output
// pairs, 50 items of about 64 KB each.
func bigHistory() []string {
	pad := strings.Repeat(`The quick brown fox jumps over the lazy dog; \"quoted\" 3.14 `, 1060)
	rows := make([]string, 0, 50)
	for i := range 25 {
		rows = append(rows,
			fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"read_file","arguments":"{\"path\": \"%s\"}","status":"completed"}`, i, i, pad),
			fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"%s"}`, i, pad))
	}
	return rows
}

func size(rows []string) int64 {
	n := 0
	for _, r := range rows {
		n += len(r)
	}
	return int64(n)
}

// BenchmarkValidatePass is the floor: one validation pass over every row,
// as an adapter's read does.
func BenchmarkValidatePass(b *testing.B) {
	rows := bigHistory()
	b.SetBytes(size(rows))
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range rows {
			if _, err := driver.DecodeStoredString(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkModelInputEquivalent is what ModelInput does over a backend:
// decode (validate) every row, then SafeWindow.
func BenchmarkModelInputEquivalent(b *testing.B) {
	rows := bigHistory()
	b.SetBytes(size(rows))
	b.ReportAllocs()
	items := make([]session.Item, len(rows))
	for b.Loop() {
		modelInput(b, rows, items)
	}
}

// modelInput decodes rows into items, as a backend's read does, and keeps
// the SafeWindow of them (the last 50 items of the big history).
func modelInput(b *testing.B, rows []string, items []session.Item) {
	for i, r := range rows {
		it, err := driver.DecodeStoredString(r)
		if err != nil {
			b.Fatal(err)
		}
		items[i] = it
	}
	if got := history.SafeWindow(items); len(got) != 50 {
		b.Fatalf("kept %d", len(got))
	}
}

// BenchmarkModelInputMemory is ModelInput itself over the memory adapter
// (which copies and validates every stored record on read).
func BenchmarkModelInputMemory(b *testing.B) {
	ctx := context.Background()
	s, err := memory.NewSession("s")
	if err != nil {
		b.Fatal(err)
	}
	rows := bigHistory()
	items := make([]session.Item, len(rows))
	for i, r := range rows {
		items[i] = session.MustItem(r)
	}
	if err := s.AddItems(ctx, items); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size(rows))
	b.ReportAllocs()
	for b.Loop() {
		got, err := history.ModelInput(ctx, s, 50)
		if err != nil || len(got) != 50 {
			b.Fatal(len(got), err)
		}
	}
}

// BenchmarkSafeWindowOnly is the pruning alone over already decoded items.
func BenchmarkSafeWindowOnly(b *testing.B) {
	rows := bigHistory()
	items := make([]session.Item, len(rows))
	for i, r := range rows {
		items[i] = session.MustItem(r)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := history.SafeWindow(items); len(got) != 50 {
			b.Fatalf("kept %d", len(got))
		}
	}
}

// saveItems is a turn of 20 items: 8 call/output pairs and 4 messages.
func saveItems() []session.Item {
	var out []session.Item
	for i := range 8 {
		out = append(out,
			session.MustItem(fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"get_weather","arguments":"{\"location\": \"Paris, France\", \"unit\": \"celsius\"}","status":"completed"}`, i, i)),
			session.MustItem(fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"{\"temperature\": 18, \"conditions\": \"clear\", \"wind\": \"5 km/h NW\"}"}`, i)))
	}
	for i := range 4 {
		out = append(out, session.MustItem(fmt.Sprintf(`{"type":"message","id":"msg_%d","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Paris is clear and 18 degrees today, reply %d.","annotations":[]}]}`, i, i)))
	}
	return out
}

// BenchmarkSave compares runstate's Save with Register against a plain
// session.Append of the same 20 items, and against the budget for
// it (one tail read, one digest per item, the append), each into a memory
// session that already holds a conversation (so the tail read returns
// items to digest, as in real use).
func BenchmarkSave(b *testing.B) {
	ctx := context.Background()
	batch := saveItems()
	fresh := func(b *testing.B) session.Session {
		s, err := memory.NewSession("s")
		if err != nil {
			b.Fatal(err)
		}
		if err := session.Append(ctx, s, append(saveItems(), saveItems()...)); err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("append", func(b *testing.B) {
		s := fresh(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := session.Append(ctx, s, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("budget", func(b *testing.B) {
		s := fresh(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := session.Latest(ctx, s, len(batch)+1); err != nil {
				b.Fatal(err)
			}
			if _, err := history.Digests(batch, false); err != nil {
				b.Fatal(err)
			}
			if err := session.Append(ctx, s, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("save-register", func(b *testing.B) {
		s := fresh(b)
		b.ReportAllocs()
		for b.Loop() {
			cp := runstate.New()
			cp.SetStep(runstate.StepRunAgain)
			if _, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: batch, Register: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDigests is the digest of each of the 20 items of a turn.
func BenchmarkDigests(b *testing.B) {
	batch := saveItems()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := history.Digests(batch, false); err != nil {
			b.Fatal(err)
		}
	}
}

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkModelInputRatio times, interleaved op by op, one validation pass
// over the 3.2 MB history (the floor: what an adapter's read does) and the
// ModelInput-equivalent (the same decode, then SafeWindow), and reports the
// medians and their ratio, so machine load hits both sides alike.
func BenchmarkModelInputRatio(b *testing.B) {
	rows := bigHistory()
	items := make([]session.Item, len(rows))
	var floor, full []time.Duration
	for b.Loop() {
		t0 := time.Now()
		for _, r := range rows {
			if _, err := driver.DecodeStoredString(r); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		modelInput(b, rows, items)
		t2 := time.Now()
		floor, full = append(floor, t1.Sub(t0)), append(full, t2.Sub(t1))
	}
	f, m := median(floor), median(full)
	b.ReportMetric(float64(f.Microseconds()), "validate-µs")
	b.ReportMetric(float64(m.Microseconds()), "modelinput-µs")
	b.ReportMetric(float64(m)/float64(f), "ratio")
}

// BenchmarkSaveRatio times, interleaved op by op, a plain Append of 20
// items, the protocol's floor (tail read + append), the budget
// (tail read + one digest per item + append) and runstate's Save with
// Register, each into its own session holding a conversation, and reports
// the medians and the ratios to Append: on
// memory (where an append costs microseconds, so the ratio is mostly the
// digests) and on SQLite files at synchronous FULL and NORMAL.
func BenchmarkSaveRatio(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		saveRatio(b, func(string) session.Session {
			s, err := memory.NewSession("s")
			if err != nil {
				b.Fatal(err)
			}
			return s
		})
	})
	for _, sync := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		b.Run("sqlite-"+string(sync), func(b *testing.B) {
			// Each side its own file and the same session id: sessions of
			// one file sorted apart would pay differently for their place
			// in the index.
			dir := b.TempDir()
			saveRatio(b, func(side string) session.Session {
				st, err := sqlite.OpenFile(context.Background(), filepath.Join(dir, side+".db"), sqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				s, err := st.Session("s")
				if err != nil {
					b.Fatal(err)
				}
				return s
			})
		})
	}
}

func saveRatio(b *testing.B, open func(id string) session.Session) {
	ctx := context.Background()
	batch := saveItems()
	mk := func(side string) session.Session {
		s := open(side)
		if err := session.Append(ctx, s, append(saveItems(), saveItems()...)); err != nil {
			b.Fatal(err)
		}
		return s
	}
	sa, sf, sb, sc := mk("append"), mk("floor"), mk("budget"), mk("save")
	var ta, tf, tb, tc []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := session.Append(ctx, sa, batch); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		// The floor of the protocol: the tail read a registered append
		// needs before it (to tell a lost acknowledgement from a failed
		// append), then the append.
		if _, err := session.Latest(ctx, sf, len(batch)+1); err != nil {
			b.Fatal(err)
		}
		if err := session.Append(ctx, sf, batch); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := session.Latest(ctx, sb, len(batch)+1); err != nil {
			b.Fatal(err)
		}
		if _, err := history.Digests(batch, false); err != nil {
			b.Fatal(err)
		}
		if err := session.Append(ctx, sb, batch); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		cp := runstate.New()
		cp.SetStep(runstate.StepRunAgain)
		if _, err := cp.Save(ctx, sc, runstate.SaveArgs{NewItems: batch, Register: true}); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		ta, tf = append(ta, t1.Sub(t0)), append(tf, t2.Sub(t1))
		tb, tc = append(tb, t3.Sub(t2)), append(tc, t4.Sub(t3))
	}
	a := median(ta)
	b.ReportMetric(float64(a.Microseconds()), "append-µs")
	b.ReportMetric(float64(median(tf))/float64(a), "floor/append")
	b.ReportMetric(float64(median(tb))/float64(a), "budget/append")
	b.ReportMetric(float64(median(tc))/float64(a), "save/append")
}
