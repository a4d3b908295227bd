package linearize

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/agentsessions/sessions/session"
)

// splitBatches is a broken session: AddItems appends its batch one item at
// a time, yielding between, so batches interleave and reads see halves.
type splitBatches struct{ session.Session }

func (s splitBatches) AddItems(ctx context.Context, items []session.Item) error {
	for _, it := range items {
		if err := s.Session.AddItems(ctx, []session.Item{it}); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// dropEvery is a broken session: every nth batch it acknowledges is not
// written.
type dropEvery struct {
	session.Session
	n     int64
	count *atomic.Int64
}

func (s dropEvery) AddItems(ctx context.Context, items []session.Item) error {
	if len(items) > 0 && s.count.Add(1)%s.n == 0 {
		return nil
	}
	return s.Session.AddItems(ctx, items)
}

// TestNegativeControls proves that the campaign can fail: on two broken
// sessions over the memory backend, it must find a history that is not
// linearizable.
func TestNegativeControls(t *testing.T) {
	set := current()
	set.histories = max(set.histories, 10)
	set.pace = 0 // as busy as it gets
	controls := []struct {
		name string
		wrap func(session.Session) session.Session
	}{
		{"split-batches", func(s session.Session) session.Session { return splitBatches{s} }},
		{"drop-every-20th", func(s session.Session) session.Session {
			return dropEvery{Session: s, n: 20, count: new(atomic.Int64)}
		}},
	}
	for _, c := range controls {
		t.Run(c.name, func(t *testing.T) {
			open := storeOpener(t, "memory://")
			record := plain(func(id string) (session.Session, error) {
				s, err := open(id)
				if err != nil {
					return nil, err
				}
				return c.wrap(s), nil
			}, nil)
			tl := campaign(t, "control-"+c.name, record, 8, set)
			if tl.illegal == 0 {
				t.Fatalf("the checker found all %d histories of a broken session linearizable", tl.histories)
			}
		})
	}
}
