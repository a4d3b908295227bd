package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
)

func times(t *testing.T, dsn, id string) (adapters.SessionTimes, bool) {
	t.Helper()
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	ts, ok := st.(adapters.Timestamps)
	require.True(t, ok, "%s keeps session times", dsn)
	got, found, err := ts.SessionTimes(context.Background(), id)
	require.NoError(t, err)
	return got, found
}

// TestMigrateAndRepairKeepSessionTimes: a migrated session keeps its
// created_at and updated_at on every pair of backends that keep them (the
// Redis native layout keeps created_at only), and a repaired one keeps its
// created_at.
func TestMigrateAndRepairKeepSessionTimes(t *testing.T) {
	created := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	updated := time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)
	var backends []storetest.Backend
	for _, b := range storetest.Backends() {
		if b.Peer {
			backends = append(backends, b)
		}
	}
	for _, from := range backends {
		t.Run(from.Name, func(t *testing.T) {
			src := from.URL(t)
			seed(t, src, "old", `{"role":"user","content":"hi"}`)
			st, err := adapters.Open(context.Background(), src)
			require.NoError(t, err)
			require.NoError(t, st.(adapters.Timestamps).SetSessionTimes(context.Background(), "old", adapters.SessionTimes{Created: created, Updated: updated}))
			require.NoError(t, st.Close())
			want, ok := times(t, src, "old")
			require.True(t, ok)
			require.True(t, want.Created.Equal(created), "%s keeps created_at: %v", from.Name, want.Created)
			require.True(t, want.Updated.Equal(updated), "%s keeps updated_at: %v", from.Name, want.Updated)
			for _, to := range backends {
				if to.Name == from.Name {
					continue
				}
				dst := to.URL(t)
				code, _, stderr := sessionctl(t, "migrate", "-offline", "--from", src, "--to", dst, "--session", "old")
				require.Equal(t, 0, code, stderr)
				got, ok := times(t, dst, "old")
				require.True(t, ok)
				require.True(t, got.Created.Equal(created), "%s -> %s: created_at %v", from.Name, to.Name, got.Created)
				if !want.Updated.IsZero() {
					require.True(t, got.Updated.Equal(updated), "%s -> %s: updated_at %v", from.Name, to.Name, got.Updated)
				}
			}
			// repair: an orphan output is quarantined; created_at stays.
			seed(t, src, "old", `{"type":"function_call_output","call_id":"gone","output":"x"}`)
			code, _, stderr := sessionctl(t, "repair", "-apply", "-offline", "-backup", "-", src, "old")
			require.Equal(t, 0, code, stderr)
			got, ok := times(t, src, "old")
			require.True(t, ok)
			require.True(t, got.Created.Equal(created), "%s: repair keeps created_at: %v", from.Name, got.Created)
		})
	}
}
