package session_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// sharedDir returns the shared folder beside the repository root.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared")
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "repository root not found")
		dir = parent
	}
}

func TestDigestsMatchPythonGoldenVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(sharedDir(t), "fixtures", "digests.json"))
	require.NoError(t, err, "the golden vectors are required")
	var doc struct {
		Vectors []struct {
			ItemJSON    string `json:"item_json"`
			IgnoreIDs   bool   `json:"ignore_ids"`
			Fingerprint string `json:"fingerprint"`
			SHA256      string `json:"sha256"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.Vectors)
	for _, v := range doc.Vectors {
		it, err := session.ParseItem(v.ItemJSON)
		require.NoError(t, err)
		fp, err := session.Fingerprint(it, v.IgnoreIDs)
		require.NoError(t, err)
		require.Equal(t, v.Fingerprint, fp, v.ItemJSON)
		d, err := session.Digest(it, v.IgnoreIDs)
		require.NoError(t, err)
		require.Equal(t, v.SHA256, d, v.ItemJSON)
	}
	t.Logf("%d golden vectors match", len(doc.Vectors))
}
