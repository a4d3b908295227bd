package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// failoverCounts are what one failover run saw.
type failoverCounts struct {
	acked       int // batches whose AddItems returned nil
	lost        int // of those, batches missing (wholly or in part) after the failover
	refused     int // AddItems that returned an error
	notReplicas int // of those, *ReplicaError: written on the primary, not acknowledged
	ackedCut    int // batches acknowledged while the replica was cut off
	ackedAfter  int // batches acknowledged after the failover
}

// failoverRun runs 8 writers appending 2-item batches through the sentinel
// URL, each to its own session, while the replica is cut off from the
// primary (so that it lags), the primary is killed (SIGKILL), the
// sentinels promote the replica and a fresh replica replaces the dead
// server; then it counts the acknowledged batches the new primary lacks.
func failoverRun(t *testing.T, waitReplicas int, phase time.Duration) failoverCounts {
	ctx := context.Background()
	g := testservers.NewSentinelGroup(t)
	st, err := Open(ctx, g.URL("dial_timeout=500ms"), Options{KeyPrefix: uniquePrefix(t), WaitReplicas: waitReplicas, WaitTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	const writers = 8
	var mu sync.Mutex
	var c failoverCounts
	acked := make([][]int, writers)
	ackedStage := make([]map[int]int, writers)
	for w := range ackedStage {
		ackedStage[w] = map[int]int{}
	}
	errs := map[string]int{}
	stage := 0 // 0 before the cut, 1 cut, 2 after the failover
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		s, err := st.Session(fmt.Sprintf("w%d", w))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				items := []session.Item{
					session.MustItem(fmt.Sprintf(`{"w":%d,"b":%d,"i":0}`, w, b)),
					session.MustItem(fmt.Sprintf(`{"w":%d,"b":%d,"i":1}`, w, b)),
				}
				err := s.AddItems(ctx, items)
				mu.Lock()
				if err == nil {
					acked[w] = append(acked[w], b)
					ackedStage[w][b] = stage
					c.acked++
					switch stage {
					case 1:
						c.ackedCut++
					case 2:
						c.ackedAfter++
					}
				} else {
					c.refused++
					msg := err.Error()
					if len(msg) > 120 {
						msg = msg[:120]
					}
					errs[msg]++
					var re *ReplicaError
					if errors.As(err, &re) {
						c.notReplicas++
						if !errors.Is(err, session.ErrOutcomeUnknown) || re.Wanted != waitReplicas || re.Acked >= re.Wanted ||
							!strings.Contains(err.Error(), fmt.Sprintf("acknowledged by %d of %d replicas", re.Acked, re.Wanted)) && re.Err == nil {
							t.Errorf("replica error %v: %+v", err, re)
						}
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	setStage := func(n int) {
		mu.Lock()
		stage = n
		mu.Unlock()
	}
	time.Sleep(phase)
	require.NoError(t, g.CutReplica())
	setStage(1)
	time.Sleep(phase)
	old, err := g.KillPrimary()
	require.NoError(t, err)
	primary, err := g.WaitFailover(old, 30*time.Second)
	require.NoError(t, err)
	setStage(2)
	_, err = g.StartReplica(10 * time.Second)
	require.NoError(t, err)
	// go-redis's pool, after a run of failed dials, answers with the last
	// dial error until its background redial (about once a second) gets
	// through: wait for the first acknowledgement from the new primary.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := c.ackedAfter
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	time.Sleep(phase)
	close(stop)
	wg.Wait()

	lostStage := map[int]int{}
	// What the new primary holds, read through the store.
	for w := range writers {
		s, err := st.Session(fmt.Sprintf("w%d", w))
		require.NoError(t, err)
		var items []session.Item
		for try := 0; ; try++ {
			if items, err = s.Items(ctx); err == nil || try == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, err)
		have := map[string]int{}
		for _, it := range items {
			have[it.String()]++
		}
		for _, b := range acked[w] {
			if have[fmt.Sprintf(`{"w":%d,"b":%d,"i":0}`, w, b)] != 1 || have[fmt.Sprintf(`{"w":%d,"b":%d,"i":1}`, w, b)] != 1 {
				c.lost++
				lostStage[ackedStage[w][b]]++
			}
		}
	}
	t.Logf("WaitReplicas=%d: failover %s -> %s; %d batches acknowledged (%d while the replica was cut off, %d after the failover), %d lost; %d writes refused (%d of them *ReplicaError)",
		waitReplicas, old, primary, c.acked, c.ackedCut, c.ackedAfter, c.lost, c.refused, c.notReplicas)
	t.Logf("lost by stage: %v; errors: %v", lostStage, errs)
	require.Positive(t, c.ackedAfter, "the writers went on after the failover")
	return c
}

// TestWaitReplicasFailover is issue 24.5: with a primary, one replica and
// three sentinels, writers append through the sentinel URL while the
// replica lags, and the primary is killed. Without WaitReplicas the
// batches acknowledged while the replica lagged are lost with the
// primary; with WaitReplicas=1, every acknowledged batch survives (the
// writes the replica did not take returned a *ReplicaError). Each phase
// lasts 400 ms, 3 s with SESSIONS_LONG=1.
func TestWaitReplicasFailover(t *testing.T) {
	phase := 400 * time.Millisecond
	if os.Getenv("SESSIONS_LONG") == "1" {
		phase = 3 * time.Second
	}
	t.Run("without", func(t *testing.T) {
		t.Parallel()
		c := failoverRun(t, 0, phase)
		require.Positive(t, c.lost, "without WaitReplicas, the batches acknowledged while the replica was cut off are lost")
		require.Zero(t, c.notReplicas)
	})
	t.Run("with", func(t *testing.T) {
		t.Parallel()
		c := failoverRun(t, 1, phase)
		require.Zero(t, c.lost, "with WaitReplicas=1 no acknowledged batch is lost")
		require.Positive(t, c.notReplicas, "the writes the cut-off replica did not take were refused")
	})
}

// TestWaitReplicasShortfall: wait_replicas on a deployment with fewer
// replicas (the shared standalone server and cluster have none): every
// kind of write happens on the primary and returns a *ReplicaError
// wrapping session.ErrOutcomeUnknown that names the count; reads and
// conflicts (which wrote nothing) wait for nothing.
func TestWaitReplicasShortfall(t *testing.T) {
	for name, client := range bothClients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var st *Store
			if name == "standalone" {
				as, err := adapters.Open(ctx, withQuery(t, testservers.Redis(t), map[string]string{
					"key_prefix": uniquePrefix(t), "wait_replicas": "1", "wait_timeout": "20ms"}))
				require.NoError(t, err)
				t.Cleanup(func() { _ = as.Close() })
				st = as.(*urlStore).st
			} else {
				st = newStore(t, client(t), Options{KeyPrefix: uniquePrefix(t), WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond, TTL: time.Hour})
			}
			require.Equal(t, 1, st.Options().WaitReplicas)
			require.Equal(t, 20*time.Millisecond, st.Options().WaitTimeout)
			s, err := st.Session("short")
			require.NoError(t, err)
			short := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				var re *ReplicaError
				require.ErrorAs(t, err, &re)
				require.Equal(t, 0, re.Acked)
				require.Equal(t, 1, re.Wanted)
				require.Contains(t, err.Error(), "acknowledged by 0 of 1 replicas within 20ms")
			}
			a := conformance.Numbered("a", 3)
			short(s.AddItems(ctx, a[:2])) // a new session: the script
			short(s.AddItems(ctx, a[2:])) // RPUSHX
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(a), texts(got), "written on the primary")
			it, ok, err := s.PopItem(ctx)
			short(err)
			require.True(t, ok, "the item popped comes with the error")
			require.Equal(t, a[2].String(), it.String())
			short(s.ReplaceItems(ctx, a[:1]))
			v, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			short(s.ReplaceItemsIf(ctx, v, a[:2]))
			require.ErrorIs(t, s.ReplaceItemsIf(ctx, v, a[:1]), session.ErrHistoryChanged, "a conflict is a conflict, not a shortfall")
			_, err = s.SaveCheckpoint(ctx, "c", []byte(`{}`), 0)
			short(err)
			_, err = s.SaveCheckpoint(ctx, "c", []byte(`{}`), 0)
			require.ErrorIs(t, err, session.ErrCheckpointConflict)
			short(s.DeleteCheckpoint(ctx, "c", 1))
			short(s.Clear(ctx))
			got, err = s.Items(ctx)
			require.NoError(t, err)
			require.Empty(t, got)
		})
	}
}
