package genkit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	aix "github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/core/status"
	"github.com/stretchr/testify/require"

	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// twoWriters returns two Stores over one backend, each through its own
// client where the backend has one (as two processes would be).
func twoWriters(t *testing.T, b storetest.Backend, opts genkitstore.Options) (*genkitstore.Store[note], *genkitstore.Store[note]) {
	be := newBackend(t, b)
	st1, close1 := be.open(t)
	t.Cleanup(close1)
	st2, close2 := be.open(t)
	t.Cleanup(close2)
	return newStore[note](t, st1, opts), newStore[note](t, st2, opts)
}

// barrier holds the first call of each of n functions until all n have
// been called: by then every writer has loaded the row.
type barrier struct {
	wg    sync.WaitGroup
	calls atomic.Int64
}

func newBarrier(n int) *barrier {
	b := &barrier{}
	b.wg.Add(n)
	return b
}

func (b *barrier) wait(first *bool) {
	b.calls.Add(1)
	if *first {
		*first = false
		b.wg.Done()
		b.wg.Wait()
	}
}

const rounds = 6

// TestTwoWritersStaleLoses: two writers load the same version of a row
// (each holds until the other has loaded) and save; with Attempts 1, the
// compare-and-set lets exactly one through, and the other gets the
// conflict error, which errors.Is matches as ours, genkit's Aborted and
// the library's checkpoint conflict. The stored row is the winner's.
func TestTwoWritersStaleLoses(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			w1, w2 := twoWriters(t, b, genkitstore.Options{Attempts: 1})
			wins := map[string]int{}
			for round := range rounds {
				id := fmt.Sprintf("row-%d", round)
				_, err := w1.SaveSnapshot(ctx, id, func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
					return row("s1", t0, aix.SnapshotStatusPending, "start"), nil
				})
				require.NoError(t, err)
				bar := newBarrier(2)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i, w := range []*genkitstore.Store[note]{w1, w2} {
					name := fmt.Sprintf("writer-%d", i+1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						first := true
						_, errs[i] = w.SaveSnapshot(ctx, id, func(e *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
							bar.wait(&first)
							e.State.Custom.Text = name
							e.Status = aix.SnapshotStatusCompleted
							return e, nil
						})
					}()
				}
				wg.Wait()
				require.Equal(t, int64(2), bar.calls.Load(), "each function ran once")
				winner := -1
				for i, err := range errs {
					if err == nil {
						require.Equal(t, -1, winner, "round %d: both saves succeeded", round)
						winner = i
						continue
					}
					require.ErrorIs(t, err, genkitstore.ErrSnapshotConflict)
					require.ErrorIs(t, err, status.ErrAborted)
					require.ErrorIs(t, err, session.ErrCheckpointConflict)
					if round == 0 {
						t.Logf("the stale writer: %v", err)
					}
				}
				require.NotEqual(t, -1, winner, "round %d: neither save succeeded: %v", round, errs)
				got, err := w2.GetSnapshot(ctx, id)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("writer-%d", winner+1), got.State.Custom.Text, "the winner's row is stored")
				wins[got.State.Custom.Text]++
			}
			t.Logf("%s: %d rounds, exactly one save won each: %v", b.Name, rounds, wins)
		})
	}
}

// TestAbortRacesFinalize is genkit's own race: a detached run's finalize
// and a client's abort both flip a pending row, each only if it is still
// pending. With the default retries, the loser's function runs again on
// the winner's row and declines: exactly one flip is stored, and the
// loser reports the status it found.
func TestAbortRacesFinalize(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			w1, w2 := twoWriters(t, b, genkitstore.Options{})
			wins := map[aix.SnapshotStatus]int{}
			for round := range rounds {
				id := fmt.Sprintf("pending-%d", round)
				_, err := w1.SaveSnapshot(ctx, id, func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
					return row("s1", t0, aix.SnapshotStatusPending, "running"), nil
				})
				require.NoError(t, err)
				bar := newBarrier(2)
				saved := make([]*aix.SessionSnapshot[note], 2)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i, flip := range []aix.SnapshotStatus{aix.SnapshotStatusCompleted, aix.SnapshotStatusAborted} {
					w := []*genkitstore.Store[note]{w1, w2}[i]
					wg.Add(1)
					go func() {
						defer wg.Done()
						first := true
						saved[i], errs[i] = w.SaveSnapshot(ctx, id, func(e *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
							bar.wait(&first)
							if e == nil || e.Status != aix.SnapshotStatusPending {
								return nil, nil
							}
							e.Status = flip
							e.UpdatedAt = t0.Add(time.Minute)
							return e, nil
						})
					}()
				}
				wg.Wait()
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				require.True(t, (saved[0] == nil) != (saved[1] == nil), "round %d: exactly one flip is written: %v", round, saved)
				require.Equal(t, int64(3), bar.calls.Load(), "the loser's function ran again, on the winner's row")
				got, err := w1.GetSnapshot(ctx, id)
				require.NoError(t, err)
				for _, s := range saved {
					if s != nil {
						require.Equal(t, s.Status, got.Status)
					}
				}
				wins[got.Status]++
			}
			t.Logf("%s: %d rounds, one flip each: %v", b.Name, rounds, wins)
		})
	}
}

// TestManyWritersNoLostUpdate: writers in two clients each append their
// mark to one row many times; every mark is kept, none twice (the
// retries apply each function to the row as it is).
func TestManyWritersNoLostUpdate(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			w1, w2 := twoWriters(t, b, genkitstore.Options{Attempts: 1000})
			const id, perWriter = "counter", 10
			_, err := w1.SaveSnapshot(ctx, id, func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
				return row("s1", t0, "", ""), nil
			})
			require.NoError(t, err)
			var wg sync.WaitGroup
			var calls atomic.Int64
			errs := make([]error, 4)
			for i, w := range []*genkitstore.Store[note]{w1, w2, w1, w2} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := range perWriter {
						_, err := w.SaveSnapshot(ctx, id, func(e *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
							calls.Add(1)
							e.State.Custom.Text += fmt.Sprintf("[%d.%d]", i, n)
							return e, nil
						})
						if err != nil {
							errs[i] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			got, err := w2.GetSnapshot(ctx, id)
			require.NoError(t, err)
			for i := range 4 {
				for n := range perWriter {
					require.Contains(t, got.State.Custom.Text, fmt.Sprintf("[%d.%d]", i, n))
				}
			}
			require.Len(t, got.State.Custom.Text, 4*perWriter*len("[0.0]"), "no mark twice")
			t.Logf("%s: %d saves by 4 writers over 2 clients, all kept; %d function calls (%d retried)",
				b.Name, 4*perWriter, calls.Load(), calls.Load()-4*perWriter)
		})
	}
}

// TestStatusSubscription: a subscriber through one client sees a status
// another client writes; a missing snapshot gets a closed channel; the
// channel closes with its context.
func TestStatusSubscription(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w1, w2 := twoWriters(t, b, genkitstore.Options{PollInterval: 10 * time.Millisecond})
			_, ok := <-w1.OnSnapshotStatusChange(ctx, "missing")
			require.False(t, ok, "no snapshot: closed at once")

			_, err := w1.SaveSnapshot(ctx, "job", func(*aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
				return row("s1", t0, aix.SnapshotStatusPending, "running"), nil
			})
			require.NoError(t, err)
			ch := w1.OnSnapshotStatusChange(ctx, "job")
			require.Equal(t, aix.SnapshotStatusPending, <-ch)
			_, err = w2.SaveSnapshot(ctx, "job", func(e *aix.SessionSnapshot[note]) (*aix.SessionSnapshot[note], error) {
				e.Status = aix.SnapshotStatusAborted
				return e, nil
			})
			require.NoError(t, err)
			select {
			case got := <-ch:
				require.Equal(t, aix.SnapshotStatusAborted, got)
			case <-time.After(10 * time.Second):
				t.Fatal("the other client's abort was not seen")
			}
			cancel()
			for range ch {
			}
		})
	}
}
