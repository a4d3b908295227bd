package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
)

// TestVersionedReplace is issue 24.4: HistoryVersion and ReplaceItemsIf on
// every deployment and layout. A version read before an append no longer
// matches: ReplaceItemsIf refuses with ErrHistoryChanged and writes
// nothing; a version is the content's, so it comes back with the content.
func TestVersionedReplace(t *testing.T) {
	for _, tc := range popLayouts {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout})
			s, err := st.Session("v")
			require.NoError(t, err)
			require.True(t, session.Probe(s).Has(session.CapVersionedReplace))

			empty, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			a := conformance.Numbered("a", 3)
			require.NoError(t, s.AddItems(ctx, a))
			v1, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			require.NotEqual(t, empty, v1)
			again, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			require.Equal(t, v1, again, "an unchanged history keeps its version")

			// another writer appends between the read and the replace
			other, err := st.Session("v")
			require.NoError(t, err)
			b := conformance.Numbered("b", 1)
			require.NoError(t, other.AddItems(ctx, b))
			err = s.ReplaceItemsIf(ctx, v1, a[:1])
			require.ErrorIs(t, err, session.ErrHistoryChanged)
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(append(append([]session.Item{}, a...), b...)), texts(got), "nothing written, nothing lost")

			// an unreadable record changes the version too
			v2, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			require.NoError(t, c.RPush(ctx, s.Keys()[0], "junk").Err())
			require.ErrorIs(t, s.ReplaceItemsIf(ctx, v2, a[:1]), session.ErrHistoryChanged)
			require.NoError(t, c.RPop(ctx, s.Keys()[0]).Err())
			back, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			require.Equal(t, v2, back, "the same records give the same version")

			require.NoError(t, s.ReplaceItemsIf(ctx, v2, a[:1]))
			got, err = s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(a[:1]), texts(got))
			require.ErrorIs(t, s.ReplaceItemsIf(ctx, v2, a), session.ErrHistoryChanged, "a version is good for one replace")

			v3, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			require.NoError(t, s.ReplaceItemsIf(ctx, v3, nil))
			got, err = s.Items(ctx)
			require.NoError(t, err)
			require.Empty(t, got)
			v4, err := s.HistoryVersion(ctx)
			require.NoError(t, err)
			require.Equal(t, empty, v4)
			require.NoError(t, s.ReplaceItemsIf(ctx, empty, b), "the empty history's version replaces a missing list")
			got, err = s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(b), texts(got))
		})
	}
}

// TestVersionedReplaceConcurrent: a rewriter that reads the version and
// the history and rewrites it with ReplaceItemsIf (retrying on
// ErrHistoryChanged), beside appenders: every batch appended is there
// exactly once at the end, though every rewrite put back what it read.
func TestVersionedReplaceConcurrent(t *testing.T) {
	for _, tc := range popLayouts {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t, tc.client(t), Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout})
			s, err := st.Session("vc")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("seed", 1)))
			const writers, batches = 3, 40
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for b := range batches {
						if err := s.AddItems(ctx, []session.Item{session.MustItem(fmt.Sprintf(`{"w":%d,"b":%d}`, w, b))}); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			done := make(chan struct{})
			rewrites, conflicts := 0, 0
			go func() {
				defer close(done)
				for i := 0; i < 30; i++ {
					v, err := s.HistoryVersion(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					items, err := s.Items(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					err = s.ReplaceItemsIf(ctx, v, items)
					switch {
					case errors.Is(err, session.ErrHistoryChanged):
						conflicts++
					case err != nil:
						t.Error(err)
						return
					default:
						rewrites++
					}
				}
			}()
			wg.Wait()
			<-done
			got, err := s.Items(ctx)
			require.NoError(t, err)
			seen := map[string]int{}
			for _, it := range got {
				seen[it.String()]++
			}
			for w := range writers {
				for b := range batches {
					require.Equal(t, 1, seen[fmt.Sprintf(`{"w":%d,"b":%d}`, w, b)], "w%d b%d", w, b)
				}
			}
			require.Len(t, got, 1+writers*batches)
			t.Logf("%d rewrites, %d refused with ErrHistoryChanged", rewrites, conflicts)
		})
	}
}
