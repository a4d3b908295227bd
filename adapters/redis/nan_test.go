package redis

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// nanItems hold the tokens Python's json.dumps writes for float('nan') and
// the infinities (allow_nan=True by default), in the spacing Go callers
// and Python each write.
var nanItems = []string{
	`{"x": NaN}`,
	`{"y": -Infinity}`,
	`{"type":"function_call_output","call_id":"c1","output":"ok","score":Infinity,"v":[NaN,-Infinity,1.5]}`,
	`{"nested": {"a": [Infinity, {"b": NaN}]}}`,
}

// TestNaNRoundTrip is issue 9.3 for Redis: records holding NaN, Infinity
// and -Infinity, written by Go or by Python's add_items, are stored,
// returned, popped and replaced byte for byte on every deployment and
// layout, and never reported as corrupt.
func TestNaNRoundTrip(t *testing.T) {
	for _, tc := range popLayouts {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			reported := 0
			prefix := uniquePrefix(t)
			st := newStore(t, c, Options{KeyPrefix: prefix, Layout: tc.layout,
				OnCorrupt: func(context.Context, driver.CorruptRecord) { reported++ }})
			s, err := st.Session("nan")
			require.NoError(t, err)
			items := make([]session.Item, len(nanItems))
			for i, raw := range nanItems {
				items[i], err = session.ParseItem(raw)
				require.NoError(t, err, raw)
			}
			require.NoError(t, s.AddItems(ctx, items))
			want := append([]string{}, nanItems...)
			if tc.layout == LayoutPython {
				// Python's own add_items, as json.dumps writes the tokens
				py := newPySession(t, c, prefix, "nan", 0)
				want = append(want, py.addItems(nanItems[:2])...)
				require.Equal(t, []string{`{"x":NaN}`, `{"y":-Infinity}`}, want[len(nanItems):])
				require.Equal(t, want, py.getItems(-1), "Python reads them all")
			}
			stored, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
			require.NoError(t, err)
			require.Equal(t, want, stored, "stored byte for byte")
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, want, texts(got))
			latest, err := s.LatestItems(ctx, 2)
			require.NoError(t, err)
			require.Equal(t, want[len(want)-2:], texts(latest))
			it, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want[len(want)-1], it.String())
			require.NoError(t, s.ReplaceItems(ctx, got[:2]))
			got, err = s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, want[:2], texts(got))
			require.Zero(t, reported, "no record was reported as corrupt")
		})
	}
}
